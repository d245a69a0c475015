#pragma once

// The HTTP/1.1 server: serves a router on a keel::service's threads.
//
// Every service thread has its own acceptor on the same port (SO_REUSEPORT): the kernel
// spreads new connections over the threads, and a connection then lives on the thread
// that accepted it, with no cross-thread hand-off and no locks on the request path.
//
// Connections are keep-alive; pipelined requests are read and answered one after the
// other, so responses leave in request order. Limits, each with its answer:
//   header larger than max_header_bytes               431, connection closed
//   body larger than the route's limit (1 MiB)         413, connection closed
//   malformed request                                  400, connection closed
//   header not complete within header_timeout          connection closed (slowloris)
//   body not complete within body_timeout              connection closed
//   no new request within idle_timeout (keep-alive)    connection closed
//   response not written within write_timeout          connection closed
//   more than max_connections open                     503, connection closed
//   more than max_connections_per_client from one address  429, connection closed
//   HTTP/1.1 without Host, or two Host fields          400, connection closed
// Over either connection limit a connection may take one of `probe_connections` extra
// slots, where GET/HEAD /healthz and /readyz are still answered (one request, then close):
// probes keep working while one client, or many, hold every ordinary slot.
//   handler threw something the middleware did not map 500 problem+json
//
// Graceful shutdown (service::stop(), SIGTERM): the acceptors close, idle keep-alive
// connections are closed, a request being handled is finished and its response written
// with `Connection: close`, bounded by the service's drain deadline. A response that is
// being written is never cut before that deadline.
//
// Thread-safety: construct and start() before or while the service runs; the server, the
// router and any metrics/health objects must outlive service::run(), and the server must be
// destroyed before the service (its sockets belong to the service's io_contexts): declare
// the service first.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <keel/framework/service.hpp>
#include <keel/http/router.hpp>
#include <memory>
#include <string>

namespace keel::http {

class metrics;
class health;

struct server_options {
    std::string address = "0.0.0.0";
    std::uint16_t port = 8080;  // 0: an ephemeral port, see server::port()
    std::size_t max_connections = 10'000;
    std::size_t max_connections_per_client = 1'024;  // by remote address
    std::size_t probe_connections = 32;
    std::size_t max_header_bytes = 16 * 1024;  // request line + header fields
    std::size_t max_body_bytes = 1024 * 1024;  // default per route; route_options::max_body
    std::chrono::milliseconds header_timeout{10'000};
    std::chrono::milliseconds body_timeout{30'000};
    std::chrono::milliseconds idle_timeout{60'000};
    std::chrono::milliseconds write_timeout{30'000};
    int backlog = 1024;
    http::metrics* metrics = nullptr;    // optional: connection and in-flight gauges
    http::health* health = nullptr;      // optional: marked draining when shutdown begins
    std::string server_header = "keel";  // the Server field; none when empty; no control characters
};

// Adds the server's options to a service's schema, with server_options' defaults:
// http_address, http_port and the limits below (so KEEL_HTTP_PORT=9000 or --http_port 9000
// work).
void add_server_options(config::schema& schema);
// Reads them back (metrics and health are left null: wire them in code).
server_options server_options_from(const config::values& values);
// Only the limits and timeouts, for a schema that names the address its own way:
// http_max_connections, http_max_connections_per_client, http_probe_connections,
// http_max_header_bytes, http_max_body_bytes, http_header_timeout, http_body_timeout,
// http_idle_timeout, http_write_timeout.
void add_server_limits(config::schema& schema);
void read_server_limits(const config::values& values, server_options& options);

class server {
  public:
    server(keel::service& service, const http::router& router, server_options options = {});
    ~server();
    server(const server&) = delete;
    server& operator=(const server&) = delete;

    // Binds and starts accepting on every service thread, and registers the shutdown
    // hook. Throws std::system_error naming the address when it cannot bind.
    void start();
    // The bound port (useful with port 0). Valid after start().
    std::uint16_t port() const;
    const server_options& options() const;

    struct impl;

  private:
    std::unique_ptr<impl> impl_;
};

}  // namespace keel::http
