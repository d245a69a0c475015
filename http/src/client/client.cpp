// keel::http::client: a keep-alive pool per origin and service thread, one coroutine per
// call. The design, and why, is in docs/architecture.md ("The HTTP client").

#include <fmt/format.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <cerrno>
#include <deque>
#include <keel/framework/concurrency/combinators.hpp>
#include <keel/framework/json_text.hpp>
#include <keel/framework/log.hpp>
#include <keel/framework/prometheus.hpp>
#include <keel/framework/service.hpp>
#include <keel/http/client.hpp>
#include <keel/http/json.hpp>
#include <keel/http/problem.hpp>
#include <list>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

#include "response_reader.hpp"
#include "url.hpp"

namespace keel::http {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
using tcp = asio::ip::tcp;
using steady = std::chrono::steady_clock;
using error_code = boost::system::error_code;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
constexpr std::size_t read_chunk = 16 * 1024;
constexpr std::size_t max_origin_series = 256;  // beyond: origin="other"
constexpr std::size_t kind_count = 7;

std::string_view method_text(http::method m) {
    return to_string(m);
}

bool is_token_char(char c) {
    bool alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    return alnum || std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool is_token(std::string_view s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), is_token_char);
}

bool client_owned(std::string_view name) {
    for (std::string_view o : {"host", "content-length", "transfer-encoding", "connection",
                               "proxy-connection", "keep-alive", "upgrade", "te"})
        if (iequals(name, o)) return true;
    return false;
}

// The span an attempt is sent in: a child of the caller's, or the root of a new trace when
// spans are recorded and the caller gave none; none when the request sets `traceparent`.
std::optional<trace::span_context> attempt_span(const client_request& req, bool recording) {
    if (req.headers.contains("traceparent")) return std::nullopt;
    if (req.trace && req.trace->valid()) return trace::child_of(*req.trace);
    if (recording) return trace::new_root();
    return std::nullopt;
}

// The request's bytes: request line, fields, body. The framing fields are the client's.
// `attempt`: the span named in `traceparent`, if any.
std::string serialise(const client_request& req, const detail::url_parts& url,
                      const client_options& options, const trace::span_context* attempt) {
    std::string out;
    out.reserve(256 + req.body.size());
    out += method_text(req.method);
    out += ' ';
    out += url.target;
    out += " HTTP/1.1\r\nHost: ";
    out += url.host_field();
    out += "\r\n";
    if (!options.user_agent.empty() && !req.headers.contains("user-agent"))
        out += "User-Agent: " + options.user_agent + "\r\n";
    if (attempt) {
        out += "traceparent: " + attempt->traceparent() + "\r\n";
        if (!attempt->state.empty() && !req.headers.contains("tracestate"))
            out += "tracestate: " + attempt->state + "\r\n";
    }
    for (const auto& [name, value] : req.headers) {
        if (client_owned(name)) continue;
        out += name;
        out += ": ";
        out += value;
        out += "\r\n";
    }
    bool announces = !req.body.empty() || req.method == method::post || req.method == method::put ||
                     req.method == method::patch;
    if (announces) out += "Content-Length: " + std::to_string(req.body.size()) + "\r\n";
    out += "\r\n";
    out += req.body;
    return out;
}

// A caller's mistake is refused before anything is sent.
void validate(const client_request& req) {
    if (req.method == method::other || req.method == method::connect)
        throw std::invalid_argument("keel::http::client: the method cannot be sent (" +
                                    std::string(to_string(req.method)) + ")");
    for (const auto& [name, value] : req.headers) {
        if (!is_token(name))
            throw std::invalid_argument("keel::http::client: the header name '" + name +
                                        "' is not an HTTP token");
        for (char c : value) {
            auto u = static_cast<unsigned char>(c);
            if ((u < 0x20 && c != '\t') || u == 0x7f)
                throw std::invalid_argument("keel::http::client: the value of header '" + name +
                                            "' has a control character");
        }
    }
}

bool idempotent(http::method m) {
    return m == method::get || m == method::head || m == method::put || m == method::del ||
           m == method::options || m == method::trace;
}

