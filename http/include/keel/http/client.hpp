#pragma once

/// @file
/// The HTTP/1.1 client (target keel::http_client): calls other services from coroutines on a
/// keel::service's threads, over plain TCP or TLS, with a keep-alive pool per origin.
///
/// @code
///   http::client client(service);                        // declare it after the service
///   auto res = co_await client.get("https://payments.internal/v1/charges/ch_1");
///   if (!res) log.warn("payments: {}", res.error().message);   // kind: timeout, tls, ...
///   else if (res->ok()) charge = res->json();
/// @endcode
///
/// @code
///   nlohmann::json body = {{"amount", 42.5}};            // named: not a braced temporary
///   auto req = http::client_request::json(http::method::post, url, body);
///   req.timeout = std::chrono::seconds(2);
///   auto created = co_await client.request(std::move(req));
/// @endcode
///
/// Failures are values (`client_error`, its kind and a message that says why); only a
/// caller's mistake (a malformed URL, a header with a line break) throws
/// std::invalid_argument. TLS is verified against the system's CA store by default, with the
/// host name (or IP address) checked; see tls_options. Every request is bounded by
/// `request_timeout` and can be cancelled with a keel cancellation token, or by cancelling
/// the calling task. /metrics gets the client's figures with
/// `metrics.add_source(http::client_metrics(client))`.
///
/// Spans: with a span sink (client_options::spans, or the service's), each attempt (a
/// redirect is another) is recorded as a client span when it ends: its id is the one sent in
/// `traceparent`, its parent the request's `trace` (without one, the attempt starts a new
/// trace, sent too), its name "GET payments.internal", its attributes http.request.method,
/// server.address, server.port, url.full (without the query), http.response.status_code,
/// and error.type (the client_error_kind, or the status code from 400 on) with the span's
/// status error. A request that sets `traceparent` itself, or whose trace is not sampled, is
/// not recorded.
///
/// Threads: every service thread has its own pool, and a request runs on the thread of the
/// coroutine that makes it (a coroutine on a thread the client does not serve is moved to one
/// that it does). The cap on connections per origin therefore holds per thread.
///
/// Lifetime: construct it before the service runs; destroy it once no request is in flight
/// (after service::run() returned) and before the service, whose io_contexts own its sockets.

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <keel/framework/concurrency/cancellation.hpp>
#include <keel/framework/expected.hpp>
#include <keel/framework/trace.hpp>
#include <keel/http/message.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace boost::asio {
class io_context;
}

namespace keel {
class service;
}

namespace keel::http {

/// Why a request failed.
enum class client_error_kind {
    connect,    ///< no connection: refused, unreachable, reset before the request was sent
    dns,        ///< the host name did not resolve
    tls,        ///< handshake or certificate refused (message: OpenSSL's reason), TLS alert
    timeout,    ///< connect_timeout or the request's timeout passed
    too_large,  ///< the response exceeds max_response_bytes (or its header max_header_bytes)
    protocol,   ///< not valid HTTP/1.1, closed mid-response, or too many redirects
    cancelled,  ///< the request's cancel token, or the calling task, was cancelled
};

/// The kind's name: "connect", "dns", "tls", ...
std::string_view to_string(client_error_kind kind);

/// A request that got no usable response: its kind and a message saying why.
struct client_error {
    /// What went wrong.
    client_error_kind kind;
    std::string message;  ///< says why, naming the origin
};

/// What a client call sends. Build it with the helpers or field by field.
struct client_request {
    /// The request method.
    http::method method = http::method::get;
    std::string url;  ///< http://host[:port]/path?query or https://...
    /// Header fields; the framing ones (Host, Content-Length, Connection, ...) are the client's
    /// and are not sent.
    http::headers headers;
    /// The request body.
    std::string body;
    /// The whole request, from the call to the last byte of the response, redirects and the
    /// wait for a pooled connection included. Empty: client_options::request_timeout.
    std::optional<std::chrono::milliseconds> timeout;
    /// Cancelling it ends the request at once with kind `cancelled`.
    concurrency::cancel_token cancel;
    /// The span the request is made in (a handler's req.trace()): each attempt is sent in a
    /// child span of it, named by `traceparent` (and `tracestate` when the span has one),
    /// unless the request sets those fields itself.
    std::optional<trace::span_context> trace;

    /// A GET of `url`.
    static client_request get(std::string url);
    /// `body` serialised, with Content-Type: application/json.
    static client_request json(http::method m, std::string url, const nlohmann::json& body);
    /// Sets (replaces) a header field.
    client_request& header(std::string_view name, std::string_view value) {
        headers.set(name, value);
        return *this;
    }
    /// Makes the request in `span` (see `trace`).
    client_request& in(const trace::span_context& span) {
        trace = span;
        return *this;
    }
};

/// Thrown by client_response::json() when the body is not JSON.
class client_json_error : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

/// A response as the client read it: status, header fields, body, and the URL that answered.
class client_response {
  public:
    /// An empty 200 response.
    client_response() = default;
    /// A response `url` answered.
    client_response(http::status s, http::headers h, std::string body, std::string url)
        : status_(s), headers_(std::move(h)), body_(std::move(body)), url_(std::move(url)) {}

