#pragma once

/// @file
/// The HTTP/1.1 server: serves a router on a keel::service's threads, over plain TCP or TLS.
///
/// @code
///   http::server_options options;
///   options.port = 8443;
///   options.tls.certificate_file = "/etc/keel/tls/cert.pem";   // chain, leaf first
///   options.tls.private_key_file = "/etc/keel/tls/key.pem";
///   options.tls.client_ca_file = "/etc/keel/tls/clients.pem";  // optional: mutual TLS
///   http::server server(service, router, options);             // throws tls_file_error
///   server.start();
/// @endcode
///
/// Every service thread has its own acceptor on the same port (SO_REUSEPORT): the kernel
/// spreads new connections over the threads, and a connection then lives on the thread
/// that accepted it, with no cross-thread hand-off and no locks on the request path.
///
/// Connections are keep-alive; pipelined requests are read and answered one after the
/// other, so responses leave in request order. Limits, each with its answer:
/// @code
///   header larger than max_header_bytes               431, connection closed
///   body larger than the route's limit (1 MiB)         413, connection closed
///   malformed request                                  400, connection closed
///   TLS handshake not complete within header_timeout   connection closed
///   header not complete within header_timeout          connection closed (slowloris)
///   body not complete within body_timeout              connection closed
///   no new request within idle_timeout (keep-alive)    connection closed
///   response not written within write_timeout          connection closed
///   more than max_connections open                     503, connection closed
///   more than max_connections_per_client from one address  429, connection closed
///   HTTP/1.1 without Host, or two Host fields          400, connection closed
///   handler threw something the middleware did not map 500 problem+json
/// @endcode
/// Over either connection limit a connection may take one of `probe_connections` extra
/// slots, where GET/HEAD /healthz and /readyz are still answered (one request, then close):
/// probes keep working while one client, or many, hold every ordinary slot.
///
/// TLS (options.tls): TLS 1.2 or 1.3 on the same connection loop and limits as plain HTTP;
/// the connection caps count TLS connections before their handshake. The certificate is
/// read again on SIGHUP and when one of the files changes (checked every
/// tls.reload_check); new connections get the new certificate, open ones keep theirs, and
/// files that do not load are logged and leave the previous certificate in use. Plain HTTP
/// sent to a TLS port is answered 400 in plain text and closed.
///
/// Spans: with a span sink (server_options::spans, or the service's), every request the
/// router handles is recorded, once its response is written, as a server span: its context is
/// req.trace() (set by the trace_context middleware), its name "GET /orders/:id" (the
/// route's pattern, never the path with its ids; only the method when no route matched), its
/// attributes http.request.method, url.path, url.scheme, http.route, http.response.status_code,
/// server.address (the Host field), server.port, client.address and, for a 5xx, error.type
/// with the span's status error. A request whose trace is not sampled is not recorded. With
/// no sink nothing is made. Requests refused before routing (431, 413, a bad Host) have none.
///
/// Graceful shutdown (service::stop(), SIGTERM): the acceptors close, idle keep-alive
/// connections are closed, a request being handled is finished and its response written
/// with `Connection: close`, bounded by the service's drain deadline. A response that is
/// being written is never cut before that deadline. TLS connections end with close_notify.
///
/// Thread-safety: construct and start() before or while the service runs; the server, the
/// router and any metrics/health objects must outlive service::run(), and the server must be
/// destroyed before the service (its sockets belong to the service's io_contexts): declare
/// the service first.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <keel/framework/service.hpp>
#include <keel/framework/trace.hpp>
#include <keel/http/router.hpp>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

namespace keel::http {

class metrics;
class health;

/// TLS for a server's port: PEM files. Off (plain HTTP) when no file is given.
struct server_tls_options {
    std::string certificate_file;  ///< the certificate, then its intermediates
    std::string private_key_file;  ///< unencrypted
    std::string client_ca_file;    ///< set: clients must present a certificate issued by it
    /// How often the files' modification times are compared with those loaded (SIGHUP
    /// reloads at once as well); 0: only on SIGHUP.
    std::chrono::milliseconds reload_check{5'000};
    /// Whether any file is given: TLS is on.
    bool enabled() const {
        return !certificate_file.empty() || !private_key_file.empty() || !client_ca_file.empty();
    }
};

/// Which TLS file.
enum class tls_file { certificate, private_key, client_ca };
std::string_view to_string(tls_file which);  ///< "certificate", "private key", "client CA"

/// A TLS file that cannot be used: which one, its path, and why ("cannot read: No such file
/// or directory", "no PEM certificate in it", "not the private key of the certificate in
/// ..."). what() says all three.
class tls_file_error : public std::runtime_error {
  public:
    /// `which` at `path` is unusable for `reason`.
    tls_file_error(tls_file which, std::string path, std::string reason);
    /// Which file.
    tls_file which() const { return which_; }
    /// The file's path.
    const std::string& path() const { return path_; }
    /// Why it is unusable.
    const std::string& reason() const { return reason_; }

