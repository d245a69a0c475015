#include <algorithm>
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cctype>
#include <keel/framework/json_text.hpp>
#include <keel/framework/service.hpp>
#include <keel/http/client.hpp>
#include <keel/http/otlp.hpp>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <utility>
#include <vector>

#include "../uri.hpp"
#include "url.hpp"

namespace keel::http {

namespace {

// Span fields come from requests (paths, hosts): text that is not UTF-8 is written with
// U+FFFD in its place rather than failing the batch.
constexpr auto lenient = json_utf8_handler::replace;

void append_nanos(std::string& out, std::chrono::system_clock::time_point t) {
    out += '"';
    append_json_number(
        out,
        static_cast<std::int64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count()));
    out += '"';
}

void append_attribute(std::string& out, std::string_view key,
                      const trace::span::attribute_value& v) {
    out += "{\"key\":";
    append_json_string(out, key, lenient);
    out += ",\"value\":{";
    if (auto* text = std::get_if<std::string>(&v)) {
        out += "\"stringValue\":";
        append_json_string(out, *text, lenient);
    } else if (auto* number = std::get_if<std::int64_t>(&v)) {
        out += "\"intValue\":\"";  // int64 as a decimal string (OTLP/JSON)
        append_json_number(out, *number);
        out += '"';
    } else if (auto* flag = std::get_if<bool>(&v)) {
        out += *flag ? "\"boolValue\":true" : "\"boolValue\":false";
    }
    out += "}}";
}

// One span of OTLP/JSON, written straight into `out` (no JSON tree: the exporter writes one
// per request the service serves).
void append_span(std::string& out, const trace::span& s) {
    out += "{\"traceId\":\"";
    out += s.context.trace.hex();
    out += "\",\"spanId\":\"";
    out += s.context.span.hex();
    out += '"';
    if (s.context.parent.valid()) {
        out += ",\"parentSpanId\":\"";
        out += s.context.parent.hex();
        out += '"';
    }
    if (!s.context.state.empty()) {
        out += ",\"traceState\":";
        append_json_string(out, s.context.state, lenient);
    }
    out += ",\"name\":";
    append_json_string(out, s.name, lenient);
    out += ",\"kind\":";
    append_json_number(out, static_cast<std::int64_t>(s.what));
    out += ",\"startTimeUnixNano\":";
    append_nanos(out, s.start);
    out += ",\"endTimeUnixNano\":";
    append_nanos(out, s.end);
    out += ",\"attributes\":[";
    bool first = true;
    for (const auto& [key, value] : s.attributes) {
        if (!std::exchange(first, false)) out += ',';
        append_attribute(out, key, value);
    }
    out += "],\"status\":{\"code\":";
    append_json_number(out, static_cast<std::int64_t>(s.outcome));
    if (!s.message.empty()) {
        out += ",\"message\":";
        append_json_string(out, s.message, lenient);
    }
    out += "}}";
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

namespace {

std::string_view trimmed(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

// RFC 9110's token: what a field name may be.
bool is_token(std::string_view s) {
    constexpr std::string_view punctuation = "!#$%&'*+-.^_`|~";
    return !s.empty() && std::all_of(s.begin(), s.end(), [&](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) ||
               punctuation.find(c) != std::string_view::npos;
    });
}

bool equal_ignoring_case(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) ==
                      std::tolower(static_cast<unsigned char>(y));
           });
}

}  // namespace

std::vector<otlp_header> parse_otlp_headers(std::string_view text) {
    std::vector<otlp_header> out;
    if (trimmed(text).empty()) return out;
    std::size_t place = 0;
    for (std::size_t at = 0; at <= text.size(); ++place) {
        auto comma = std::min(text.find(',', at), text.size());
        auto pair = trimmed(text.substr(at, comma - at));
        at = comma + 1;
        auto refuse = [&](std::string_view name, const std::string& why) {
            throw std::invalid_argument(
                "pair " + std::to_string(place + 1) +
                (name.empty() ? std::string() : " (" + std::string(name) + ")") + ": " + why);
        };
        auto eq = pair.find('=');
        if (eq == std::string_view::npos) refuse({}, "is not name=value");
        auto name = trimmed(pair.substr(0, eq));
        if (!is_token(name))
            refuse({}, "the name is not a token (letters, digits, !#$%&'*+-.^_`|~)");
        for (std::string_view own :
             {"Content-Type", "Content-Length", "Host", "Connection", "Transfer-Encoding"})
            if (equal_ignoring_case(name, own))
                refuse(name, "is a header the exporter writes itself");
        auto value = detail::percent_decode(trimmed(pair.substr(eq + 1)), false);
        if (!value) refuse(name, "the value has a malformed %-escape");
        if (std::any_of(value->begin(), value->end(),
                        [](char c) { return detail::is_control(c) && c != '\t'; }))
            refuse(name, "the value has a control character");
        out.push_back({std::string(name), std::move(*value)});
    }
    return out;
}

