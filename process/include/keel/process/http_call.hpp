#pragma once

/// @file
/// Durable HTTP calls from a process (target keel::process_http, which links keel::process and
/// keel::http_client): `co_await ctx.http(name, client, request)` is a step that sends the
/// request and returns the response. The response is journaled, so a replay returns it without
/// sending anything; every attempt carries the same Idempotency-Key, so a partner that honours
/// the header applies the call once however often it is retried, replayed or taken over.
///
/// @code
///   nlohmann::json body = {{"order", o.id()}, {"amount", 42.5}};      // named: g++ 12
///   auto req = keel::http::client_request::json(keel::http::method::post, url, body);
///   auto res = co_await ctx.http("charge", payments, std::move(req));  // client_response
///   if (!res.ok()) co_return "declined";                               // a 4xx is a value
/// @endcode
///
/// The key (ctx.http(name, client, [&](const std::string& key) { ... }) builds the request
/// from it) is derived from the instance id, the operation number and the step's name:
/// stable across retries, replays and workers, distinct for every call of every instance.
///
/// Retries follow the step's retry policy (options.retry, else the definition's): connection
/// errors and timeouts, 5xx and 429 (and options.retry_statuses) are retried; a Retry-After
/// (seconds or an HTTP date) makes the next attempt wait at least that long (at most
/// options.max_retry_after). Other statuses are returned at once. The last answer of a call
/// whose attempts ran out is returned as a value too, unless options.fail_on_error_status;
/// a transport failure on the last attempt fails the step (step_failed, like ctx.run's).
///
/// Journaled: the status, the response fields named in options.keep_headers, the body (at most
/// options.max_body bytes, else the step fails saying so) and the URL that answered.
///
/// Traced: with the engine's spans (engine_options::spans), each attempt is sent in the step
/// attempt's span, so the client's span and the partner's server span are its children
/// (unless the request names a span itself: client_request::trace).
///
/// A partner's rate limit shared by every worker: `.limited(l)` (keel/process/limiter.hpp)
/// makes each attempt take a permit of `l` first, as ctx.run(...).limited(l) does:
///
/// @code
///   auto res = co_await ctx.http("charge", payments, std::move(req)).limited(provider_rate);
/// @endcode

#include <cstddef>
#include <keel/http/client.hpp>
#include <keel/process/context.hpp>
#include <keel/process/limiter.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace keel::process {

/// How ctx.http makes, retries and journals one call.
struct http_call_options {
    /// Response fields journaled and returned (case-insensitive); the others are dropped.
    std::vector<std::string> keep_headers = {"Content-Type"};
    /// The largest body journaled; a larger one fails the step (terminal: not retried).
    std::size_t max_body = 1024 * 1024;
    /// Statuses retried besides 5xx and 429 (e.g. 409 for a partner that says "in progress").
    std::vector<int> retry_statuses;
    /// A final status outside 2xx fails the step (step_failed) instead of being returned.
    bool fail_on_error_status = false;
    /// The longest Retry-After honoured: a longer one is waited this long.
    duration max_retry_after = std::chrono::minutes(5);
    /// The header that carries the key (set on the request, replacing one of that name).
    std::string key_header = "Idempotency-Key";
    /// Unset: the step's policy (the definition's, else retry_policy{}).
    std::optional<retry_policy> retry;
};

/// The key of operation `seq` named `name` of instance `instance`: "k1-" and 32 hex digits
/// of SHA-256 over the three.
std::string idempotency_key(std::string_view instance, std::uint64_t seq, std::string_view name);

/// The wait a Retry-After value asks for (delta-seconds or an HTTP date, relative to `now`;
/// a date in the past is zero); nullopt when it is neither.
std::optional<duration> parse_retry_after(std::string_view value,
                                          std::chrono::system_clock::time_point now);

/// co_await ctx.http(...): the response, recorded; throws step_failed when the call failed
/// for good. Journaled as a run step of its name. Machinery: handlers do not name it.
class [[nodiscard]] http_op : public detail::async_op, detail::step_failure {
  public:
    using value_type = http::client_response;  ///< what co_await gives

    /// Step `name` of the instance `rt` runs: `build` makes the request from the key, `client`
    /// sends it, and `policy` retries it (ctx.http, which makes it, passes options.retry, else
    /// the definition's).
    http_op(detail::runtime& rt, std::string name, http::client& client, http_request_builder build,
            http_call_options options, retry_policy policy);
    /// Moves the operation (before it is awaited).
    http_op(http_op&&) noexcept = default;

    /// Each attempt first takes a permit of `l`, waiting for it without counting as an attempt.
    http_op limited(limit l) && {
        limit_ = std::move(l);
        return std::move(*this);
    }

    ///@{
    /// The awaiter interface (machinery): ready at once when the journal holds the step; the
    /// result is the recorded response, or step_failed.
    bool await_ready();
    bool await_suspend(std::coroutine_handle<> h) noexcept { return suspend(h); }
    http::client_response await_resume();
    ///@}

    /// Machinery: takes the step's journal entry (replayed or just recorded); false, with
    /// `reason`, when its value is not a response this operation can decode.
    bool accept(const journal_entry& e, std::string& reason) noexcept override;

  private:
    std::string name_;
    http::client* client_;
    http_request_builder build_;
    http_call_options options_;
    retry_policy policy_;
    std::optional<limit> limit_;
    std::optional<http::client_response> response_;
};

namespace detail {

// The journaled form of a response and back (the body as text when it is UTF-8, else base64).
nlohmann::json encode_response(const http::client_response& res,
                               const std::vector<std::string>& keep_headers);
http::client_response decode_response(const nlohmann::json& j);

}  // namespace detail

}  // namespace keel::process
