#include <openssl/err.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <ctime>
#include <keel/http/health.hpp>
#include <keel/http/metrics.hpp>
#include <keel/http/middleware.hpp>
#include <keel/http/server.hpp>
#include <list>
#include <mutex>
#include <stdexcept>
#include <system_error>
#include <unordered_map>

#include "response_head.hpp"
#include "server_tls.hpp"

namespace keel::http {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace ssl = boost::asio::ssl;
using tcp = asio::ip::tcp;
using tls_stream = ssl::stream<tcp::socket>;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
constexpr std::size_t read_chunk = 8192;
constexpr std::size_t linger_limit = 4 * 1024 * 1024;
constexpr std::chrono::milliseconds linger_time{500};
constexpr std::chrono::milliseconds probe_header_timeout{1'000};
constexpr std::size_t kept_head_bytes = 4096;  // a connection's head buffer kept between writes

using reuse_port = asio::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>;

method to_method(bhttp::verb v) {
    switch (v) {
        case bhttp::verb::get:
            return method::get;
        case bhttp::verb::head:
            return method::head;
        case bhttp::verb::post:
            return method::post;
        case bhttp::verb::put:
            return method::put;
        case bhttp::verb::patch:
            return method::patch;
        case bhttp::verb::delete_:
            return method::del;
        case bhttp::verb::options:
            return method::options;
        case bhttp::verb::connect:
            return method::connect;
        case bhttp::verb::trace:
            return method::trace;
        default:
            return method::other;
    }
}

// The Date header, formatted once per second per thread.
const std::string& http_date() {
    thread_local std::time_t cached_second = 0;
    thread_local std::string cached;
    std::time_t now = std::time(nullptr);
    if (now != cached_second) {
        std::tm tm{};
        gmtime_r(&now, &tm);
        char text[64];
        auto n = std::strftime(text, sizeof text, "%a, %d %b %Y %H:%M:%S GMT", &tm);
        cached.assign(text, n);
        cached_second = now;
    }
    return cached;
}

// A request body held as a string that grows as bytes arrive. Beast's string_body reserves
// the announced Content-Length up front, so a client announcing 1 MiB and sending nothing
// held 1 MiB of this server's memory per connection; the body limit bounds what a request
// may send, not what is reserved before it is sent.
struct growing_body {
    using value_type = std::string;

    class reader {
      public:
        template <bool is_request, class Fields>
        reader(bhttp::header<is_request, Fields>&, value_type& body) : body_(body) {}
        void init(const boost::optional<std::uint64_t>&, beast::error_code& ec) { ec = {}; }
        template <class Buffers>
        std::size_t put(const Buffers& buffers, beast::error_code& ec) {
            auto n = asio::buffer_size(buffers);
            auto at = body_.size();
            body_.resize(at + n);  // geometric growth: amortised O(1) per byte
            asio::buffer_copy(asio::buffer(body_.data() + at, n), buffers);
            ec = {};
            return n;
        }
        void finish(beast::error_code& ec) { ec = {}; }

      private:
        value_type& body_;
    };
};

// RFC 9112 §3.2: an HTTP/1.1 request has exactly one Host field; HTTP/1.0 at most one.
std::optional<std::string> host_problem(const bhttp::request_header<>& h) {
    auto [first, last] = h.equal_range(bhttp::field::host);
    auto hosts = std::distance(first, last);
    if (hosts > 1) return "more than one Host header field";
    if (hosts == 0 && h.version() >= 11) return "an HTTP/1.1 request needs a Host header field";
    return std::nullopt;
}

// The host of a Host field: "[::1]:8080" -> "::1", "api.example.com:8080" -> "api.example.com".
std::string_view host_of(std::string_view field) {
    if (field.starts_with('[')) {
        auto close = field.find(']');
        return close == std::string_view::npos ? field : field.substr(1, close - 1);
    }
    return field.substr(0, field.find(':'));
}

// The server span of a request whose response (`status_code`) was written.
trace::span server_span(const request& req, int status_code,
                        std::chrono::system_clock::time_point start, std::uint16_t port, bool tls) {
    trace::span s;
    s.context = req.trace();
    s.what = trace::span::kind::server;
    s.start = start;
    s.end = std::chrono::system_clock::now();
    // An unknown method is not a name of its own (any token is a method): cardinality.
    const bool known = req.method() != method::other;
    auto route = req.route_pattern();
    s.name = known ? std::string(req.method_name()) : std::string("HTTP");
    if (!route.empty()) s.name.append(" ").append(route);
    auto& a = s.attributes;
    a.reserve(10);
    a.emplace_back("http.request.method", std::string(known ? req.method_name() : "_OTHER"));
    if (!known) a.emplace_back("http.request.method_original", std::string(req.method_name()));
    a.emplace_back("url.path", std::string(req.raw_path()));
    a.emplace_back("url.scheme", std::string(tls ? "https" : "http"));
    if (!route.empty()) a.emplace_back("http.route", std::string(route));
    a.emplace_back("http.response.status_code", std::int64_t{status_code});
    if (auto host = req.header("Host"); host && !host->empty())
        a.emplace_back("server.address", std::string(host_of(*host)));
    a.emplace_back("server.port", std::int64_t{port});
    if (!req.client_address().empty())
        a.emplace_back("client.address", std::string(req.client_address()));
    if (status_code >= 500) {
        s.outcome = trace::span::status::error;
        a.emplace_back("error.type", std::to_string(status_code));
    }
    return s;
}

bool is_http_parse_error(const beast::error_code& ec) {
    return ec.category() == bhttp::make_error_code(bhttp::error::bad_target).category() &&
           ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message &&
           ec != bhttp::error::need_more;
}

}  // namespace

namespace detail {

// What the deadline sweep and shutdown see of a connection, plain or TLS.
class swept_connection {
  public:
    virtual ~swept_connection() = default;
    virtual void check_deadline(std::chrono::steady_clock::time_point now) = 0;
    virtual void close_if_idle() = 0;
};

// Per-thread state: touched only on its own thread.
struct thread_state {
    std::unique_ptr<tcp::acceptor> acceptor;
    std::unique_ptr<asio::steady_timer> sweeper;
    std::list<swept_connection*> connections;
    bool draining = false;
};
}  // namespace detail

// How a new connection is admitted. Over a limit (all connections, or one client
// address's), a connection may still take one of the few probe slots, where it is served
// one request for /healthz or /readyz and refused anything else: probes stay answerable
// while one client, or many, hold every ordinary slot.
enum class admission { full, probe_only_server_full, probe_only_client_full, refused };

struct server::impl {
    impl(keel::service& s, const http::router& r, server_options o)
        : service(s), router(r), options(std::move(o)) {}