std::optional<otlp_encoding> parse_otlp_protocol(std::string_view name) {
    if (name == "http/json") return otlp_encoding::json;
    if (name == "http/protobuf") return otlp_encoding::protobuf;
    return std::nullopt;
}

void add_otlp_options(config::schema& schema) {
    schema.add("otlp_endpoint", config::kind::string, std::string(),
               "export spans to this OpenTelemetry collector (OTLP over HTTP, POST "
               "<url>/v1/traces), e.g. http://127.0.0.1:4318; empty: no export");
    schema.add("otlp_protocol", config::kind::string, std::string("http/json"),
               "the export requests' encoding: http/json or http/protobuf (less than half the "
               "bytes and less CPU)");
    schema.add("otlp_headers", config::kind::string, std::string(),
               "headers sent with every export, name=value pairs separated by commas, values "
               "percent-encoded (Authorization=Bearer%20<key>); never logged");
    schema.add("otlp_service_name", config::kind::string, std::string(),
               "the service.name of the exported spans (empty: the service's name)");
    schema.add({"otlp_sample_ratio", config::kind::number, 1.0,
                "the share of new traces whose spans are recorded, decided by the trace id (as "
                "OpenTelemetry's TraceIdRatioBased); a trace continued from a caller follows "
                "the caller's sampled flag",
                0, 1});
}

std::optional<otlp_options> read_otlp_options(const config::values& values,
                                              std::string_view service_name) {
    const auto& endpoint = values.get_string("otlp_endpoint");
    if (endpoint.empty()) return std::nullopt;
    check_otlp_endpoint(endpoint);
    otlp_options o;
    o.endpoint = endpoint;
    const auto& protocol = values.get_string("otlp_protocol");
    auto encoding = parse_otlp_protocol(protocol);
    if (!encoding)
        throw std::invalid_argument("otlp_protocol: '" + protocol +
                                    "' is not http/json or http/protobuf");
    o.encoding = *encoding;
    try {
        o.headers = parse_otlp_headers(values.get_string("otlp_headers"));
    } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(std::string("otlp_headers: ") + e.what());
    }
    const auto& name = values.get_string("otlp_service_name");
    if (!name.empty())
        o.service_name = name;
    else if (!service_name.empty())
        o.service_name = std::string(service_name);
    o.sample_ratio = values.get_number("otlp_sample_ratio");
    return o;
}

std::string encode_otlp_json(std::span<const trace::span> spans, std::string_view service_name) {
    std::string out;
    out.reserve(256 + spans.size() * 640);
    out += "{\"resourceSpans\":[{\"resource\":{\"attributes\":[";
    append_attribute(out, "service.name", std::string(service_name));
    out += "]},\"scopeSpans\":[{\"scope\":{\"name\":\"keel\"},\"spans\":[";
    bool first = true;
    for (const auto& s : spans) {
        if (!std::exchange(first, false)) out += ',';
        append_span(out, s);
    }
    out += "]}]}]}";
    return out;
}

struct otlp_exporter::impl : std::enable_shared_from_this<impl> {
    impl(keel::service& service, otlp_options o)
        : options(std::move(o)),
          client(service, own_client()),
          wake(service.executor(0)),
          back_off(service.executor(0)) {}

    // The exporter's requests are not traced: each would be a span to export.
    static client_options own_client() {
        client_options o;
        o.record_spans = false;
        return o;
    }

    otlp_options options;
    http::client client;
    asio::steady_timer wake;      // cancelled when a batch is full, and at shutdown
    asio::steady_timer back_off;  // after a failed export; cancelled at shutdown
    mutable std::mutex mutex;
    // Spans wait in `queue`. A batch is taken by swapping the queue with `spare` when it
    // holds no more than a batch, and the batch's vector comes back as the spare once sent:
    // once both have grown, neither recording a span nor taking a batch allocates.
    std::vector<trace::span> queue;
    std::vector<trace::span> spare;
    otlp_stats figures;
    // Set when the queue fills, cleared when a batch is taken from it: admit() reads it
    // without the mutex, and counts what it refuses in `refused`.
    std::atomic<bool> full{false};
    std::atomic<std::uint64_t> refused{0};
    std::atomic<bool> stopping{false};
    log::logger log{"otlp"};

    std::vector<trace::span> take_batch() {
        std::lock_guard lock(mutex);
        if (queue.empty()) return {};
        auto batch = std::exchange(spare, {});
        if (queue.size() <= options.max_batch) {
            batch.swap(queue);
        } else {
            auto end = queue.begin() + static_cast<std::ptrdiff_t>(options.max_batch);
            batch.assign(std::make_move_iterator(queue.begin()), std::make_move_iterator(end));
            queue.erase(queue.begin(), end);
        }
        full.store(false, std::memory_order_relaxed);
        return batch;
    }

