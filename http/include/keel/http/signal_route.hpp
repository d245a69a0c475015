#pragma once

/// @file
/// An HTTP route to emit signals by their concrete path, for operators and curl (target
/// keel::http_signals). Off unless a service adds it:
///
/// @code
///   keel::http::add_signal_route(router, {&payments, &shipping}, {.prefix = "/webhooks/signals"});
/// @endcode
///
/// @code
///   curl -XPOST localhost:8080/webhooks/signals/payment/o-1/received
///        -H 'Content-Type: application/json' -H 'Idempotency-Key: tx-1'
///        -d '{"transactionId": "tx-1", "amount": 10}'
/// @endcode
///
/// `POST <prefix>/<signal path>` emits the signal of `groups` whose pattern matches the path,
/// with the JSON body as its payload (no body: none, for signals without a payload) and the
/// Idempotency-Key header as its idempotency key. Answers 200 {"delivered": N,
/// "duplicate": bool}; 404 when no signal matches the path; 400 when the body is not JSON
/// or does not parse as the signal's payload type (nothing is delivered). The route has no
/// authentication of its own: put it behind the service's webhook signature or other
/// middleware (route options, or a prefix a router-wide middleware guards).

#include <keel/http/router.hpp>
#include <keel/signals/signal.hpp>
#include <string>
#include <vector>

namespace keel::http {

/// Where the signal route is served, and how.
struct signal_route_options {
    std::string prefix = "/signals";  ///< the route serves POST under it
    route_options route;              ///< body limit, per-route middleware
};

/// Emit options for a signal a request emits: its Idempotency-Key header as the key, else
/// `natural_key` (a transaction id, "delivered/<order>"): a retried webhook is a duplicate
/// even when its sender sets no header. The request's trace goes with the signal.
signals::emit_options emit_options_from(const request& req, std::string natural_key);

/// Adds `POST <prefix>/<signal path>` for the signals of `groups` (see the file's
/// description). The groups must outlive the router.
void add_signal_route(router& r, std::vector<const signals::signal_group*> groups,
                      signal_route_options options = {});

}  // namespace keel::http