    admission admit(const asio::ip::address& client);
    void release(const asio::ip::address& client, admission a);

    void bind();
    void begin_shutdown();
    void stop_thread(std::size_t index);
    void watch_tls();
    trace::span_sink* span_sink() const {
        return options.spans ? options.spans : service.span_sink();
    }

    keel::service& service;
    const http::router& router;
    server_options options;
    std::unique_ptr<detail::tls_identity> tls;         // null: plain HTTP
    std::unique_ptr<asio::signal_set> reload_signal;   // SIGHUP, on thread 0
    std::unique_ptr<asio::steady_timer> reload_timer;  // the files' check, on thread 0
    bool tls_watch_stopped = false;                    // on thread 0
    std::vector<detail::thread_state> threads;
    std::atomic<std::size_t> open{0};
    std::mutex clients_mutex;  // once per connection, never per request
    std::unordered_map<asio::ip::address, std::size_t> clients;
    std::atomic<std::size_t> probe_slots_taken{0};
    std::uint16_t port = 0;
    std::chrono::milliseconds tick{1000};  // deadline resolution
    bool started = false;
    log::logger log{"http"};
};

namespace detail {

// One client connection: the request loop, its limits and its graceful end, over a plain
// TCP socket or a TLS stream (`Stream`); the two differ only in the handshake and the end.
//
// Deadlines are not timers: each phase stores its deadline in the connection, and the
// thread's sweep (see `sweep`) cancels the socket of a connection whose deadline passed.
// A request therefore costs no timer operations, only a clock read per phase.
template <class Stream>
class connection final : public swept_connection {
  public:
    static constexpr bool is_tls = std::is_same_v<Stream, tls_stream>;
    enum class phase { handshaking, idle, reading, handling, writing, closing };

