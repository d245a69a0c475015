#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <deque>
#include <keel/framework/service.hpp>
#include <keel/http/client.hpp>
#include <keel/http/otlp.hpp>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "url.hpp"

namespace keel::http {

namespace {

std::string nanos(std::chrono::system_clock::time_point t) {
    return std::to_string(
        std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count());
}

nlohmann::json attribute(const std::string& key, const trace::span::attribute_value& v) {
    nlohmann::json value;
    if (auto* text = std::get_if<std::string>(&v)) value["stringValue"] = *text;
    if (auto* number = std::get_if<std::int64_t>(&v)) value["intValue"] = std::to_string(*number);
    if (auto* flag = std::get_if<bool>(&v)) value["boolValue"] = *flag;
    return {{"key", key}, {"value", std::move(value)}};
}

nlohmann::json encode(const trace::span& s) {
    nlohmann::json out = {{"traceId", s.context.trace.hex()},
                          {"spanId", s.context.span.hex()},
                          {"name", s.name},
                          {"kind", static_cast<int>(s.what)},
                          {"startTimeUnixNano", nanos(s.start)},
                          {"endTimeUnixNano", nanos(s.end)}};
    if (s.context.parent.valid()) out["parentSpanId"] = s.context.parent.hex();
    if (!s.context.state.empty()) out["traceState"] = s.context.state;
    auto& attributes = out["attributes"] = nlohmann::json::array();
    for (const auto& [key, value] : s.attributes) attributes.push_back(attribute(key, value));
    nlohmann::json status = {{"code", static_cast<int>(s.outcome)}};
    if (!s.message.empty()) status["message"] = s.message;
    out["status"] = std::move(status);
    return out;
}

}  // namespace

void check_otlp_endpoint(std::string_view endpoint) {
    auto refuse = [&](const std::string& why) {
        throw std::invalid_argument("the OTLP endpoint '" + std::string(endpoint) + "' " + why);
    };
    if (endpoint.empty()) refuse("is empty");
    auto url = detail::parse_url(endpoint);
    if (!url) refuse("is not a usable URL: " + url.error());
    if (endpoint.find_first_of("?#") != std::string_view::npos)
        refuse("has a query or fragment (give the collector's base URL: http://host:4318)");
}

void add_otlp_options(config::schema& schema) {
    schema.add("otlp_endpoint", config::kind::string, std::string(),
               "export spans to this OpenTelemetry collector (OTLP/HTTP JSON, POST "
               "<url>/v1/traces), e.g. http://127.0.0.1:4318; empty: no export");
    schema.add("otlp_service_name", config::kind::string, std::string(),
               "the service.name of the exported spans (empty: the service's name)");
}

std::optional<otlp_options> read_otlp_options(const config::values& values,
                                              std::string_view service_name) {
    const auto& endpoint = values.get_string("otlp_endpoint");
    if (endpoint.empty()) return std::nullopt;
    check_otlp_endpoint(endpoint);
    otlp_options o;
    o.endpoint = endpoint;
    const auto& name = values.get_string("otlp_service_name");
    if (!name.empty())
        o.service_name = name;
    else if (!service_name.empty())
        o.service_name = std::string(service_name);
    return o;
}

std::string encode_otlp_json(std::span<const trace::span> spans, std::string_view service_name) {
    auto list = nlohmann::json::array();
    for (const auto& s : spans) list.push_back(encode(s));
    nlohmann::json body = {
        {"resourceSpans",
         {{{"resource", {{"attributes", {attribute("service.name", std::string(service_name))}}}},
           {"scopeSpans", {{{"scope", {{"name", "keel"}}}, {"spans", std::move(list)}}}}}}}};
    return body.dump();
}

struct otlp_exporter::impl : std::enable_shared_from_this<impl> {
    impl(keel::service& service, otlp_options o)
        : options(std::move(o)), client(service, own_client()), wake(service.executor(0)) {}

    // The exporter's requests are not traced: each would be a span to export.
    static client_options own_client() {
        client_options o;
        o.record_spans = false;
        return o;
    }

    otlp_options options;
    http::client client;
    asio::steady_timer wake;  // cancelled when a batch is full, and at shutdown
    mutable std::mutex mutex;
    std::deque<trace::span> queue;
    otlp_stats figures;
    std::atomic<bool> stopping{false};
    log::logger log{"otlp"};

    std::vector<trace::span> take_batch() {
        std::lock_guard lock(mutex);
        auto n = std::min(queue.size(), options.max_batch);
        std::vector<trace::span> batch(std::make_move_iterator(queue.begin()),
                                       std::make_move_iterator(queue.begin() + n));
        queue.erase(queue.begin(), queue.begin() + n);
        return batch;
    }