    // A sent batch's vector, kept as the next spare (its spans are destroyed here, outside
    // the lock).
    void give_back(std::vector<trace::span> batch) {
        batch.clear();
        std::lock_guard lock(mutex);
        if (batch.capacity() > spare.capacity()) spare = std::move(batch);
    }

    void count(std::size_t spans, bool accepted) {
        std::lock_guard lock(mutex);
        ++figures.batches;
        (accepted ? figures.exported : figures.dropped_export_failed) += spans;
    }

    std::size_t queued() const {
        std::lock_guard lock(mutex);
        return queue.size();
    }

    // Whether the collector accepted the batch.
    asio::awaitable<bool> send(http::client& through, const std::vector<trace::span>& batch,
                               std::chrono::milliseconds timeout) {
        auto req = client_request::get(options.endpoint + "/v1/traces");
        req.method = method::post;
        if (options.encoding == otlp_encoding::protobuf) {
            req.body = encode_otlp_protobuf(batch, options.service_name);
            req.header("Content-Type", "application/x-protobuf");
        } else {
            req.body = encode_otlp_json(batch, options.service_name);
            req.header("Content-Type", "application/json");
        }
        for (const auto& h : options.headers) req.header(h.name, h.value);
        req.timeout = timeout;
        auto res = co_await through.request(std::move(req));
        bool accepted = res && res->status_code() >= 200 && res->status_code() < 300;
        if (!accepted)
            log.debug("a batch of {} span(s) was not exported: {}", batch.size(),
                      res ? "status " + std::to_string(res->status_code()) : res.error().message);
        count(batch.size(), accepted);
        co_return accepted;
    }

    // Waits `t` on `timer`, or until shutdown cancels it. `stopping` is set before that
    // cancel is posted to this executor: checked here, no cancel is missed.
    asio::awaitable<void> pause(asio::steady_timer& timer, std::chrono::milliseconds t) {
        if (stopping) co_return;
        timer.expires_after(t);
        error_code ec;
        co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }

    // Full batches as soon as they are full, what waits at least every `interval`, until
    // shutdown begins. After a batch the collector did not take, the next waits for the
    // interval (the queue meanwhile fills and drops): a collector that is down costs one
    // attempt per interval, not a loop of refused connections.
    asio::awaitable<void> run() {
        while (!stopping) {
            if (queued() < options.max_batch) co_await pause(wake, options.interval);
            if (stopping) break;
            auto batch = take_batch();
            if (batch.empty()) continue;
            bool sent = co_await send(client, batch, options.timeout);
            give_back(std::move(batch));
            if (!sent) co_await pause(back_off, options.interval);
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
            co_await send(through, batch, left);
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
            abandon(std::move(io), std::move(through));
        }
    }

    // A client must not be destroyed under a request in flight, nor its io_context: both are
    // left to the process's exit, held where a leak checker sees them kept, not lost.
    static void abandon(std::unique_ptr<asio::io_context> io, std::unique_ptr<http::client> c) {
        struct left {
            std::unique_ptr<asio::io_context> io;
            std::unique_ptr<http::client> client;
        };
        static std::mutex mutex;
        static auto* kept = new std::vector<left>;  // never destroyed: see above
        std::lock_guard lock(mutex);
        kept->push_back({std::move(io), std::move(c)});
    }
};

otlp_exporter::otlp_exporter(keel::service& service, otlp_options options) {
    check_otlp_endpoint(options.endpoint);
    while (options.endpoint.ends_with('/')) options.endpoint.pop_back();
    impl_ = std::make_shared<impl>(service, std::move(options));
    service.spawn(0, "otlp export", [self = impl_]() { return self->run(); });
    service.on_shutdown([self = impl_] {
        self->stopping = true;
        asio::post(self->wake.get_executor(), [self] {
            self->wake.cancel();
            self->back_off.cancel();
        });
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
        if (impl_->queue.size() >= impl_->options.max_queue)
            impl_->full.store(true, std::memory_order_relaxed);
    }
    if (full_batch) asio::post(impl_->wake.get_executor(), [self = impl_] { self->wake.cancel(); });
}

bool otlp_exporter::admit() noexcept {
    if (!impl_->full.load(std::memory_order_relaxed)) return true;
    impl_->refused.fetch_add(1, std::memory_order_relaxed);
    return false;
}

otlp_stats otlp_exporter::stats() const {
    std::lock_guard lock(impl_->mutex);
    auto s = impl_->figures;
    s.dropped_queue_full += impl_->refused.load(std::memory_order_relaxed);
    return s;
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