    connection(server::impl& server, std::size_t thread, Stream stream, asio::ip::address client,
               admission admitted)
        : server_(server),
          options_(server.options),
          thread_(server.threads[thread]),
          stream_(std::move(stream)),
          client_(client),
          admitted_(admitted),
          restricted_(admitted != admission::full) {
        self_ = thread_.connections.insert(thread_.connections.end(), this);
        if (options_.metrics) options_.metrics->connection_opened();
    }
    ~connection() override {
        thread_.connections.erase(self_);
        server_.release(client_, admitted_);
        if (options_.metrics) options_.metrics->connection_closed();
        if (thread_.draining && thread_.connections.empty()) thread_.sweeper->cancel();
    }
    connection(const connection&) = delete;
    connection& operator=(const connection&) = delete;

    // The request loop: read a request, handle it, write its response, repeat while the
    // connection is kept alive. Pipelined requests wait in buffer_, so they are answered
    // one after the other, in order. (One loop in one coroutine: the parsers live in this
    // frame, allocated once per connection rather than once per request.)
    asio::awaitable<void> run() {
        if (!co_await handshake()) co_return;
        for (bool first = true; expect_request(first); first = false) {
            bhttp::request_parser<bhttp::empty_body> head;
            head.header_limit(static_cast<std::uint32_t>(options_.max_header_bytes));
            head.body_limit(boost::none);
            auto [ec, n] = co_await bhttp::async_read_header(stream_, buffer_, head, use_tuple);
            if (ec) {
                co_await reject(ec);
                break;
            }

            // The server span starts when the header has arrived; nothing when none is kept.
            auto* spans = server_.span_sink();
            auto started =
                spans ? std::chrono::system_clock::now() : std::chrono::system_clock::time_point();
            const auto& h = head.get();
            version_ = h.version();
            auto bad_host = host_problem(h);
            if (bad_host) {
                auto res = response::problem(status::bad_request, *bad_host);
                if (co_await write(std::move(res), false, false)) co_await linger();
                break;
            }
            request req(to_method(h.method()), std::string(h.target()), copy_headers(h));
            if (req.method() == method::other) req.set_method_name(std::string(h.method_string()));
            req.set_client_address(client_text_);
            auto match = server_.router.match(req);
            auto limit = match.route && match.route->max_body ? *match.route->max_body
                                                              : options_.max_body_bytes;
            if (auto length = head.content_length(); length && *length > limit) {
                co_await reject(bhttp::error::body_limit);
                break;
            }
            if (!head.is_done() &&
                bhttp::token_list{h[bhttp::field::expect]}.exists("100-continue"))
                co_await send_continue();

            bool keep_alive = h.keep_alive();
            bool is_head = req.method() == method::head;
            if (restricted_ && !serves_when_full(req)) {
                auto res = response::problem(restricted_problem());
                if (co_await write(std::move(res), false, false)) co_await linger();
                break;
            }
            bhttp::request_parser<growing_body> full(std::move(head));
            full.body_limit(limit);
            if (!full.is_done()) {
                enter(phase::reading, options_.body_timeout);
                auto [body_ec, body_n] =
                    co_await bhttp::async_read(stream_, buffer_, full, use_tuple);
                if (body_ec) {
                    co_await reject(body_ec);
                    break;
                }
            }
            req.set_body(std::move(full.get().body()));

            phase_ = phase::handling;  // no deadline: handlers are bounded by the drain deadline
            deadline_ = std::chrono::steady_clock::time_point::max();
            auto res = co_await handle(req, std::move(match));
            const int status_code = to_int(res.status());
            keep_alive = keep_alive && !draining() && !restricted_;
            const bool written = co_await write(std::move(res), is_head, keep_alive);
            if (spans && req.trace().sampled && spans->admit())
                spans->record(server_span(req, status_code, started, server_.port, is_tls));
            if (!written || !keep_alive) break;
        }
        if constexpr (is_tls) {
            enter(phase::closing, linger_time);
            co_await end_tls();
        }
        close();
    }

    // Shutdown: a connection waiting for its next request, with nothing of it received, or
    // still in its TLS handshake, is closed at once.
    void close_if_idle() override {
        if ((phase_ == phase::idle && buffer_.size() == 0) || phase_ == phase::handshaking)
            expire();
    }

    // Called by the sweep. The first byte of a request moves an idle connection to the
    // (usually shorter) header deadline.
    void check_deadline(std::chrono::steady_clock::time_point now) override {
        if (phase_ == phase::idle && buffer_.size() > 0) {
            phase_ = phase::reading;
            deadline_ = std::min(deadline_, now + options_.header_timeout);
        }
        if (now >= deadline_) expire();
    }