    void count(std::size_t spans, bool accepted) {
        std::lock_guard lock(mutex);
        ++figures.batches;
        (accepted ? figures.exported : figures.dropped_export_failed) += spans;
    }

    asio::awaitable<void> send(http::client& through, std::vector<trace::span> batch,
                               std::chrono::milliseconds timeout) {
        auto req = client_request::get(options.endpoint + "/v1/traces");
        req.method = method::post;
        req.body = encode_otlp_json(batch, options.service_name);
        req.header("Content-Type", "application/json");
        req.timeout = timeout;
        auto res = co_await through.request(std::move(req));
        bool accepted = res && res->status_code() >= 200 && res->status_code() < 300;
        if (!accepted)
            log.debug("a batch of {} span(s) was not exported: {}", batch.size(),
                      res ? "status " + std::to_string(res->status_code()) : res.error().message);
        count(batch.size(), accepted);
    }

    // A batch at least every `interval`, at once when one is full, until shutdown begins.
    asio::awaitable<void> run() {
        while (!stopping) {
            wake.expires_after(options.interval);
            error_code ec;
            co_await wake.async_wait(asio::redirect_error(asio::use_awaitable, ec));
            while (!stopping) {
                auto batch = take_batch();
                if (batch.empty()) break;
                co_await send(client, std::move(batch), options.timeout);
            }
        }
    }

    asio::awaitable<void> send_all(http::client& through,
                                   std::chrono::steady_clock::time_point deadline) {
        for (auto batch = take_batch(); !batch.empty(); batch = take_batch()) {
            auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                deadline - std::chrono::steady_clock::now());
            if (left.count() <= 0) {
                count(batch.size(), false);
                continue;
            }
            co_await send(through, std::move(batch), left);
        }
    }

    // After the drain, on a service thread whose io_context is no longer needed: what waits
    // is sent on an io_context of its own, within options.timeout in all.
    void flush_at_exit() {
        {
            std::lock_guard lock(mutex);
            if (queue.empty()) return;
        }
        auto deadline = std::chrono::steady_clock::now() + options.timeout;
        auto io = std::make_unique<asio::io_context>(1);
        auto through = std::make_unique<http::client>(*io, own_client());
        asio::co_spawn(*io, send_all(*through, deadline), asio::detached);
        // Each request ends by its timeout; the margin only guards against a bug there.
        io->run_for(options.timeout + std::chrono::seconds(1));
        if (!io->stopped()) {
            log.error("the last spans' export outlived its timeout; abandoning it");
            // A client must not be destroyed under a request in flight: both are left.
            static_cast<void>(through.release());
            static_cast<void>(io.release());
        }
    }
};

otlp_exporter::otlp_exporter(keel::service& service, otlp_options options) {
    check_otlp_endpoint(options.endpoint);
    while (options.endpoint.ends_with('/')) options.endpoint.pop_back();
    impl_ = std::make_shared<impl>(service, std::move(options));
    service.spawn(0, "otlp export", [self = impl_]() { return self->run(); });
    service.on_shutdown([self = impl_] {
        self->stopping = true;
        asio::post(self->wake.get_executor(), [self] { self->wake.cancel(); });
    });
    service.on_drained(0, [self = impl_] { self->flush_at_exit(); });
}

otlp_exporter::~otlp_exporter() = default;

void otlp_exporter::record(trace::span s) noexcept {
    bool full_batch = false;
    {
        std::lock_guard lock(impl_->mutex);
        if (impl_->queue.size() >= impl_->options.max_queue) {
            ++impl_->figures.dropped_queue_full;
            return;
        }
        impl_->queue.push_back(std::move(s));
        full_batch = impl_->queue.size() == impl_->options.max_batch;
    }
    if (full_batch) asio::post(impl_->wake.get_executor(), [self = impl_] { self->wake.cancel(); });
}

otlp_stats otlp_exporter::stats() const {
    std::lock_guard lock(impl_->mutex);
    return impl_->figures;
}

std::string otlp_exporter::render_metrics() const {
    auto s = stats();
    return "# HELP keel_trace_spans_exported_total Spans the OTLP collector accepted.\n"
           "# TYPE keel_trace_spans_exported_total counter\n"
           "keel_trace_spans_exported_total " +
           std::to_string(s.exported) +
           "\n# HELP keel_trace_spans_dropped_total Spans not exported, by reason.\n"
           "# TYPE keel_trace_spans_dropped_total counter\n"
           "keel_trace_spans_dropped_total{reason=\"queue_full\"} " +
           std::to_string(s.dropped_queue_full) +
           "\nkeel_trace_spans_dropped_total{reason=\"export_failed\"} " +
           std::to_string(s.dropped_export_failed) + "\n";
}

}  // namespace keel::http
