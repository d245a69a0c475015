#pragma once

// keel::admin: the admin HTTP API (docs/admin-api.md). Operators list, inspect and repair
// process instances with it, through the `keel` command line tool, the console or curl:
//
//   keel::admin::mount(router, engine, store, {.token = token, .groups = {&payments}});
//
// Every route lies under /admin and requires `Authorization: Bearer <token>` (compared in
// constant time), but for the web console's static files under /admin/console/, which
// carry no data (the page asks for the token and sends it with every API call); without
// mount() none of the paths exist (404). Reads go to the store
// (the operators' index, snapshots, journals); actions go through the engine, fenced like
// any transition, and refusals are problem+json: 404 unknown, 409 final / owned / wrong
// state, 400 bad input. The engine, the store and the groups must outlive the router.
//
// A service that serves the API on a port of its own mounts it on a router of its own
// and serves that with a second http::server (see examples/orders/main.cpp);
// add_options() declares the settings for both (admin_token, admin_host, admin_port, and
// the port's TLS files admin_tls_cert, admin_tls_key, admin_tls_client_ca).

#include <cstdint>
#include <keel/framework/config.hpp>
#include <keel/http/router.hpp>
#include <keel/http/server.hpp>
#include <keel/process/engine.hpp>
#include <keel/process/store.hpp>
#include <keel/signals/signal.hpp>
#include <string>
#include <vector>

namespace keel::admin {

struct options {
    std::string token;  // required: mount() throws std::invalid_argument when empty
    // Signals that POST /admin/signals/<path> may emit (by their concrete path).
    std::vector<const signals::signal_group*> groups;
};

void mount(http::router& router, process::engine& engine, process::store& store, options opts);

// The settings of a service's admin API: admin_token (empty: the API is off), admin_host
// and admin_port (0: on the service's own port), and the TLS files of that port of its own
// (admin_tls_cert, admin_tls_key, admin_tls_client_ca; empty: plain HTTP, which the `keel`
// command line speaks). On the service's port the API has that port's TLS.
void add_options(config::schema& schema);

struct settings {
    std::string token;
    std::string host;
    std::uint16_t port = 0;
    http::server_tls_options tls;  // of the admin port
    bool enabled() const { return !token.empty(); }
};
settings settings_from(const config::values& values);

}  // namespace keel::admin