  private:
    void enter(phase p, std::chrono::milliseconds limit) {
        phase_ = p;
        deadline_ = std::chrono::steady_clock::now() + limit;
    }
    void expire() {
        deadline_ = std::chrono::steady_clock::time_point::max();
        beast::error_code ignored;
        socket().cancel(ignored);
    }
    tcp::socket& socket() {
        if constexpr (is_tls)
            return stream_.next_layer();
        else
            return stream_;
    }
    bool draining() const { return thread_.draining; }

    static bool serves_when_full(const request& req) {
        bool probe = req.path() == "/healthz" || req.path() == "/readyz";
        return probe && (req.method() == method::get || req.method() == method::head);
    }
    problem restricted_problem() const {
        if (admitted_ == admission::probe_only_client_full)
            return problem{status::too_many_requests,
                           "too many open connections from this address (limit " +
                               std::to_string(options_.max_connections_per_client) + ")"};
        return problem{status::service_unavailable, "the server has too many open connections"};
    }

    // Starts waiting for the next request: the idle deadline when nothing of it has arrived
    // yet, the header deadline when pipelined bytes are already buffered. False when the
    // connection should end instead (shutdown).
    bool expect_request(bool first) {
        if (buffer_.size() > 0) {
            enter(phase::reading, options_.header_timeout);
            return true;
        }
        if (draining()) return false;
        enter(phase::idle, first ? header_limit() : options_.idle_timeout);
        return true;
    }
    std::chrono::milliseconds header_limit() const {
        return restricted_ ? std::min(options_.header_timeout, probe_header_timeout)
                           : options_.header_timeout;
    }

    // TLS: the handshake, within the header deadline (a client that never sends its hello,
    // or stalls in the middle, is cut off like a slow header). Plain HTTP sent to the port
    // is answered 400 in plain text. False when the connection is over.
    asio::awaitable<bool> handshake() {
        if constexpr (is_tls) {
            enter(phase::handshaking, header_limit());
            auto [ec] = co_await stream_.async_handshake(ssl::stream_base::server, use_tuple);
            if (ec) {
                server_.log.debug("TLS handshake with {} failed: {}", client_text_, ec.message());
                if (ec.category() == asio::error::get_ssl_category() &&
                    ERR_GET_REASON(static_cast<unsigned long>(ec.value())) == SSL_R_HTTP_REQUEST)
                    answer_plain_request();
                close_socket();
                co_return false;
            }
            tls_open_ = true;
        }
        co_return true;
    }

    // A best-effort plain-text 400 to a client speaking plain HTTP to the TLS port (its
    // request was read by the handshake; the socket's send buffer takes the answer).
    void answer_plain_request() {
        static constexpr std::string_view text =
            "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\n"
            "Content-Length: 41\r\n\r\nThis port speaks HTTPS, not plain HTTP.\r\n";
        beast::error_code ignored;
        socket().non_blocking(true, ignored);
        socket().write_some(asio::buffer(text.data(), text.size()), ignored);
    }

    // Runs the router; an exception that escapes it (no error-mapping middleware) is a
    // 500 without details rather than a dropped connection.
    asio::awaitable<response> handle(request& req, match_result match) {
        struct in_flight {
            http::metrics* m;
            explicit in_flight(http::metrics* metrics) : m(metrics) {
                if (m) m->request_started();
            }
            ~in_flight() {
                if (m) m->request_finished();
            }
        } counted(options_.metrics);
        try {
            co_return co_await server_.router.dispatch(req, std::move(match));
        } catch (const std::exception& e) {
            server_.log.error("unhandled exception in {} {}: {}", req.method_name(),
                              loggable_target(req), e.what());
        }
        co_return response::problem(status::internal_server_error,
                                    "the server failed to handle the request");
    }

    asio::awaitable<bool> write(response res, bool is_head, bool keep_alive) {
        head_.clear();
        auto mended = detail::append_response_head(head_, res,
                                                   {.version = version_,
                                                    .keep_alive = keep_alive,
                                                    .is_head = is_head,
                                                    .server = options_.server_header,
                                                    .date = http_date()});
        if (mended > 0)
            server_.log.warn(
                "{} header field(s) of a {} response left out or mended: a name that is not "
                "a token, or a control character in a value",
                mended, to_int(res.status()));
        std::array<asio::const_buffer, 2> bytes{asio::buffer(head_), asio::const_buffer()};
        if (detail::sends_body(res, is_head)) bytes[1] = asio::buffer(res.body());
        enter(phase::writing, options_.write_timeout);
        auto [ec, n] = co_await asio::async_write(stream_, bytes, use_tuple);
        if (head_.capacity() > kept_head_bytes) head_ = std::string();  // a rare large head
        co_return !ec;
    }

