#pragma once

/// @file
/// Keel's middleware. `install_defaults` (builtin.hpp) adds trace_context, request_id,
/// access_log, observe and error_mapping in the right order; each can also be used on its own.

#include <chrono>
#include <keel/http/router.hpp>
#include <string>
#include <string_view>

namespace keel::http {

class metrics;

/// Gives every request an id: the incoming `header` when it is a sane token (1-128
/// characters of [A-Za-z0-9._:-]), otherwise a fresh random 128-bit hex id. The id is set
/// on the request (so req.log() lines and problem bodies carry it) and echoed back in the
/// response header.
middleware request_id(std::string header = "X-Request-Id");

/// Reads the W3C trace context of every request (`traceparent`, `tracestate`) and serves the
/// request in a child span of the caller's, or in a new trace when the request names none or
/// an invalid one (request::trace(); docs/architecture.md, "Tracing"). A new trace's ids are
/// drawn when request::trace() is first read, so a request nothing traces draws none.
middleware trace_context();

/// One log line per request after it completes: method, target (as loggable_target gives
/// it), status, duration, id. Logged at info level through the "http" component; free when
/// info is disabled.
middleware access_log();

/// The request target as logs show it: the query's values of credentials are replaced by
/// "***" (parameters whose name contains token, secret, password, passwd, key, auth, sig,
/// credential, session or code, in any case), so a token sent in a query string (refused or
/// not) is never written to a log.
std::string loggable_target(const request& req);

/// Turns an exception escaping the handler into a response: problem_error into its
/// problem, anything else into 500 problem+json that carries the request id and nothing
/// internal (the exception's message is logged, not sent).
middleware error_mapping();

/// Counts requests by route and status and observes latency (see metrics.hpp).
middleware observe(metrics& m);

/// What webhook_signature() checks.
struct signature_options {
    std::string secret;                  ///< the HMAC key shared with the sender
    std::string header = "X-Signature";  ///< the field that carries the signature
    std::string prefix = "sha256=";      ///< before the hex digest in that field
};
/// Webhook signature check: HMAC-SHA256 of the raw body under `secret`, hex-encoded in
/// `header` after `prefix` (GitHub's `X-Hub-Signature-256: sha256=<hex>` style). A missing
/// or wrong signature is answered 401 problem+json before the handler runs. The comparison
/// is constant-time.
middleware webhook_signature(signature_options options);

/// Bearer token check: every request must carry `Authorization: Bearer <token>`; any other
/// is answered 401 problem+json with `WWW-Authenticate: Bearer` before the handler runs. The
/// comparison takes the same time whatever the given token (HMACs of both under a random
/// key are compared in constant time, so neither content nor length leaks). Throws
/// std::invalid_argument on an empty token.
middleware bearer_token(std::string token);

/// The token check itself: whether an Authorization header value carries `token`.
class bearer_check {
  public:
    /// Checks for `token`; std::invalid_argument when it is empty.
    explicit bearer_check(std::string_view token);
    /// Whether `authorization` is `Bearer <token>`, compared in constant time.
    bool operator()(std::string_view authorization) const;

  private:
    std::string key_;
    std::string expected_;  // HMAC of the token under key_
};

/// The signature check itself, for use outside middleware.
bool verify_signature(std::string_view secret, std::string_view body, std::string_view header_value,
                      std::string_view prefix = "sha256=");
/// `prefix` + hex(HMAC-SHA256(secret, body)): what a sender puts in the header.
std::string sign(std::string_view secret, std::string_view body,
                 std::string_view prefix = "sha256=");

}  // namespace keel::http
