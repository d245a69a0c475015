#pragma once

// keel::admin: the admin HTTP API (docs/admin-api.md). Operators list, inspect and repair
// process instances with it, through the `keel` command line tool, the console or curl:
//
//   keel::admin::mount(router, engine, store, {.token = token, .groups = {&payments}});
//
// Every route lies under /admin and requires `Authorization: Bearer <token>` of one of the
// configured tokens (each compared in constant time, all of them on every request), but for the web
// console's static files under /admin/console/, which carry no data (the page asks for the token
// and sends it with every API call); without mount() none of the paths exist (404). Reads go to the
// store (the operators' index, snapshots, journals); actions go through the engine, fenced like any
// transition, and refusals are problem+json: 404 unknown, 409 final / owned / wrong state, 400 bad
// input; 403 for an action with a read-only token. The engine, the store and the groups must
// outlive the router.
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

// What a token may do: everything, or only read (GET: lists, instances, journals, stats,
// workers, the console's reads), for dashboards; a read-only token's actions are refused 403.
enum class role : std::uint8_t { full, read };

// A named admin token. The name is what audit lines say did an action.
struct token {
    std::string name;
    std::string secret;
    admin::role role = role::full;
};

// The tokens of an admin_token setting: comma-separated, each `name:secret`, `name:secret:read`
// or `name:secret:full`; a bare `secret` (no colon) is a full-access token named "admin", as
// the setting always meant. Throws std::invalid_argument naming what is wrong (an empty name
// or secret, an unknown role, a name given twice).
std::vector<token> parse_tokens(std::string_view setting);

struct options {
    // An admin_token setting (parse_tokens), e.g. "s3cret" or "ops:s1,dash:s2:read".
    std::string token;
    std::vector<admin::token> tokens;  // more tokens, as parsed
    // Signals that POST /admin/signals/<path> may emit (by their concrete path).
    std::vector<const signals::signal_group*> groups;
};

// Throws std::invalid_argument when there is no token, or the setting is malformed.
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