    // Answers a request that could not be read (when there is an answer to give) and ends
    // the connection. Timeouts and closed connections end it silently.
    asio::awaitable<void> reject(beast::error_code ec) {
        std::optional<problem> p;
        if (ec == bhttp::error::header_limit)
            p = problem{status::request_header_fields_too_large,
                        "the request header exceeds " + std::to_string(options_.max_header_bytes) +
                            " bytes"};
        else if (ec == bhttp::error::body_limit)
            p = problem{status::payload_too_large,
                        "the request body exceeds the limit of this route"};
        else if (is_http_parse_error(ec))
            p = problem{status::bad_request, "malformed request: " + ec.message()};
        if (!p) co_return;
        auto res = response::problem(*p);
        if (co_await write(std::move(res), false, false)) co_await linger();
    }

    asio::awaitable<void> send_continue() {
        static constexpr std::string_view text = "HTTP/1.1 100 Continue\r\n\r\n";
        enter(phase::writing, options_.write_timeout);
        co_await asio::async_write(stream_, asio::buffer(text.data(), text.size()), use_tuple);
    }

    // After an error response, reads and discards what the client is still sending for a
    // moment, so closing does not reset the connection before the client read the answer.
    asio::awaitable<void> linger() {
        enter(phase::closing, linger_time);
        if constexpr (is_tls) {
            if (!co_await end_tls()) co_return;  // the deadline passed
        }
        beast::error_code ignored;
        socket().shutdown(tcp::socket::shutdown_send, ignored);
        std::array<char, 8192> scratch;
        for (std::size_t total = 0; total < linger_limit;) {
            auto [ec, n] = co_await socket().async_read_some(asio::buffer(scratch), use_tuple);
            if (ec) break;
            total += n;
        }
    }

    void close() {
        phase_ = phase::closing;
        close_socket();
    }

    // TLS: sends close_notify and waits for the client's (or its close), within the closing
    // deadline the caller entered. False when that deadline passed. Once per connection.
    asio::awaitable<bool> end_tls() {
        if (!tls_open_) co_return true;
        tls_open_ = false;
        auto [ec] = co_await stream_.async_shutdown(use_tuple);
        co_return ec != asio::error::operation_aborted;
    }

    void close_socket() {
        beast::error_code ignored;
        socket().shutdown(tcp::socket::shutdown_send, ignored);
        socket().close(ignored);
    }

    static http::headers copy_headers(const bhttp::request_header<>& h) {
        http::headers out;
        out.reserve(static_cast<std::size_t>(std::distance(h.begin(), h.end())));
        for (const auto& field : h)
            out.add(std::string(field.name_string()), std::string(field.value()));
        return out;
    }

