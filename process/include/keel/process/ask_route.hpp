#pragma once

/// @file
/// An HTTP route that sends a request to a running process instance and answers with the
/// instance's reply (engine::ask), for curl, operators and other services (target
/// keel::process_http). The sibling of the signal route (keel/http/signal_route.hpp): that
/// one fires a signal and answers at once; this one waits for the answer.
///
/// @code
///   keel::process::add_ask_route(router, engine, {"/subscription/cancel", "/subscription/plan"},
///                                {.prefix = "/requests"});
/// @endcode
///
/// @code
///   url='localhost:8080/requests/subscription/cancel?instance=/subscription/s-1'
///   curl --json '{"reason": "moving"}' -H 'Idempotency-Key: c-1' "$url"
///   {"instance": "/subscription/s-1", "answer": {"refund": 1250}}
/// @endcode
///
/// `POST <prefix>/<request path>?instance=<id>[&timeout_ms=N]` asks instance `id` the request
/// at that path, with the JSON body (none: null) as the request's body, and answers 200
/// {"instance", "answer"}. Errors are problem+json naming the instance: 404 when the path is
/// not one of `paths` or there is no such instance; 409 when the instance is final or ended
/// without answering; 504 when it did not answer within the timeout (the request stays in its
/// inbox and may still be answered: ask again with the same Idempotency-Key to read it); 422
/// when the handler refused it (the reason is the detail); 400 for a missing `instance`, a bad
/// `timeout_ms` or a body that is not JSON.
///
/// The Idempotency-Key header makes a retry safe: the request's id is derived from the path
/// and the key, so a repeated request gets the first answer and is not delivered again.
///
/// Like the signal route, it has no authentication of its own: guard it with the service's
/// middleware (route_options, or a router-wide middleware on the prefix).

#include <chrono>
#include <keel/http/router.hpp>
#include <keel/process/engine.hpp>
#include <string>
#include <vector>

namespace keel::process {

/// Where the ask route is served, and how.
struct ask_route_options {
    std::string prefix = "/requests";  ///< the route serves POST under it
    /// The wait when the client gives no `timeout_ms`.
    std::chrono::milliseconds timeout = std::chrono::seconds(10);
    /// The longest wait a client may ask for with `timeout_ms` (a longer one is answered 400).
    std::chrono::milliseconds max_timeout = std::chrono::minutes(5);
    http::route_options route;  ///< body limit, per-route middleware
};

/// Adds `POST <prefix>/<request path>` for the request paths `paths` (exact paths, as the
/// handlers `ctx.receive` them; see the file's description). The engine must outlive the
/// router. Throws std::invalid_argument for an empty list, a path not starting with '/', or
/// a default timeout that is zero or above the maximum.
void add_ask_route(http::router& r, engine& eng, std::vector<std::string> paths,
                   ask_route_options options = {});

}  // namespace keel::process
