// The OTLP/HTTP JSON exporter: the body it writes (the fields a collector relies on), its
// delivery to a receiver, and what a collector that is down or slow costs: nothing but
// counted drops.

#include <gtest/gtest.h>

#include <chrono>
#include <keel/framework/service.hpp>
#include <keel/http/otlp.hpp>
#include <keel/http/router.hpp>
#include <keel/http/testing.hpp>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

namespace keel::http {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;

trace::span sample(std::string name, bool with_parent) {
    auto root = *trace::parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                                          "congo=t61rcWkgMzE");
    trace::span s;
    s.context = with_parent ? trace::child_of(root) : trace::new_root();
    s.name = std::move(name);
    s.what = trace::span::kind::server;
    s.start =
        std::chrono::system_clock::time_point{std::chrono::nanoseconds{1'718'000'000'000'000'000}};
    s.end = s.start + 1200ms;
    s.attributes = {{"http.route", std::string("/orders/:id")},
                    {"http.response.status_code", std::int64_t{200}},
                    {"keel.replayed", false}};
    return s;
}

TEST(otlp, the_body_has_the_fields_a_collector_reads) {
    std::vector<trace::span> spans{sample("GET /orders/:id", true), sample("step charge", false)};
    spans[1].what = trace::span::kind::internal;
    spans[1].outcome = trace::span::status::error;
    spans[1].message = "card declined";
    auto body = json::parse(encode_otlp_json(spans, "keel-orders"));
    auto& resource = body["resourceSpans"][0];
    EXPECT_EQ(resource["resource"]["attributes"][0],
              json({{"key", "service.name"}, {"value", {{"stringValue", "keel-orders"}}}}));
    auto& scope = resource["scopeSpans"][0];
    EXPECT_EQ(scope["scope"]["name"], "keel");
    auto& first = scope["spans"][0];
    EXPECT_EQ(first["traceId"], "4bf92f3577b34da6a3ce929d0e0e4736");  // hex, not base64
    EXPECT_EQ(first["parentSpanId"], "00f067aa0ba902b7");
    EXPECT_EQ(first["spanId"], spans[0].context.span.hex());
    EXPECT_EQ(first["traceState"], "congo=t61rcWkgMzE");
    EXPECT_EQ(first["name"], "GET /orders/:id");
    EXPECT_EQ(first["kind"], 2);  // SPAN_KIND_SERVER
    EXPECT_EQ(first["startTimeUnixNano"], "1718000000000000000");
    EXPECT_EQ(first["endTimeUnixNano"], "1718000001200000000");
    EXPECT_EQ(first["attributes"][0],
              json({{"key", "http.route"}, {"value", {{"stringValue", "/orders/:id"}}}}));
    EXPECT_EQ(first["attributes"][1]["value"], json({{"intValue", "200"}}));
    EXPECT_EQ(first["attributes"][2]["value"], json({{"boolValue", false}}));
    EXPECT_EQ(first["status"], json({{"code", 0}}));
    auto& second = scope["spans"][1];
    EXPECT_FALSE(second.contains("parentSpanId"));  // a root span
    EXPECT_EQ(second["kind"], 1);
    EXPECT_EQ(second["status"], json({{"code", 2}, {"message", "card declined"}}));
}

// A collector: counts the spans it is sent, answers `status`.
struct receiver {
    explicit receiver(int answer = 200) : status_code(answer) {
        router.post("/v1/traces", [this](request& req) -> asio::awaitable<response> {
            auto body = json::parse(req.body());
            std::lock_guard lock(mutex);
            content_types.emplace_back(req.header("Content-Type").value_or(""));
            for (auto& s : body["resourceSpans"][0]["scopeSpans"][0]["spans"]) spans.push_back(s);
            co_return response::text("{}", static_cast<http::status>(status_code),
                                     "application/json");
        });
    }
    std::size_t count() {
        std::lock_guard lock(mutex);
        return spans.size();
    }
    int status_code;
    http::router router;
    std::mutex mutex;
    std::vector<json> spans;
    std::vector<std::string> content_types;
};

struct running_service {
    running_service() : thread([this] { service.run(); }) {}
    ~running_service() {
        service.stop();
        thread.join();
    }
    keel::service service{{.threads = 1, .handle_signals = false}};
    std::thread thread;
};

template <class F>
bool eventually(F done, std::chrono::milliseconds limit = 5s) {
    auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
        if (done()) return true;
        std::this_thread::sleep_for(10ms);
    }
    return done();
}

TEST(otlp, spans_reach_the_collector_in_batches) {
    receiver collector;
    testing::test_server server(collector.router);
    running_service run;
    otlp_exporter traces(run.service,
                         {.endpoint = "http://127.0.0.1:" + std::to_string(server.port()) + "/",
                          .service_name = "keel-test",
                          .max_batch = 4,
                          .interval = 100ms});
    for (int i = 0; i < 10; ++i) traces.record(sample("span " + std::to_string(i), true));
    ASSERT_TRUE(eventually([&] { return traces.stats().exported == 10; }))
        << traces.render_metrics();
    EXPECT_EQ(collector.count(), 10u);
    EXPECT_GE(traces.stats().batches, 3u);  // at most 4 spans per request
    std::lock_guard lock(collector.mutex);
    EXPECT_EQ(collector.content_types.front(), "application/json");
    EXPECT_EQ(collector.spans.front()["name"], "span 0");
}

TEST(otlp, a_collector_that_refuses_or_is_down_costs_only_counted_spans) {
    receiver refusing(503);
    testing::test_server server(refusing.router);
    running_service run;
    otlp_exporter refused(
        run.service,
        {.endpoint = "http://127.0.0.1:" + std::to_string(server.port()), .interval = 50ms});
    otlp_exporter nobody(run.service, {.endpoint = "http://127.0.0.1:1", .interval = 50ms});
    for (int i = 0; i < 5; ++i) {
        refused.record(sample("refused", true));
        nobody.record(sample("nobody", true));
    }
    EXPECT_TRUE(eventually([&] { return refused.stats().dropped_export_failed == 5; }));
    EXPECT_TRUE(eventually([&] { return nobody.stats().dropped_export_failed == 5; }));
    EXPECT_EQ(refused.stats().exported, 0u);
    EXPECT_NE(
        nobody.render_metrics().find("keel_trace_spans_dropped_total{reason=\"export_failed\"} 5"),
        std::string::npos);
}

TEST(otlp, a_full_queue_drops_new_spans_without_waiting) {
    running_service run;
    otlp_exporter traces(run.service,
                         {.endpoint = "http://127.0.0.1:1", .max_queue = 10, .interval = 10s});
    for (int i = 0; i < 1000; ++i) traces.record(sample("s", true));
    EXPECT_EQ(traces.stats().dropped_queue_full, 990u);
}

TEST(otlp, an_endpoint_that_is_not_a_url_is_refused_naming_it) {
    running_service run;
    try {
        otlp_exporter traces(run.service, {.endpoint = "collector:4318"});
        FAIL() << "accepted";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("collector:4318"), std::string::npos);
    }
}

}  // namespace
}  // namespace keel::http