    server::impl& server_;
    const server_options& options_;
    thread_state& thread_;
    Stream stream_;
    asio::ip::address client_;
    std::string client_text_ = client_.to_string();  // for each request's client_address()
    admission admitted_;
    bool restricted_;  // in a probe slot: one request, health only
    beast::flat_buffer buffer_;
    unsigned version_ = 11;
    std::string head_;  // the head being written; its capacity kept from response to response
    phase phase_ = phase::idle;
    std::chrono::steady_clock::time_point deadline_ = std::chrono::steady_clock::time_point::max();
    bool tls_open_ = false;  // the handshake completed and close_notify is not sent yet
    std::list<swept_connection*>::iterator self_;
};

// Enforces the connections' deadlines on one thread: every `tick` it cancels the socket
// of each connection whose deadline passed. Ends once the thread is draining and has no
// connections left.
asio::awaitable<void> sweep(server::impl& server, std::size_t thread) {
    auto& t = server.threads[thread];
    while (!(t.draining && t.connections.empty())) {
        t.sweeper->expires_after(server.tick);
        co_await t.sweeper->async_wait(use_tuple);
        auto now = std::chrono::steady_clock::now();
        for (auto* c : t.connections) c->check_deadline(now);
    }
}

asio::awaitable<void> serve_connection(server::impl& server, std::size_t thread, tcp::socket socket,
                                       asio::ip::address client, admission admitted) {
    connection<tcp::socket> c(server, thread, std::move(socket), client, admitted);
    co_await c.run();
}

// `context` is the certificate current when the connection was accepted: the connection
// keeps it whatever reloads happen meanwhile.
asio::awaitable<void> serve_tls_connection(server::impl& server, std::size_t thread,
                                           tcp::socket socket,
                                           std::shared_ptr<ssl::context> context,
                                           asio::ip::address client, admission admitted) {
    connection<tls_stream> c(server, thread, tls_stream(std::move(socket), *context), client,
                             admitted);
    co_await c.run();
}

// Over the connection limits with every probe slot taken: a best-effort 503 without
// blocking the accept loop.
void refuse(tcp::socket& socket) {
    static const std::string text = [] {
        std::string body = R"({"type":"about:blank","title":"Service Unavailable","status":503,)"
                           R"("detail":"the server has too many open connections"})";
        return "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/problem+json\r\n"
               "Retry-After: 1\r\nConnection: close\r\nContent-Length: " +
               std::to_string(body.size()) + "\r\n\r\n" + body;
    }();
    beast::error_code ignored;
    socket.non_blocking(true, ignored);
    socket.write_some(asio::buffer(text.data(), text.size()), ignored);
    socket.shutdown(tcp::socket::shutdown_send, ignored);
    socket.close(ignored);
}

asio::awaitable<void> accept_loop(server::impl& server, std::size_t thread) {
    auto& acceptor = *server.threads[thread].acceptor;
    asio::steady_timer backoff(acceptor.get_executor());
    for (;;) {
        auto [ec, socket] = co_await acceptor.async_accept(use_tuple);
        if (!acceptor.is_open() || ec == asio::error::operation_aborted) break;
        if (ec) {
            // Out of descriptors or similar: wait a little instead of spinning.
            server.log.warn("accept failed: {}", ec.message());
            backoff.expires_after(std::chrono::milliseconds(50));
            co_await backoff.async_wait(use_tuple);
            continue;
        }
        beast::error_code ignored;
        auto client = socket.remote_endpoint(ignored).address();
        auto admitted = server.admit(client);
        if (admitted == admission::refused) {
            if (server.tls)
                socket.close(ignored);  // a TLS client would not read a plain-text 503
            else
                refuse(socket);
            continue;
        }
        socket.set_option(tcp::no_delay(true), ignored);
        if (server.tls)
            server.service.spawn(thread, "https connection",
                                 serve_tls_connection(server, thread, std::move(socket),
                                                      server.tls->current(), client, admitted));
        else
            server.service.spawn(
                thread, "http connection",
                serve_connection(server, thread, std::move(socket), client, admitted));
    }
}

}  // namespace detail

// SO_REUSEPORT would let a second service of the same user share a port in use, silently
// splitting its traffic: a plain bind first proves that the port is free.
void ensure_port_free(const tcp::endpoint& endpoint, asio::io_context& context) {
    if (endpoint.port() == 0) return;
    tcp::acceptor probe(context);
    probe.open(endpoint.protocol());
    probe.set_option(asio::socket_base::reuse_address(true));
    probe.bind(endpoint);
}

void server::impl::bind() {
    asio::ip::address address;
    try {
        address = asio::ip::make_address(options.address);
    } catch (const boost::system::system_error& e) {
        throw std::system_error(e.code(), "invalid listen address '" + options.address + "'");
    }
    tcp::endpoint endpoint(address, options.port);
    try {
        ensure_port_free(endpoint, service.context(0));
    } catch (const boost::system::system_error& e) {
        throw std::system_error(e.code(), "cannot listen on " + options.address + ":" +
                                              std::to_string(endpoint.port()));
    }
    threads = std::vector<detail::thread_state>(service.thread_count());
    for (std::size_t i = 0; i < threads.size(); ++i) {
        auto acceptor = std::make_unique<tcp::acceptor>(service.context(i));
        try {
            acceptor->open(endpoint.protocol());
            acceptor->set_option(asio::socket_base::reuse_address(true));
            acceptor->set_option(reuse_port(true));
            acceptor->bind(endpoint);
            acceptor->listen(options.backlog);
        } catch (const boost::system::system_error& e) {
            throw std::system_error(e.code(), "cannot listen on " + options.address + ":" +
                                                  std::to_string(endpoint.port()));
        }
        endpoint.port(acceptor->local_endpoint().port());
        threads[i].acceptor = std::move(acceptor);
        threads[i].sweeper = std::make_unique<asio::steady_timer>(service.context(i));
    }
    port = endpoint.port();
    auto shortest = std::min({options.header_timeout, options.body_timeout, options.idle_timeout,
                              options.write_timeout});
    tick = std::clamp(shortest / 10, std::chrono::milliseconds(5), std::chrono::milliseconds(1000));
}

admission server::impl::admit(const asio::ip::address& client) {
    bool server_full = open.fetch_add(1) >= options.max_connections;
    bool client_full = false;
    {
        std::lock_guard lock(clients_mutex);
        client_full = ++clients[client] > options.max_connections_per_client;
    }
    if (!server_full && !client_full) return admission::full;
    if (probe_slots_taken.fetch_add(1) < options.probe_connections)
        return server_full ? admission::probe_only_server_full : admission::probe_only_client_full;
    probe_slots_taken.fetch_sub(1);
    release(client, admission::full);
    return admission::refused;
}

void server::impl::release(const asio::ip::address& client, admission a) {
    open.fetch_sub(1);
    if (a != admission::full) probe_slots_taken.fetch_sub(1);
    std::lock_guard lock(clients_mutex);
    auto it = clients.find(client);
    if (it != clients.end() && --it->second == 0) clients.erase(it);
}

void server::impl::begin_shutdown() {
    if (options.health) options.health->set_draining();
    if (tls)
        asio::post(service.executor(0), [this] {
            tls_watch_stopped = true;
            beast::error_code ignored;
            if (reload_signal) reload_signal->cancel(ignored);
            if (reload_timer) reload_timer->cancel();
        });
    for (std::size_t i = 0; i < threads.size(); ++i)
        asio::post(service.executor(i), [this, i] { stop_thread(i); });
}

void server::impl::stop_thread(std::size_t index) {
    auto& t = threads[index];
    t.draining = true;
    beast::error_code ignored;
    t.acceptor->close(ignored);
    for (auto* c : t.connections) c->close_if_idle();
    if (t.connections.empty()) t.sweeper->cancel();
}

// Reloads the certificate on SIGHUP and when its files change, on thread 0, until shutdown.
void server::impl::watch_tls() {
    if (!tls) return;
    reload_signal = std::make_unique<asio::signal_set>(service.context(0), SIGHUP);
    service.spawn(0, "TLS reload on SIGHUP", [this]() -> asio::awaitable<void> {
        while (!tls_watch_stopped) {
            auto [ec, signal] = co_await reload_signal->async_wait(use_tuple);
            if (ec || tls_watch_stopped) break;
            tls->reload("SIGHUP");
        }
    });
    if (options.tls.reload_check <= std::chrono::milliseconds::zero()) return;
    reload_timer = std::make_unique<asio::steady_timer>(service.context(0));
    service.spawn(0, "TLS file check", [this]() -> asio::awaitable<void> {
        while (!tls_watch_stopped) {
            reload_timer->expires_after(options.tls.reload_check);
            auto [ec] = co_await reload_timer->async_wait(use_tuple);
            if (ec || tls_watch_stopped) break;
            tls->reload_if_changed();
        }
    });
}

void add_server_options(config::schema& schema) {
    server_options d;
    schema.add("http_address", config::kind::string, config::value{d.address},
               "address the HTTP server listens on");
    schema.add({"http_port", config::kind::integer, config::value{std::int64_t{d.port}},
                "HTTP port (0: ephemeral)", 0, 65535});
    add_server_limits(schema);
    add_server_tls_options(schema);
}

void add_server_tls_options(config::schema& schema) {
    schema.add("tls_cert", config::kind::string, std::string(),
               "TLS certificate (PEM, then its intermediates) of the HTTP port; empty: plain "
               "HTTP. Reloaded on SIGHUP and when the file changes");
    schema.add("tls_key", config::kind::string, std::string(),
               "private key (PEM, unencrypted) of --tls-cert");
    schema.add("tls_client_ca", config::kind::string, std::string(),
               "CA certificates (PEM) that issue client certificates: set, every client must "
               "present one (mutual TLS)");
}

server_tls_options read_server_tls(const config::values& values) {
    server_tls_options tls;
    tls.certificate_file = values.get_string("tls_cert");
    tls.private_key_file = values.get_string("tls_key");
    tls.client_ca_file = values.get_string("tls_client_ca");
    return tls;
}

void add_server_limits(config::schema& schema) {
    server_options d;
    auto seconds = [](std::chrono::milliseconds ms) { return config::value{ms}; };
    schema.add({"http_max_connections", config::kind::integer,
                config::value{static_cast<std::int64_t>(d.max_connections)},
                "open connections beyond which new ones are answered 503", 1, 10'000'000});
    schema.add({"http_max_header_bytes", config::kind::integer,
                config::value{static_cast<std::int64_t>(d.max_header_bytes)},
                "largest request line + header fields (431 beyond)", 1024, 1 << 24});
    schema.add({"http_max_body_bytes", config::kind::integer,
                config::value{static_cast<std::int64_t>(d.max_body_bytes)},
                "default largest request body (413 beyond); routes may override", 0, 1LL << 34});
    schema.add({"http_max_connections_per_client", config::kind::integer,
                config::value{static_cast<std::int64_t>(d.max_connections_per_client)},
                "open connections from one client address beyond which new ones are answered "
                "429",
                1, 10'000'000});
    schema.add({"http_probe_connections", config::kind::integer,
                config::value{static_cast<std::int64_t>(d.probe_connections)},
                "connections over the limits still served for /healthz and /readyz", 0, 10'000});
    schema.add({"http_header_timeout", config::kind::duration, seconds(d.header_timeout),
                "time allowed for a request header to arrive", 0.001, 3600});
    schema.add({"http_body_timeout", config::kind::duration, seconds(d.body_timeout),
                "time allowed for a request body to arrive", 0.001, 3600});
    schema.add({"http_idle_timeout", config::kind::duration, seconds(d.idle_timeout),
                "how long an idle keep-alive connection is kept", 0.001, 86400});
    schema.add({"http_write_timeout", config::kind::duration, seconds(d.write_timeout),
                "time allowed for a response to be written", 0.001, 3600});
}

server_options server_options_from(const config::values& values) {
    server_options o;
    o.address = values.get_string("http_address");
    o.port = static_cast<std::uint16_t>(values.get_int("http_port"));
    read_server_limits(values, o);
    o.tls = read_server_tls(values);
    return o;
}

void read_server_limits(const config::values& values, server_options& o) {
    o.max_connections = static_cast<std::size_t>(values.get_int("http_max_connections"));
    o.max_connections_per_client =
        static_cast<std::size_t>(values.get_int("http_max_connections_per_client"));
    o.probe_connections = static_cast<std::size_t>(values.get_int("http_probe_connections"));
    o.max_header_bytes = static_cast<std::size_t>(values.get_int("http_max_header_bytes"));
    o.max_body_bytes = static_cast<std::size_t>(values.get_int("http_max_body_bytes"));
    o.header_timeout = values.get_duration("http_header_timeout");
    o.body_timeout = values.get_duration("http_body_timeout");
    o.idle_timeout = values.get_duration("http_idle_timeout");
    o.write_timeout = values.get_duration("http_write_timeout");
}

server::server(keel::service& service, const http::router& router, server_options options)
    : impl_(std::make_unique<impl>(service, router, std::move(options))) {
    if (!detail::is_clean_field_value(impl_->options.server_header))
        throw std::invalid_argument(
            "http::server_options::server_header contains a control character");
    if (impl_->options.tls.enabled())
        impl_->tls = std::make_unique<detail::tls_identity>(impl_->options.tls, impl_->log);
}

server::~server() = default;

void server::start() {
    if (impl_->started) throw std::logic_error("http::server::start called twice");
    impl_->bind();
    impl_->started = true;
    impl_->service.on_shutdown([impl = impl_.get()] { impl->begin_shutdown(); });
    for (std::size_t i = 0; i < impl_->threads.size(); ++i) {
        impl_->service.spawn(i, "http acceptor", detail::accept_loop(*impl_, i));
        impl_->service.spawn(i, "http deadlines", detail::sweep(*impl_, i));
    }
    impl_->watch_tls();
    impl_->log.info("listening on {}:{} ({}) with {} thread(s)", impl_->options.address,
                    impl_->port, impl_->tls ? "HTTPS" : "HTTP", impl_->threads.size());
}

bool server::reload_tls() {
    return impl_->tls && impl_->tls->reload("requested");
}

std::uint16_t server::port() const {
    return impl_->port;
}

const server_options& server::options() const {
    return impl_->options;
}

}  // namespace keel::http
