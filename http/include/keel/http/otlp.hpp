#pragma once

/// @file
/// Spans exported to an OpenTelemetry collector with OTLP over HTTP (`POST
/// <endpoint>/v1/traces`), in the JSON or the protobuf encoding, written from the OTLP
/// specification: Debian 12 packages no OpenTelemetry C++ SDK, and Keel needs only this small
/// part of one. Protobuf takes less than half the bytes and less CPU; JSON, the default, is
/// what a person can read on the wire.
///
/// @code
///   keel::http::otlp_exporter traces(service, {.endpoint = "http://collector:4318",
///                                             .service_name = "keel-orders"});
///   traces.record(finished_span);          // never blocks: a bounded queue, batches sent
/// @endcode
///
/// A collector that is down or slow changes nothing else: record() takes a lock for a
/// push_back and drops the span when the queue is full; a batch that cannot be delivered
/// (within its timeout) is dropped. Both are counted (stats(), render_metrics()).
///
/// Shutdown: sending stops when shutdown begins; once the service has drained (the last
/// requests' spans are in the queue), what waits is sent from the drain hook within
/// `timeout` in all, and what could not be sent by then is dropped and counted. A collector
/// that is down delays shutdown by at most `timeout`.
///
/// A service gets one from its options (add_otlp_options: --otlp-endpoint,
/// --otlp-service-name) and makes it the sink of its servers and clients with
/// service.set_span_sink(&exporter); keel::app::application does both.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <keel/framework/config.hpp>
#include <keel/framework/trace.hpp>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace keel {
class service;
}

namespace keel::http {

/// How an export request's body is encoded (OTLP's "protocol": http/json, http/protobuf).
enum class otlp_encoding {
    json,      ///< `application/json`: OTLP/JSON
    protobuf,  ///< `application/x-protobuf`: the binary ExportTraceServiceRequest
};

/// The encoding a protocol name names ("http/json", "http/protobuf", as OpenTelemetry's
/// OTEL_EXPORTER_OTLP_PROTOCOL spells them), or nullopt for any other ("grpc" included).
std::optional<otlp_encoding> parse_otlp_protocol(std::string_view name);

/// A header sent with every export request: a hosted collector's API key, most often.
struct otlp_header {
    std::string name;   ///< a token, such as `Authorization` or `x-honeycomb-team`
    std::string value;  ///< sent as it is; never logged
};

/// The headers `--otlp-headers` names: comma-separated `name=value` pairs with the values
/// percent-decoded, as OpenTelemetry's OTEL_EXPORTER_OTLP_HEADERS spells them
/// ("Authorization=Bearer%20abc,x-team=orders"); spaces around each pair are ignored, and an
/// empty text is no header. Throws std::invalid_argument naming the pair by its place and its
/// name ("pair 2 (x-team): ..."), never its value: a pair without `=`, a name that is not a token,
/// a value with a bad escape or a control character, or a header the exporter writes itself
/// (Content-Type, Content-Length, Host, Connection, Transfer-Encoding).
std::vector<otlp_header> parse_otlp_headers(std::string_view text);

/// Where spans are exported and how they are batched.
struct otlp_options {
    std::string endpoint;                       ///< the collector's base URL: http(s)://host:4318
    std::string service_name = "keel";          ///< the resource's service.name
    std::size_t max_queue = 2048;               ///< spans waiting; more are dropped
    std::size_t max_batch = 512;                ///< spans per request
    std::chrono::milliseconds interval{1'000};  ///< a batch at least this often when spans wait
    std::chrono::milliseconds timeout{2'000};   ///< per export request; the flush at shutdown
    /// The share of new traces recorded (trace::set_root_sampling, which the service's owner
    /// applies); traces continued from a caller follow the caller's decision.
    double sample_ratio = 1.0;
    /// The export requests' body: OTLP/JSON (the default) or OTLP/protobuf.
    otlp_encoding encoding = otlp_encoding::json;
    /// Sent with every export request (parse_otlp_headers reads them from a service's options).
    std::vector<otlp_header> headers;
};

/// The options of a service: otlp_endpoint (--otlp-endpoint, KEEL_OTLP_ENDPOINT; empty, the
/// default: no export), otlp_protocol (http/json, the default, or http/protobuf),
/// otlp_headers (parse_otlp_headers; none by default), otlp_service_name (empty: the service's
/// name) and otlp_sample_ratio (the share of new traces recorded, 0 to 1; 1 by default).
void add_otlp_options(config::schema& schema);
/// The exporter's options, or nullopt when otlp_endpoint is empty. `service_name` is the
/// default of service.name. Throws std::invalid_argument for an unusable endpoint, an
/// unknown protocol or unusable headers (what() names the option).
std::optional<otlp_options> read_otlp_options(const config::values& values,
                                              std::string_view service_name);
/// Throws std::invalid_argument saying why `endpoint` cannot be a collector's base URL: not
/// an absolute http(s) URL (as keel::http::client accepts them), or with a query or fragment.
void check_otlp_endpoint(std::string_view endpoint);

/// The exporter's figures.
struct otlp_stats {
    std::uint64_t exported = 0;               ///< spans the collector accepted (2xx)
    std::uint64_t dropped_queue_full = 0;     ///< spans dropped because the queue was full
    std::uint64_t dropped_export_failed = 0;  ///< in batches the collector refused or never got
    std::uint64_t batches = 0;                ///< batches sent, accepted or not
};

/// A span sink that exports to an OpenTelemetry collector; see the file's description.
class otlp_exporter final : public trace::span_sink {
  public:
    /// Sends from one of the service's threads. Throws std::invalid_argument for an endpoint
    /// that is not usable (check_otlp_endpoint).
    otlp_exporter(keel::service& service, otlp_options options);
    ~otlp_exporter() override;
    otlp_exporter(const otlp_exporter&) = delete;
    otlp_exporter& operator=(const otlp_exporter&) = delete;

    void record(trace::span s) noexcept override;
    /// False while the queue is full (counted as dropped): one atomic load otherwise.
    bool admit() noexcept override;
    /// The exporter's figures.
    otlp_stats stats() const;
    /// keel_trace_spans_exported_total, keel_trace_spans_dropped_total{reason}.
    std::string render_metrics() const;

    struct impl;

  private:
    std::shared_ptr<impl> impl_;
};

/// The ExportTraceServiceRequest body for `spans` (OTLP/JSON: ids as lower-case hex, times
/// as decimal strings of nanoseconds since the epoch, enums as numbers).
std::string encode_otlp_json(std::span<const trace::span> spans, std::string_view service_name);
/// The same request in OTLP/protobuf (the binary wire format of opentelemetry-proto's
/// ExportTraceServiceRequest). Text that is not UTF-8 is written with U+FFFD in its place, as
/// in the JSON; a status that is unset with no message is left out, as protobuf leaves out
/// default values.
std::string encode_otlp_protobuf(std::span<const trace::span> spans, std::string_view service_name);

}  // namespace keel::http
