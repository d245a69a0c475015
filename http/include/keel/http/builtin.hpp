#pragma once

/// @file
/// The endpoints and middleware every Keel service has.
///
/// @code
///   http::router router;
///   http::metrics metrics;
///   http::health health;
///   health.add_check("redis", http::redis_check(redis));
///   http::install_defaults(router, metrics, health);
///   ... router.get(...), http::mount<...>(router, container) ...
/// @endcode
///
/// Built-in routes:
/// @code
///   GET /healthz   200 {"status":"ok"} while the process serves
///   GET /readyz    200 {"status":"ready","checks":{...}}, or 503 when a check fails or
///                  the service is shutting down
///   GET /metrics   Prometheus text (metrics.hpp)
/// @endcode

#include <keel/http/health.hpp>
#include <keel/http/metrics.hpp>
#include <keel/http/router.hpp>

namespace keel::http {

/// Adds /healthz, /readyz and /metrics.
void add_builtin_routes(router& r, metrics& m, health& h);

/// Adds the default middleware, outermost first: trace_context, request_id, access_log,
/// observe(metrics), error_mapping; then the built-in routes. Call before adding other middleware
/// so that they run inside the defaults. `metrics` and `health` must outlive the router.
void install_defaults(router& r, metrics& m, health& h);

}  // namespace keel::http