  private:
    tls_file which_;
    std::string path_;
    std::string reason_;
};

/// Loads the files as the server would (nothing when TLS is off), to report an unusable one
/// before anything starts. Throws tls_file_error.
void check_tls_files(const server_tls_options& tls);

/// How a server listens, bounds connections and requests, and records them; see the file's
/// description for the limits' answers.
struct server_options {
    /// The address to bind.
    std::string address = "0.0.0.0";
    std::uint16_t port = 8080;  ///< 0: an ephemeral port, see server::port()
    /// Open connections at most, over all threads.
    std::size_t max_connections = 10'000;
    std::size_t max_connections_per_client = 1'024;  ///< by remote address
    /// Extra connections beyond the caps, for health probes only.
    std::size_t probe_connections = 32;
    std::size_t max_header_bytes = 16 * 1024;  ///< request line + header fields
    std::size_t max_body_bytes = 1024 * 1024;  ///< default per route; route_options::max_body
    /// Time for the TLS handshake, and for a request's line and header fields.
    std::chrono::milliseconds header_timeout{10'000};
    /// Time for a request's body.
    std::chrono::milliseconds body_timeout{30'000};
    /// A kept-alive connection waits for the next request this long.
    std::chrono::milliseconds idle_timeout{60'000};
    /// Time for writing one response.
    std::chrono::milliseconds write_timeout{30'000};
    /// The listen backlog.
    int backlog = 1024;
    http::metrics* metrics = nullptr;  ///< optional: connection and in-flight gauges
    http::health* health = nullptr;    ///< optional: marked draining when shutdown begins
    /// The Server field; none when empty; no control characters.
    std::string server_header = "keel";
    /// TLS; off by default.
    server_tls_options tls;
    /// Where each handled request's server span goes (see "Spans" above); null: the
    /// service's sink (keel::service::set_span_sink), and none when that is null too.
    trace::span_sink* spans = nullptr;
};

/// Adds the server's options to a service's schema, with server_options' defaults:
/// http_address, http_port, the limits below and the TLS files (so KEEL_HTTP_PORT=9000 or
/// --http-port 9000 work).
void add_server_options(config::schema& schema);
/// Reads them back (metrics and health are left null: wire them in code).
server_options server_options_from(const config::values& values);
/// Only the limits and timeouts, for a schema that names the address its own way:
/// http_max_connections, http_max_connections_per_client, http_probe_connections,
/// http_max_header_bytes, http_max_body_bytes, http_header_timeout, http_body_timeout,
/// http_idle_timeout, http_write_timeout.
void add_server_limits(config::schema& schema);
/// Reads the limits back into `options`.
void read_server_limits(const config::values& values, server_options& options);
/// The TLS files: tls_cert, tls_key, tls_client_ca (--tls-cert, ...; empty: plain HTTP).
void add_server_tls_options(config::schema& schema);
/// Reads the TLS files back.
server_tls_options read_server_tls(const config::values& values);

/// An HTTP/1.1 server for a router; see the file's description.
class server {
  public:
    /// Loads the TLS files when options.tls names them: throws tls_file_error.
    server(keel::service& service, const http::router& router, server_options options = {});
    ~server();
    server(const server&) = delete;
    server& operator=(const server&) = delete;

    /// Binds and starts accepting on every service thread, and registers the shutdown
    /// hook. Throws std::system_error naming the address when it cannot bind.
    void start();
    /// TLS: reads the files again now, as SIGHUP does. False (and an error logged) when they
    /// do not load: the previous certificate stays in use. False when TLS is off. Any thread.
    bool reload_tls();
    /// The bound port (useful with port 0). Valid after start().
    std::uint16_t port() const;
    /// The options it was made with.
    const server_options& options() const;

    struct impl;

  private:
    std::unique_ptr<impl> impl_;
};

}  // namespace keel::http
