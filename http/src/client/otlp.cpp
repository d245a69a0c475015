#include <atomic>
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
        : options(std::move(o)), client(service), wake(service.executor(0)) {}

    otlp_options options;
    http::client client;
    asio::steady_timer wake;  // cancelled when a batch is full
    mutable std::mutex mutex;
    std::deque<trace::span> queue;
    otlp_stats figures;
    std::atomic<bool> stopping{false};

    std::vector<trace::span> take_batch() {
        std::lock_guard lock(mutex);
        auto n = std::min(queue.size(), options.max_batch);
        std::vector<trace::span> batch(std::make_move_iterator(queue.begin()),
                                       std::make_move_iterator(queue.begin() + n));
        queue.erase(queue.begin(), queue.begin() + n);
        return batch;
    }

    asio::awaitable<void> send(std::vector<trace::span> batch) {
        auto req = client_request::get(options.endpoint + "/v1/traces");
        req.method = method::post;
        req.body = encode_otlp_json(batch, options.service_name);
        req.header("Content-Type", "application/json");
        req.timeout = options.timeout;
        auto res = co_await client.request(std::move(req));
        bool accepted = res && res->status_code() >= 200 && res->status_code() < 300;
        std::lock_guard lock(mutex);
        ++figures.batches;
        (accepted ? figures.exported : figures.dropped_export_failed) += batch.size();
    }

    asio::awaitable<void> run() {
        for (;;) {
            if (!stopping) {
                wake.expires_after(options.interval);
                error_code ec;
                co_await wake.async_wait(asio::redirect_error(asio::use_awaitable, ec));
            }
            for (auto batch = take_batch(); !batch.empty(); batch = take_batch())
                co_await send(std::move(batch));
            if (stopping) co_return;  // what waited at shutdown was sent, once
        }
    }
};

otlp_exporter::otlp_exporter(keel::service& service, otlp_options options) {
    if (!options.endpoint.starts_with("http://") && !options.endpoint.starts_with("https://"))
        throw std::invalid_argument("otlp endpoint: '" + options.endpoint +
                                    "' is not an http:// or https:// URL");
    while (options.endpoint.ends_with('/')) options.endpoint.pop_back();
    impl_ = std::make_shared<impl>(service, std::move(options));
    service.spawn(0, "otlp export", [self = impl_]() { return self->run(); });
    service.on_shutdown([self = impl_] {
        self->stopping = true;
        asio::post(self->wake.get_executor(), [self] { self->wake.cancel(); });
    });
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
