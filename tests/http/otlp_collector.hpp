#pragma once

// What the OTLP tests share: a collector (a Keel router taking POST /v1/traces, reading an
// OTLP/JSON or OTLP/protobuf body into the JSON shape) and a running service for the exporter.

#include <chrono>
#include <keel/framework/service.hpp>
#include <keel/http/router.hpp>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "otlp_protobuf_reader.hpp"

namespace keel::http::testing {

// Counts the spans it is sent, keeps them and their resource's service.name, answers
// `status_code`.
struct otlp_collector {
    explicit otlp_collector(int answer = 200) : status_code(answer) {
        router.post("/v1/traces", [this](request& req) -> asio::awaitable<response> {
            auto type = std::string(req.header("Content-Type").value_or(""));
            auto body = type == "application/x-protobuf" ? otlp_protobuf::request(req.body())
                                                         : nlohmann::json::parse(req.body());
            std::lock_guard lock(mutex);
            content_types.push_back(type);
            authorizations.emplace_back(req.header("Authorization").value_or(""));
            for (auto& resource : body["resourceSpans"]) {
                auto name = resource["resource"]["attributes"][0]["value"]["stringValue"];
                for (auto& scope : resource["scopeSpans"])
                    for (auto& s : scope["spans"]) {
                        spans.push_back(s);
                        service_names.push_back(name.get<std::string>());
                    }
            }
            co_return response::text("{}", static_cast<http::status>(status_code),
                                     "application/json");
        });
    }
    std::size_t count() {
        std::lock_guard lock(mutex);
        return spans.size();
    }
    // The first span named `name`, if one came.
    std::optional<nlohmann::json> find(std::string_view name) {
        std::lock_guard lock(mutex);
        for (auto& s : spans)
            if (s["name"] == name) return s;
        return std::nullopt;
    }
    std::vector<nlohmann::json> all() {
        std::lock_guard lock(mutex);
        return spans;
    }

    int status_code;
    http::router router;
    std::mutex mutex;
    std::vector<nlohmann::json> spans;
    std::vector<std::string> service_names;  // one per span
    std::vector<std::string> content_types;  // one per request
    std::vector<std::string> authorizations;  // one per request; "" without the header
};

// A span's attribute as JSON ({"stringValue": ...} / {"intValue": "..."}), or null.
inline nlohmann::json attribute(const nlohmann::json& span, std::string_view key) {
    for (const auto& a : span["attributes"])
        if (a["key"] == key) return a["value"];
    return nullptr;
}

// A keel::service on a thread of its own, for an exporter.
struct running_service {
    running_service() : thread([this] { service.run(); }) {}
    ~running_service() { stop(); }
    void stop() {
        service.stop();
        if (thread.joinable()) thread.join();
    }
    keel::service service{{.threads = 1, .handle_signals = false}};
    std::thread thread;
};

template <class F>
bool eventually(F done, std::chrono::milliseconds limit = std::chrono::seconds(5)) {
    auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
        if (done()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return done();
}

}  // namespace keel::http::testing