bool is_redirect(int code) {
    return code == 301 || code == 302 || code == 303 || code == 307 || code == 308;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Public value types

std::string_view to_string(client_error_kind kind) {
    switch (kind) {
        case client_error_kind::connect:
            return "connect";
        case client_error_kind::dns:
            return "dns";
        case client_error_kind::tls:
            return "tls";
        case client_error_kind::timeout:
            return "timeout";
        case client_error_kind::too_large:
            return "too_large";
        case client_error_kind::protocol:
            return "protocol";
        case client_error_kind::cancelled:
            return "cancelled";
    }
    return "unknown";
}

client_request client_request::get(std::string url) {
    client_request r;
    r.url = std::move(url);
    return r;
}

client_request client_request::json(http::method m, std::string url, const nlohmann::json& body) {
    client_request r;
    r.method = m;
    r.url = std::move(url);
    r.headers.set("Content-Type", "application/json");
    r.body = dump_json(body, json_utf8_handler::replace);
    return r;
}

nlohmann::json client_response::json() const {
    try {
        return parse_json(body_);
    } catch (const problem_error& e) {
        auto type = header("Content-Type");
        throw client_json_error(fmt::format(
            "the response of {} (status {}, Content-Type {}) is not JSON: {}", url_, status_code(),
            type ? std::string(*type) : std::string("none"), e.problem().detail));
    }
}

std::string client_response::describe_json_mismatch(const std::exception& e) const {
    return fmt::format("the JSON response of {} (status {}) does not have the expected shape: {}",
                       url_, status_code(), e.what());
}

// ---------------------------------------------------------------------------------------
// Metrics: one series per origin, shared by the threads (relaxed atomics).

namespace {

struct origin_series {
    std::string origin;
    std::atomic<std::uint64_t> requests{0};
    std::atomic<std::uint64_t> opened{0};
    std::atomic<std::uint64_t> reused{0};
    std::array<std::atomic<std::uint64_t>, kind_count> errors{};
    std::array<std::atomic<std::uint64_t>, 5> classes{};  // 1xx .. 5xx
    prometheus::duration_histogram latency;

    std::uint64_t error_total() const {
        std::uint64_t n = 0;
        for (auto& e : errors) n += e.load(std::memory_order_relaxed);
        return n;
    }
};

class series_registry {
  public:
    origin_series& get(const std::string& origin) {
        {
            std::shared_lock lock(mutex_);
            if (auto it = index_.find(origin); it != index_.end()) return *it->second;
        }
        std::unique_lock lock(mutex_);
        if (auto it = index_.find(origin); it != index_.end()) return *it->second;
        std::string key = index_.size() >= max_origin_series ? "other" : origin;
        if (auto it = index_.find(key); it != index_.end()) return *it->second;
        auto& s = series_.emplace_back();
        s.origin = key;
        index_.emplace(key, &s);
        return s;
    }

    const origin_series* find(std::string_view origin) const {
        std::shared_lock lock(mutex_);
        auto it = index_.find(std::string(origin));
        return it == index_.end() ? nullptr : it->second;
    }

    template <class F>
    void each(F f) const {
        std::shared_lock lock(mutex_);
        for (const auto& s : series_) f(s);
    }

  private:
    mutable std::shared_mutex mutex_;
    std::deque<origin_series> series_;
    std::unordered_map<std::string, origin_series*> index_;
};

// ---------------------------------------------------------------------------------------
// Connections and pools

struct connection {
    connection(asio::io_context& io, ssl::context* tls) {
        if (tls)
            secure.emplace(io, *tls);
        else
            plain.emplace(io);
    }

    tcp::socket& socket() { return secure ? secure->next_layer() : *plain; }
    void close() {
        error_code ignored;
        socket().close(ignored);
    }

    asio::awaitable<std::tuple<error_code, std::size_t>> write(asio::const_buffer bytes) {
        if (secure) co_return co_await asio::async_write(*secure, bytes, use_tuple);
        co_return co_await asio::async_write(*plain, bytes, use_tuple);
    }
    asio::awaitable<std::tuple<error_code, std::size_t>> read_some(asio::mutable_buffer into) {
        if (secure) co_return co_await secure->async_read_some(into, use_tuple);
        co_return co_await plain->async_read_some(into, use_tuple);
    }

    // An idle connection the server closed, or that has bytes nobody asked for, is not
    // reused. A non-blocking peek asks the kernel without consuming anything.
    bool still_usable() {
        if (!socket().is_open()) return false;
        if (secure && SSL_pending(secure->native_handle()) > 0) return false;
        char byte;
        auto n = ::recv(socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n >= 0) return false;  // 0: closed by the server; > 0: unexpected bytes
        return errno == EAGAIN || errno == EWOULDBLOCK;
    }

    std::optional<tcp::socket> plain;
    std::optional<ssl::stream<tcp::socket>> secure;
    steady::time_point idle_since{};
};

// A request waiting for a connection of an origin at its cap. Woken (its timer cancelled)
// with a connection handed over, or with a slot to open one, or by an abort.
struct waiter {
    explicit waiter(asio::io_context& io) : wake(io, steady::time_point::max()) {}
    asio::steady_timer wake;
    std::unique_ptr<connection> handed;
    bool may_open = false;
    bool queued = false;
    std::list<waiter*>::iterator at;
};

struct origin_pool {
    std::string origin;
    origin_series* series = nullptr;
    std::vector<std::unique_ptr<connection>> idle;  // the most recently used last
    std::size_t open = 0;                           // idle, in use, or being opened
    std::list<waiter*> waiters;
};

// What a call's watchdog can end: the operation in progress is made to fail at once (its
// socket closed, its wait cancelled), and the reason recorded for the error.
struct call_state : std::enable_shared_from_this<call_state> {
    enum class why { none, timeout, connect_timeout, cancelled };

    explicit call_state(asio::io_context& io) : timer(io) {}

    void abort(why w) {
        if (reason != why::none) return;
        reason = w;
        if (conn) conn->close();
        if (wake) wake->cancel();
    }
    // Aborts with `w` at `at` (replacing the previous deadline).
    void arm(steady::time_point at, why w) {
        ++generation;
        timer.expires_at(at);
        timer.async_wait([self = shared_from_this(), g = generation, w](error_code ec) {
            if (!ec && g == self->generation) self->abort(w);
        });
    }
    void disarm() {
        ++generation;
        timer.cancel();
    }

    asio::steady_timer timer;
    std::uint64_t generation = 0;
    why reason = why::none;
    connection* conn = nullptr;          // in use by the call
    asio::steady_timer* wake = nullptr;  // the call's wait (for a connection, for DNS)
    std::string origin;
    std::chrono::milliseconds timeout{0};
    std::chrono::milliseconds connect_timeout{0};
};

}  // namespace

struct client::impl {
    impl(std::vector<asio::io_context*> contexts, client_options opts, keel::service* s)
        : options(std::move(opts)), tls(make_tls_context(options.tls)), service(s) {
        for (auto* io : contexts) threads.push_back(std::make_unique<thread_pool>(*io, *this));
        if (!options.tls.verify)
            log.warn(
                "TLS certificate verification is off for this client: any certificate is "
                "accepted, an attacker's too (tls_options::verify)");
        if (options.max_connections_per_origin == 0) options.max_connections_per_origin = 1;
    }

    static ssl::context make_tls_context(const tls_options& o) {
        ssl::context ctx(ssl::context::tls_client);
        ctx.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                        ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
        SSL_CTX_set_min_proto_version(ctx.native_handle(), TLS1_2_VERSION);
        error_code ec;
        if (o.verify) {
            if (o.ca_file.empty()) {
                ctx.set_default_verify_paths(ec);
                if (ec)
                    throw std::invalid_argument("keel::http::client: the system's CA store: " +
                                                ec.message());
            } else {
                ctx.load_verify_file(o.ca_file, ec);
                if (ec)
                    throw std::invalid_argument("keel::http::client: cannot load the CA file " +
                                                o.ca_file + ": " + ec.message());
            }
            ctx.set_verify_mode(ssl::verify_peer);
        } else {
            ctx.set_verify_mode(ssl::verify_none);
        }
        if (o.certificate_file.empty() != o.private_key_file.empty())
            throw std::invalid_argument(
                "keel::http::client: a client certificate needs both certificate_file and "
                "private_key_file");
        if (!o.certificate_file.empty()) {
            ctx.use_certificate_chain_file(o.certificate_file, ec);
            if (ec)
                throw std::invalid_argument("keel::http::client: cannot load the certificate " +
                                            o.certificate_file + ": " + ec.message());
            ctx.use_private_key_file(o.private_key_file, ssl::context::pem, ec);
            if (ec)
                throw std::invalid_argument("keel::http::client: cannot load the private key " +
                                            o.private_key_file + ": " + ec.message());
            if (SSL_CTX_check_private_key(ctx.native_handle()) != 1)
                throw std::invalid_argument(
                    "keel::http::client: the private key " + o.private_key_file +
                    " does not match the certificate " + o.certificate_file);
        }
        return ctx;
    }

    // The pool of one thread: touched only from that thread.
    struct thread_pool {
        thread_pool(asio::io_context& context, impl& o) : io(context), owner(o) {}

        origin_pool& pool_for(const detail::url_parts& url) {
            auto key = url.origin();
            auto& slot = origins[key];
            if (!slot) {
                slot = std::make_unique<origin_pool>();
                slot->origin = key;
                slot->series = &owner.series.get(key);
            }
            return *slot;
        }

        asio::awaitable<result> call(client_request req, detail::url_parts url);

        asio::io_context& io;
        impl& owner;
        std::unordered_map<std::string, std::unique_ptr<origin_pool>> origins;
    };

    thread_pool* pool_for(const asio::any_io_executor& ex) {
        const auto* io = ex.target<asio::io_context::executor_type>();
        if (!io) return nullptr;
        for (auto& t : threads)
            if (&t->io == &io->context()) return t.get();
        return nullptr;
    }

    asio::any_io_executor next_executor() {
        auto i = next.fetch_add(1, std::memory_order_relaxed) % threads.size();
        return threads[i]->io.get_executor();
    }

    // Where this client's spans go now, or null.
    trace::span_sink* span_sink() const {
        if (!options.record_spans) return nullptr;
        if (options.spans) return options.spans;
        return service ? service->span_sink() : nullptr;
    }

    client_options options;
    ssl::context tls;
    keel::service* service = nullptr;  // null: made on an io_context
    series_registry series;
    std::vector<std::unique_ptr<thread_pool>> threads;
    std::atomic<std::size_t> next{0};
    log::logger log{"http.client"};
};

namespace {

using thread_pool = client::impl::thread_pool;
using why = call_state::why;

client_error make_error(client_error_kind kind, std::string message) {
    return client_error{kind, std::move(message)};
}

// The error of a call that was aborted (timeout, cancel token) or whose task was cancelled;
// empty when neither happened.
std::optional<client_error> abort_error(const call_state& st, const asio::cancellation_state& cs) {
    switch (st.reason) {
        case why::timeout:
            return make_error(client_error_kind::timeout,
                              fmt::format("the request to {} timed out after {} ms", st.origin,
                                          st.timeout.count()));
        case why::connect_timeout:
            return make_error(client_error_kind::timeout,
                              fmt::format("connecting to {} timed out after {} ms", st.origin,
                                          st.connect_timeout.count()));
        case why::cancelled:
            return make_error(client_error_kind::cancelled,
                              "the request to " + st.origin + " was cancelled");
        case why::none:
            break;
    }
    if (cs.cancelled() != asio::cancellation_type::none)
        return make_error(client_error_kind::cancelled,
                          "the request to " + st.origin + " was cancelled");
    return std::nullopt;
}

bool is_tls_error(const error_code& ec) {
    return ec.category() == asio::error::get_ssl_category() ||
           ec.category() == ssl::error::get_stream_category();
}

// Why OpenSSL refused the handshake: the certificate check's reason when there is one
// ("certificate has expired", "hostname mismatch"), else the TLS error.
std::string tls_failure(ssl::stream<tcp::socket>& stream, const error_code& ec) {
    auto verify = SSL_get_verify_result(stream.native_handle());
    if (verify != X509_V_OK)
        return std::string("certificate verify failed: ") + X509_verify_cert_error_string(verify);
    return ec.message();
}

void discard(origin_pool& pool, std::unique_ptr<connection> c) {
    if (c) c->close();
    --pool.open;
    if (!pool.waiters.empty()) {  // the freed slot goes to the first waiter
        auto* w = pool.waiters.front();
        pool.waiters.pop_front();
        w->queued = false;
        w->may_open = true;
        ++pool.open;
        w->wake.cancel();
    }
}

void release(origin_pool& pool, std::unique_ptr<connection> c,
             std::chrono::milliseconds idle_timeout) {
    auto now = steady::now();
    c->idle_since = now;
    if (!pool.waiters.empty()) {
        auto* w = pool.waiters.front();
        pool.waiters.pop_front();
        w->queued = false;
        w->handed = std::move(c);
        w->wake.cancel();
        return;
    }
    pool.idle.push_back(std::move(c));
    // Connections idle too long are closed here rather than by a timer per connection.
    while (!pool.idle.empty() && now - pool.idle.front()->idle_since > idle_timeout) {
        pool.idle.front()->close();
        pool.idle.erase(pool.idle.begin());
        --pool.open;
    }
}

struct lease {
    std::unique_ptr<connection> conn;
    bool reused = false;
};

asio::awaitable<keel::expected<tcp::resolver::results_type, client_error>> resolve(
    asio::io_context& io, const detail::url_parts& url, call_state& st) {
    auto cs = co_await asio::this_coro::cancellation_state;
    if (url.host_is_ip()) {
        auto address = asio::ip::make_address(url.host);
        co_return tcp::resolver::results_type::create(tcp::endpoint(address, url.port), url.host,
                                                      std::to_string(url.port));
    }
    // The lookup runs apart from the call, which waits on a timer the lookup's completion,
    // the watchdog or a cancellation ends: getaddrinfo cannot be interrupted, the call can.
    struct lookup {
        explicit lookup(asio::io_context& io) : resolver(io), done(io, steady::time_point::max()) {}
        tcp::resolver resolver;
        asio::steady_timer done;
        error_code ec;
        tcp::resolver::results_type results;
        bool finished = false;
    };
    auto l = std::make_shared<lookup>(io);
    l->resolver.async_resolve(url.host, std::to_string(url.port),
                              [l](error_code ec, tcp::resolver::results_type results) {
                                  l->ec = ec;
                                  l->results = std::move(results);
                                  l->finished = true;
                                  l->done.cancel();
                              });
    st.wake = &l->done;
    co_await l->done.async_wait(use_tuple);
    st.wake = nullptr;
    if (!l->finished) {
        l->resolver.cancel();
        if (auto e = abort_error(st, cs)) co_return keel::unexpected(std::move(*e));
        co_return keel::unexpected(
            make_error(client_error_kind::dns, "resolving " + url.host + " was interrupted"));
    }
    if (l->ec) {
        if (auto e = abort_error(st, cs)) co_return keel::unexpected(std::move(*e));
        co_return keel::unexpected(make_error(
            client_error_kind::dns, "cannot resolve '" + url.host + "': " + l->ec.message()));
    }
    co_return std::move(l->results);
}

// Opens a connection (TCP, then TLS for https) within connect_timeout.
asio::awaitable<keel::expected<std::unique_ptr<connection>, client_error>> open_connection(
    thread_pool& tp, const detail::url_parts& url, call_state& st, steady::time_point deadline) {
    auto cs = co_await asio::this_coro::cancellation_state;
    const auto& options = tp.owner.options;
    auto connect_deadline = steady::now() + options.connect_timeout;
    if (connect_deadline < deadline) st.arm(connect_deadline, why::connect_timeout);

    auto endpoints = co_await resolve(tp.io, url, st);
    if (!endpoints) co_return keel::unexpected(std::move(endpoints.error()));
    if (auto e = abort_error(st, cs)) co_return keel::unexpected(std::move(*e));

    auto c = std::make_unique<connection>(tp.io, url.tls ? &tp.owner.tls : nullptr);
    st.conn = c.get();
    auto [ec, endpoint] = co_await asio::async_connect(c->socket(), *endpoints, use_tuple);
    if (ec) {
        st.conn = nullptr;
        if (auto e = abort_error(st, cs)) co_return keel::unexpected(std::move(*e));
        co_return keel::unexpected(make_error(
            client_error_kind::connect, "cannot connect to " + st.origin + ": " + ec.message()));
    }
    error_code ignored;
    c->socket().set_option(tcp::no_delay(true), ignored);

    if (c->secure) {
        SSL* handle = c->secure->native_handle();
        const bool ip = url.host_is_ip();
        if (!ip) SSL_set_tlsext_host_name(handle, url.host.c_str());  // SNI
        if (options.tls.verify) {
            X509_VERIFY_PARAM* param = SSL_get0_param(handle);
            X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
            int set = ip ? X509_VERIFY_PARAM_set1_ip_asc(param, url.host.c_str())
                         : X509_VERIFY_PARAM_set1_host(param, url.host.c_str(), url.host.size());
            if (set != 1) {
                st.conn = nullptr;
                co_return keel::unexpected(make_error(
                    client_error_kind::tls, "cannot check the certificate's name " + url.host));
            }
        }
        auto [hec] = co_await c->secure->async_handshake(ssl::stream_base::client, use_tuple);
        if (hec) {
            st.conn = nullptr;
            if (auto e = abort_error(st, cs)) co_return keel::unexpected(std::move(*e));
            co_return keel::unexpected(make_error(
                client_error_kind::tls,
                "TLS handshake with " + st.origin + " failed: " + tls_failure(*c->secure, hec)));
        }
    }
    st.conn = nullptr;
    if (connect_deadline < deadline) st.arm(deadline, why::timeout);
    co_return c;
}

// A connection of `pool` for one request: an idle one that is still usable, a new one
// while the pool is under its cap, or the first one freed after waiting.
asio::awaitable<keel::expected<lease, client_error>> acquire(thread_pool& tp, origin_pool& pool,
                                                             const detail::url_parts& url,
                                                             call_state& st,
                                                             steady::time_point deadline,
                                                             bool fresh) {
    auto cs = co_await asio::this_coro::cancellation_state;
    const auto cap = tp.owner.options.max_connections_per_origin;
    while (true) {
        if (auto e = abort_error(st, cs)) co_return keel::unexpected(std::move(*e));
        while (!fresh && !pool.idle.empty()) {
            auto c = std::move(pool.idle.back());
            pool.idle.pop_back();
            if (steady::now() - c->idle_since <= tp.owner.options.idle_timeout && c->still_usable())
                co_return lease{std::move(c), true};
            c->close();
            --pool.open;
        }
        bool may_open = pool.open < cap;
        if (may_open) {
            ++pool.open;
        } else {
            waiter w(tp.io);
            w.queued = true;
            w.at = pool.waiters.insert(pool.waiters.end(), &w);
            st.wake = &w.wake;
            co_await w.wake.async_wait(use_tuple);
            st.wake = nullptr;
            if (w.queued) pool.waiters.erase(w.at);
            auto e = abort_error(st, cs);
            if (w.handed) {
                if (!e) co_return lease{std::move(w.handed), true};
                release(pool, std::move(w.handed), tp.owner.options.idle_timeout);
            }
            if (w.may_open && e) discard(pool, nullptr);
            if (e) co_return keel::unexpected(std::move(*e));
            if (!w.may_open) continue;
        }
        auto c = co_await open_connection(tp, url, st, deadline);
        if (!c) {
            discard(pool, nullptr);
            co_return keel::unexpected(std::move(c.error()));
        }
        pool.series->opened.fetch_add(1, std::memory_order_relaxed);
        co_return lease{std::move(*c), false};
    }
}

struct exchange_result {
    client_response response;
    bool reused = false;
};

// One request and its response on a connection of `pool`; retried once on a new
// connection when a pooled one turns out closed before any of the request was sent, or
// (idempotent methods only) before any byte of the response came back.
asio::awaitable<keel::expected<exchange_result, client_error>> exchange(
    thread_pool& tp, origin_pool& pool, const detail::url_parts& url, const std::string& bytes,
    http::method m, call_state& st, steady::time_point deadline) {
    auto cs = co_await asio::this_coro::cancellation_state;
    const auto& options = tp.owner.options;
    for (int attempt = 0;; ++attempt) {
        auto got = co_await acquire(tp, pool, url, st, deadline, attempt > 0);
        if (!got) co_return keel::unexpected(std::move(got.error()));
        auto c = std::move(got->conn);
        const bool reused = got->reused;
        const bool may_retry = reused && attempt == 0;
        st.conn = c.get();

        auto [wec, written] = co_await c->write(asio::buffer(bytes));
        if (wec) {
            st.conn = nullptr;
            discard(pool, std::move(c));
            if (auto e = abort_error(st, cs)) co_return keel::unexpected(std::move(*e));
            if (may_retry && written == 0) continue;
            auto kind = is_tls_error(wec) ? client_error_kind::tls : client_error_kind::connect;
            co_return keel::unexpected(make_error(
                kind, "sending the request to " + st.origin + " failed: " + wec.message()));
        }
        if (reused) pool.series->reused.fetch_add(1, std::memory_order_relaxed);

        detail::response_reader reader({.max_header_bytes = options.max_header_bytes,
                                        .max_response_bytes = options.max_response_bytes},
                                       m == method::head);
        std::array<char, read_chunk> buffer;
        error_code rec;
        while (reader.current() == detail::response_reader::state::reading) {
            auto [ec, n] = co_await c->read_some(asio::buffer(buffer));
            if (n > 0) reader.feed(std::string_view(buffer.data(), n));
            if (reader.current() != detail::response_reader::state::reading) break;
            if (ec == asio::error::eof || ec == ssl::error::stream_truncated) {
                // A server that closed a pooled connection as the request went out answers
                // nothing; an idempotent request may be sent again.
                if (reader.received() == 0 && may_retry && idempotent(m)) {
                    rec = ec;
                    break;
                }
                reader.feed_eof();
                break;
            }
            if (ec) {
                rec = ec;
                break;
            }
        }
        st.conn = nullptr;
        if (reader.current() == detail::response_reader::state::done) {
            const bool keep = reader.keep_alive();
            exchange_result out{reader.take(url.text()), reused};
            if (keep)
                release(pool, std::move(c), options.idle_timeout);
            else
                discard(pool, std::move(c));
            co_return out;
        }
        discard(pool, std::move(c));
        if (auto e = abort_error(st, cs)) co_return keel::unexpected(std::move(*e));
        if (reader.current() == detail::response_reader::state::failed)
            co_return keel::unexpected(reader.error());
        const bool closed = rec == asio::error::eof || rec == ssl::error::stream_truncated ||
                            rec == asio::error::connection_reset;
        if (closed && reader.received() == 0 && may_retry && idempotent(m)) continue;
        if (is_tls_error(rec))
            co_return keel::unexpected(make_error(
                client_error_kind::tls, "TLS error from " + st.origin + ": " + rec.message()));
        co_return keel::unexpected(
            make_error(client_error_kind::protocol,
                       fmt::format("the connection to {} failed after {} bytes of the response: {}",
                                   st.origin, reader.received(), rec.message())));
    }
}

void observe(origin_series& s, const keel::expected<exchange_result, client_error>& r,
             std::chrono::nanoseconds elapsed) {
    s.requests.fetch_add(1, std::memory_order_relaxed);
    s.latency.observe(elapsed);
    if (r) {
        auto c = r->response.status_code() / 100;
        if (c >= 1 && c <= 5) s.classes[static_cast<std::size_t>(c - 1)].fetch_add(1);
    } else {
        s.errors[static_cast<std::size_t>(r.error().kind)].fetch_add(1, std::memory_order_relaxed);
    }
}

// The client span of one attempt, ended now.
trace::span client_span(http::method m, const detail::url_parts& url,
                        const trace::span_context& context,
                        std::chrono::system_clock::time_point start,
                        const keel::expected<exchange_result, client_error>& r) {
    trace::span s;
    s.context = context;
    s.what = trace::span::kind::client;
    s.start = start;
    s.end = std::chrono::system_clock::now();
    s.name = std::string(method_text(m)) + " " + url.host;
    auto& a = s.attributes;
    a.reserve(7);
    a.emplace_back("http.request.method", std::string(method_text(m)));
    a.emplace_back("server.address", url.host);
    a.emplace_back("server.port", std::int64_t{url.port});
    auto path = std::string_view(url.target).substr(0, url.target.find('?'));
    a.emplace_back(
        "url.full",
        std::string(url.tls ? "https://" : "http://").append(url.host_field()).append(path));
    if (r) {
        auto code = r->response.status_code();
        a.emplace_back("http.response.status_code", std::int64_t{code});
        if (code >= 400) {
            s.outcome = trace::span::status::error;
            a.emplace_back("error.type", std::to_string(code));
        }
    } else {
        s.outcome = trace::span::status::error;
        s.message = r.error().message;
        a.emplace_back("error.type", std::string(to_string(r.error().kind)));
    }
    return s;
}

// Keeps a call's watchdog from outliving the call.
struct disarm_at_exit {
    std::shared_ptr<call_state> st;
    ~disarm_at_exit() {
        st->conn = nullptr;
        st->wake = nullptr;
        st->disarm();
    }
};

}  // namespace

asio::awaitable<client::result> client::impl::thread_pool::call(client_request req,
                                                                detail::url_parts url) {
    const auto& options = owner.options;
    auto st = std::make_shared<call_state>(io);
    disarm_at_exit guard{st};
    st->origin = url.origin();
    st->timeout = req.timeout.value_or(options.request_timeout);
    st->connect_timeout = options.connect_timeout;
    const auto deadline = steady::now() + st->timeout;
    st->arm(deadline, why::timeout);
    std::optional<concurrency::cancel_registration> on_cancel;
    if (req.cancel.can_be_cancelled())
        on_cancel.emplace(req.cancel,
                          [s = st.get()](asio::cancellation_type) { s->abort(why::cancelled); });

    auto* spans = owner.span_sink();
    for (unsigned hops = 0;; ++hops) {
        st->origin = url.origin();
        auto& pool = pool_for(url);
        auto attempt = attempt_span(req, spans != nullptr);
        auto bytes = serialise(req, url, options, attempt ? &*attempt : nullptr);
        auto began =
            spans ? std::chrono::system_clock::now() : std::chrono::system_clock::time_point();
        auto started = steady::now();
        auto r = co_await exchange(*this, pool, url, bytes, req.method, *st, deadline);
        auto elapsed = steady::now() - started;
        observe(*pool.series, r, elapsed);
        if (spans && attempt && attempt->sampled && spans->admit())
            spans->record(client_span(req.method, url, *attempt, began, r));
        auto ms = std::chrono::duration<double, std::milli>(elapsed).count();
        if (!r) {
            owner.log.debug("{} {}{} failed after {:.1f} ms: {}: {}", method_text(req.method),
                            pool.origin, detail::loggable_target(url.target), ms,
                            to_string(r.error().kind), r.error().message);
            co_return keel::unexpected(std::move(r.error()));
        }
        owner.log.debug("{} {}{} {} {:.1f} ms{}", method_text(req.method), pool.origin,
                        detail::loggable_target(url.target), r->response.status_code(), ms,
                        r->reused ? " (pooled connection)" : "");
        auto code = r->response.status_code();
        auto location = r->response.header("Location");
        bool follow = options.max_redirects > 0 && is_redirect(code) && location &&
                      (req.method == method::get || req.method == method::head);
        if (!follow) co_return std::move(r->response);
        if (hops >= options.max_redirects)
            co_return keel::unexpected(make_error(
                client_error_kind::protocol,
                fmt::format("{} redirected more than {} times (max_redirects); the last to {}",
                            req.url, options.max_redirects, *location)));
        auto next = detail::resolve_location(url, *location);
        if (!next)
            co_return keel::unexpected(make_error(
                client_error_kind::protocol,
                "the redirect from " + url.text() + " has an unusable Location: " + next.error()));
        if (url.tls && !next->tls) {
            owner.log.warn("{} redirects to {}, from https to http: not followed", url.text(),
                           next->origin());
            co_return std::move(r->response);
        }
        if (next->origin() != url.origin()) {
            // Credentials meant for one origin are not handed to another.
            req.headers.remove("Authorization");
            req.headers.remove("Proxy-Authorization");
            req.headers.remove("Cookie");
        }
        url = std::move(*next);
    }
}

// ---------------------------------------------------------------------------------------
// client

namespace {
std::vector<asio::io_context*> contexts_of(keel::service& s) {
    std::vector<asio::io_context*> out;
    for (std::size_t i = 0; i < s.thread_count(); ++i) out.push_back(&s.context(i));
    return out;
}
}  // namespace

client::client(keel::service& service, client_options options)
    : impl_(std::make_unique<impl>(contexts_of(service), std::move(options), &service)) {}

client::client(asio::io_context& context, client_options options)
    : impl_(std::make_unique<impl>(std::vector<asio::io_context*>{&context}, std::move(options),
                                   nullptr)) {}

client::~client() = default;

const client_options& client::options() const {
    return impl_->options;
}

asio::awaitable<client::result> client::request(client_request req) {
    auto url = detail::parse_url(req.url);
    if (!url) throw std::invalid_argument("keel::http::client: " + req.url + ": " + url.error());
    validate(req);
    auto ex = co_await asio::this_coro::executor;
    auto* pool = impl_->pool_for(ex);
    if (!pool) {
        // A coroutine on a thread this client does not serve: the call runs on one it does.
        auto target = impl_->next_executor();
        auto work = request(std::move(req));
        co_return co_await concurrency::run_on(target, std::move(work));
    }
    // A cancelled task gets its cancellation as a value, like every other failure: Asio's
    // throw-on-cancel is off for the call, and restored for the caller.
    const bool checks = co_await asio::this_coro::throw_if_cancelled();
    co_await asio::this_coro::throw_if_cancelled(false);
    std::optional<result> out;
    std::exception_ptr error;
    try {
        out.emplace(co_await pool->call(std::move(req), std::move(*url)));
    } catch (...) {
        error = std::current_exception();
    }
    co_await asio::this_coro::throw_if_cancelled(checks);
    if (error) std::rethrow_exception(error);
    co_return std::move(*out);
}

asio::awaitable<client::result> client::get(std::string url) {
    auto req = client_request::get(std::move(url));
    co_return co_await request(std::move(req));
}

asio::awaitable<client::result> client::post_json(std::string url, nlohmann::json body) {
    auto req = client_request::json(method::post, std::move(url), body);
    co_return co_await request(std::move(req));
}

namespace {
client_stats stats_of(const origin_series& s) {
    client_stats out;
    out.requests = s.requests.load(std::memory_order_relaxed);
    out.errors = s.error_total();
    out.connections_opened = s.opened.load(std::memory_order_relaxed);
    out.connections_reused = s.reused.load(std::memory_order_relaxed);
    return out;
}
}  // namespace

client_stats client::stats(std::string_view origin) const {
    auto* s = impl_->series.find(origin);
    return s ? stats_of(*s) : client_stats{};
}

client_stats client::stats() const {
    client_stats total;
    impl_->series.each([&](const origin_series& s) {
        auto one = stats_of(s);
        total.requests += one.requests;
        total.errors += one.errors;
        total.connections_opened += one.connections_opened;
        total.connections_reused += one.connections_reused;
    });
    return total;
}

std::string client::render_metrics() const {
    std::string out;
    auto& series = impl_->series;
    auto label = [](const origin_series& s) {
        return "origin=\"" + prometheus::escape(s.origin) + "\"";
    };
    prometheus::header(out, "keel_http_client_requests_total", "counter",
                       "Requests the HTTP client sent, by origin (each redirect counts).");
    series.each([&](const origin_series& s) {
        out += fmt::format("keel_http_client_requests_total{{{}}} {}\n", label(s),
                           s.requests.load(std::memory_order_relaxed));
    });
    prometheus::header(out, "keel_http_client_responses_total", "counter",
                       "Responses the HTTP client received, by origin and status class.");
    series.each([&](const origin_series& s) {
        for (std::size_t i = 0; i < s.classes.size(); ++i)
            if (auto n = s.classes[i].load(std::memory_order_relaxed))
                out += fmt::format("keel_http_client_responses_total{{{},class=\"{}xx\"}} {}\n",
                                   label(s), i + 1, n);
    });
    prometheus::header(out, "keel_http_client_errors_total", "counter",
                       "Requests of the HTTP client that failed, by origin and kind.");
    series.each([&](const origin_series& s) {
        for (std::size_t i = 0; i < s.errors.size(); ++i)
            if (auto n = s.errors[i].load(std::memory_order_relaxed))
                out += fmt::format("keel_http_client_errors_total{{{},kind=\"{}\"}} {}\n", label(s),
                                   to_string(static_cast<client_error_kind>(i)), n);
    });
    prometheus::header(out, "keel_http_client_request_duration_seconds", "histogram",
                       "Time from sending a request to its response or error, by origin.");
    series.each([&](const origin_series& s) {
        s.latency.render(out, "keel_http_client_request_duration_seconds", label(s));
    });
    prometheus::header(out, "keel_http_client_connections_opened_total", "counter",
                       "Connections the HTTP client opened, by origin.");
    series.each([&](const origin_series& s) {
        out += fmt::format("keel_http_client_connections_opened_total{{{}}} {}\n", label(s),
                           s.opened.load(std::memory_order_relaxed));
    });
    prometheus::header(out, "keel_http_client_connections_reused_total", "counter",
                       "Requests the HTTP client sent on a pooled connection, by origin.");
    series.each([&](const origin_series& s) {
        out += fmt::format("keel_http_client_connections_reused_total{{{}}} {}\n", label(s),
                           s.reused.load(std::memory_order_relaxed));
    });
    return out;
}

std::function<asio::awaitable<std::string>()> client_metrics(const client& c) {
    return [c = &c]() -> asio::awaitable<std::string> { co_return c->render_metrics(); };
}

}  // namespace keel::http
