#pragma once

/// @file
/// Trace context (W3C Trace Context, https://www.w3.org/TR/trace-context/): the identity of
/// the span a piece of work runs in, read from a request's `traceparent` and `tracestate`
/// fields and sent on every request Keel makes, so that one trace follows an order across
/// services. A span_context is a value; it is passed explicitly (request::trace(),
/// client_request::trace), never kept in a thread-local, because a coroutine may resume on
/// another thread and many requests share one.
///
/// @code
///   auto ctx = keel::trace::parse_traceparent(req.header("traceparent").value_or(""));
///   auto mine = ctx ? keel::trace::child_of(*ctx) : keel::trace::new_root();
///   outgoing.header("traceparent", mine.traceparent());
/// @endcode

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace keel::trace {

/// 16 bytes; all zero is not a valid id.
struct trace_id {
    /// The id's bytes, in the order of its hex form.
    std::array<std::uint8_t, 16> bytes{};

    /// Whether it is not all zero.
    bool valid() const;
    std::string hex() const;  ///< 32 lower-case hex digits
    friend bool operator==(const trace_id&, const trace_id&) = default;
};

/// 8 bytes; all zero is not a valid id (a root span's parent is all zero).
struct span_id {
    /// The id's bytes, in the order of its hex form.
    std::array<std::uint8_t, 8> bytes{};

    /// Whether it is not all zero.
    bool valid() const;
    std::string hex() const;  ///< 16 lower-case hex digits
    friend bool operator==(const span_id&, const span_id&) = default;
};

/// The identity of a span: its trace, its id, its parent's id, and the sampling decision.
struct span_context {
    /// The trace the span belongs to.
    trace_id trace;
    /// The span's own id.
    span_id span;
    span_id parent;  ///< all zero for a root span
    /// Whether the trace is recorded (the `sampled` flag of `traceparent`).
    bool sampled = true;
    /// The `tracestate` received with the parent, passed on unchanged (at most
    /// max_tracestate_bytes; a longer one is dropped, as the specification allows).
    std::string state;

    /// Whether the trace and span ids are valid.
    bool valid() const { return trace.valid() && span.valid(); }
    /// The `traceparent` field naming this span as the parent of the next hop:
    /// "00-<trace>-<span>-<flags>".
    std::string traceparent() const;
    friend bool operator==(const span_context&, const span_context&) = default;
};

/// The longest `tracestate` passed on.
inline constexpr std::size_t max_tracestate_bytes = 512;

/// A finished span: what an exporter sends (OTLP's Span, the fields Keel fills).
struct span {
    /// What the span measures: work of this service, a request it served, or one it made.
    enum class kind : std::uint8_t { internal = 1, server = 2, client = 3 };
    /// How the work ended.
    enum class status : std::uint8_t { unset = 0, ok = 1, error = 2 };
    /// An attribute's value.
    using attribute_value = std::variant<std::string, std::int64_t, bool>;

    /// The span's identity.
    span_context context;
    std::string name;  ///< "GET /orders/:id", "step charge"
    /// What the span measures.
    kind what = kind::internal;
    ///@{
    /// When the span started and ended.
    std::chrono::system_clock::time_point start{};
    std::chrono::system_clock::time_point end{};
    ///@}
    /// Attributes such as http.request.method, in the order set.
    std::vector<std::pair<std::string, attribute_value>> attributes;
    /// How the work ended; unset: no verdict.
    status outcome = status::unset;
    std::string message;  ///< with status::error
};

/// Where finished spans go (an exporter). record() must not block or throw: it is called on
/// the request path.
class span_sink {
  public:
    virtual ~span_sink() = default;
    /// Takes one finished span.
    virtual void record(span s) noexcept = 0;
    /// Whether a span recorded now would be kept. Asked before a span is made, so that a
    /// sink that cannot take it (an exporter whose queue is full because its collector is
    /// down) costs no span; a sink that answers false counts the span as dropped.
    virtual bool admit() noexcept { return true; }
};

/// The remote span a request names as its parent (span = the sender's span id), or nullopt
/// when `traceparent` is absent or invalid (then `tracestate` is ignored too). Accepts
/// version 00 exactly, and later versions by their first four fields; refuses version ff,
/// upper-case hex, all-zero ids and malformed separators.
std::optional<span_context> parse_traceparent(std::string_view traceparent,
                                              std::string_view tracestate = {});

/// A new span in the same trace: a fresh span id, `parent.span` as its parent, the same
/// sampling decision and tracestate.
span_context child_of(const span_context& parent);
/// The first span of a new trace, sampled as root_sampling() decides.
span_context new_root();

/// The share of new traces that are recorded (new_root's `sampled`), from 0 to 1; 1 unless
/// set. The decision is the trace id's: a trace is sampled when its id's last 8 bytes, read
/// as a big-endian number, fall below ratio × 2^64, so services with the same ratio decide
/// alike (OpenTelemetry's TraceIdRatioBased). A trace continued from a caller keeps the
/// caller's decision. Set it once at start (keel::app: --otlp-sample-ratio);
/// std::invalid_argument outside 0 to 1.
void set_root_sampling(double ratio);
/// The ratio set_root_sampling() set.
double root_sampling();

}  // namespace keel::trace