    /// The status.
    http::status status() const { return status_; }
    /// The status as a number.
    int status_code() const { return to_int(status_); }
    /// Whether the status is 2xx.
    bool ok() const { return status_code() >= 200 && status_code() < 300; }
    /// The header fields.
    const http::headers& headers() const { return headers_; }
    /// A header field's value; nullopt when absent.
    std::optional<std::string_view> header(std::string_view name) const {
        return headers_.get(name);
    }
    ///@{
    /// The body.
    const std::string& body() const { return body_; }
    std::string& body() { return body_; }
    ///@}
    /// The URL that answered (the last one, after redirects).
    const std::string& url() const { return url_; }

    /// The body parsed as JSON (nesting bounded as for request bodies). Throws
    /// client_json_error saying where the text stops being JSON and what the response was.
    nlohmann::json json() const;
    /// The same, converted with nlohmann's from_json; a type error (read_field's, naming the
    /// field) is a client_json_error too.
    template <class T>
    T json_as() const {
        auto j = json();
        try {
            return j.template get<T>();
        } catch (const std::exception& e) {
            throw client_json_error(describe_json_mismatch(e));
        }
    }

  private:
    std::string describe_json_mismatch(const std::exception& e) const;

    http::status status_ = http::status::ok;
    http::headers headers_;
    std::string body_;
    std::string url_;
};

/// TLS for https URLs.
struct tls_options {
    /// Verify the server's certificate chain and its host name (or IP address). Turning this
    /// off accepts any certificate, an attacker's too: the client logs a warning once.
    bool verify = true;
    std::string ca_file;  ///< PEM bundle to trust instead of the system's CA store
    /// A client certificate (PEM, chain allowed) and its private key (PEM), for mutual TLS.
    std::string certificate_file;
    /// The client certificate's private key (PEM).
    std::string private_key_file;
};

/// How a client connects, bounds and records its requests.
struct client_options {
    std::size_t max_connections_per_origin = 16;  ///< per service thread; beyond it requests wait
    std::chrono::milliseconds connect_timeout{5'000};   ///< TCP connect + TLS handshake
    std::chrono::milliseconds request_timeout{30'000};  ///< default of client_request::timeout
    std::chrono::milliseconds idle_timeout{30'000};     ///< closes a pooled connection idle longer
    std::size_t max_response_bytes = 8 * 1024 * 1024;   ///< header + body
    /// The response's status line and header fields, at most.
    std::size_t max_header_bytes = 64 * 1024;
    /// Redirects (301, 302, 303, 307, 308) followed for GET and HEAD, at most this many per
    /// request; 0 returns them as responses. A redirect from https to http is never followed.
    unsigned max_redirects = 0;
    /// TLS for https origins.
    tls_options tls;
    std::string user_agent = "keel";  ///< the User-Agent field; none when empty
    /// Where each request's client spans go (see "Spans" above); null: the service's sink
    /// (keel::service::set_span_sink) for a client made on a service.
    trace::span_sink* spans = nullptr;
    /// false: no spans whatever the sinks (a span exporter's own client).
    bool record_spans = true;
};

/// Per-origin figures, summed over the client's threads.
struct client_stats {
    std::uint64_t requests = 0;  ///< exchanges with the origin (each redirect hop counts)
    /// Requests that failed (client_error).
    std::uint64_t errors = 0;
    /// Connections opened.
    std::uint64_t connections_opened = 0;
    std::uint64_t connections_reused = 0;  ///< requests sent on a pooled connection
};

/// An HTTP/1.1 client with a keep-alive pool per origin; see the file's description.
class client {
  public:
    /// A response, or why there is none.
    using result = keel::expected<client_response, client_error>;

    /// One pool per service thread. Throws std::invalid_argument for unusable options (a CA
    /// file, certificate or key that does not load).
    explicit client(keel::service& service, client_options options = {});
    /// One pool, on `context` (a tool, a test).
    explicit client(boost::asio::io_context& context, client_options options = {});
    ~client();
    client(const client&) = delete;
    client& operator=(const client&) = delete;

    /// Sends `req` and reads the response. Name the request before the co_await (g++ 12
    /// mishandles a braced temporary in a co_await expression).
    boost::asio::awaitable<result> request(client_request req);
    /// A GET of `url`.
    boost::asio::awaitable<result> get(std::string url);
    /// POST with a JSON body.
    boost::asio::awaitable<result> post_json(std::string url, nlohmann::json body);

    /// The options it was made with.
    const client_options& options() const;
    /// Figures of one origin ("https://api.example.com:443": scheme, host, port, always with
    /// the port), or of all of them.
    client_stats stats(std::string_view origin) const;
    /// Figures of all origins.
    client_stats stats() const;
    /// The Prometheus text of the client's metrics (see client_metrics).
    std::string render_metrics() const;

    struct impl;

  private:
    std::unique_ptr<impl> impl_;
};

/// A /metrics source (metrics::add_source) with, per origin:
/// @code
///   keel_http_client_requests_total{origin}                counter
///   keel_http_client_responses_total{origin,class}         counter (class: 1xx .. 5xx)
///   keel_http_client_errors_total{origin,kind}             counter
///   keel_http_client_request_duration_seconds{origin}      histogram
///   keel_http_client_connections_opened_total{origin}      counter
///   keel_http_client_connections_reused_total{origin}      counter
/// @endcode
/// The client must outlive the metrics object.
std::function<boost::asio::awaitable<std::string>()> client_metrics(const client& c);

}  // namespace keel::http
