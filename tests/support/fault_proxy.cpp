#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <deque>
#include <keel/test/fault_proxy.hpp>
#include <list>
#include <thread>

namespace keel::test {

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;
using steady = std::chrono::steady_clock;

namespace {

constexpr std::size_t chunk_size = 16 * 1024;
const auto with_ec = [](error_code& ec) { return asio::redirect_error(asio::use_awaitable, ec); };

enum class cut_kind { none, reset, close };

}  // namespace

// One proxied connection: the client's socket, the server's, and per direction a delay line
// (chunks with the time they may leave) that a reader fills and a writer drains.
struct connection_pair : std::enable_shared_from_this<connection_pair> {
    struct line {
        struct chunk {
            steady::time_point due;
            std::string bytes;
        };
        std::deque<chunk> chunks;
        std::size_t bytes = 0;
        bool eof = false;
        asio::steady_timer has_data, has_room;
        explicit line(asio::io_context& io) : has_data(io), has_room(io) {}
    };

    connection_pair(asio::io_context& io, tcp::socket from_client)
        : client(std::move(from_client)), server(io), up(io), down(io), forever(io) {
        forever.expires_at(steady::time_point::max());
    }

    tcp::socket client, server;
    line up, down;               // up: client -> server; down: server -> client
    asio::steady_timer forever;  // what a silent connection waits on
    bool silent = false;
    bool closed = false;
    cut_kind cut = cut_kind::none;
};

struct fault_proxy::impl {
    explicit impl(std::uint16_t upstream)
        : upstream_port(upstream),
          acceptor(std::make_unique<tcp::acceptor>(
              io, tcp::endpoint{asio::ip::make_address("127.0.0.1"), 0})) {}
    // The io_context goes first, while what its pending coroutines touch still exists.
    ~impl() {
        acceptor.reset();
        io_holder.reset();
    }

    std::unique_ptr<asio::io_context> io_holder = std::make_unique<asio::io_context>();
    asio::io_context& io = *io_holder;
    std::uint16_t upstream_port;
    std::unique_ptr<tcp::acceptor> acceptor;
    std::thread thread;
    std::list<std::weak_ptr<connection_pair>> pairs;  // on io's thread

    std::atomic<std::int64_t> latency_up_ms{0}, latency_down_ms{0};
    std::atomic<std::size_t> bandwidth{0};
    std::atomic<bool> stalled{false};
    std::atomic<std::uint64_t> accepted{0}, open{0}, up_bytes{0}, down_bytes{0}, cuts{0};
    std::atomic<std::uint64_t> buffered{0}, buffered_peak{0};

    // --- accepting ------------------------------------------------------------------------

    asio::awaitable<void> accept_loop() {
        for (;;) {
            error_code ec;
            tcp::socket s(io);
            co_await acceptor->async_accept(s, with_ec(ec));
            if (ec) co_return;
            ++accepted;
            forget_closed();
            if (pairs.size() >= max_connections) continue;  // closed at once: bounded
            auto p = std::make_shared<connection_pair>(io, std::move(s));
            pairs.push_back(p);
            ++open;
            asio::co_spawn(io, serve(p), asio::detached);
        }
    }

    void forget_closed() {
        pairs.remove_if([](const auto& w) { return w.expired(); });
    }

    asio::awaitable<void> serve(std::shared_ptr<connection_pair> p) {
        struct count_open {
            std::atomic<std::uint64_t>& n;
            ~count_open() { --n; }
        } counted{open};
        if (stalled) p->silent = true;
        if (p->silent) co_return co_await go_silent(p);
        error_code ec;
        co_await p->server.async_connect({asio::ip::make_address("127.0.0.1"), upstream_port},
                                         with_ec(ec));
        if (ec) co_return shut(*p, cut_kind::close);
        p->client.set_option(tcp::no_delay(true), ec);
        p->server.set_option(tcp::no_delay(true), ec);
        asio::co_spawn(io, read(p, p->client, p->up, direction::to_server), asio::detached);
        asio::co_spawn(io, read(p, p->server, p->down, direction::to_client), asio::detached);
        asio::co_spawn(io, write(p, p->up, p->server, direction::to_server), asio::detached);
        co_await write(p, p->down, p->client, direction::to_client);
    }

    // Keeps the pair (and its sockets, open) until the proxy ends; reads nothing.
    asio::awaitable<void> go_silent(std::shared_ptr<connection_pair> p) {
        p->silent = true;
        error_code ec;
        co_await p->forever.async_wait(with_ec(ec));
    }

    // --- forwarding -----------------------------------------------------------------------

    asio::awaitable<void> read(std::shared_ptr<connection_pair> p, tcp::socket& from,
                               connection_pair::line& to, direction d) {
        std::string buffer(chunk_size, '\0');
        for (;;) {
            while (to.bytes >= max_buffered_bytes && !p->closed) co_await wait(to.has_room);
            if (p->closed) co_return;
            if (p->silent) co_return co_await go_silent(p);
            error_code ec;
            auto n = co_await from.async_read_some(asio::buffer(buffer), with_ec(ec));
            if (p->silent) co_return co_await go_silent(p);  // what it read is never forwarded
            if (ec) {
                to.eof = true;
                to.has_data.cancel();
                co_return;
            }
            auto delay = d == direction::to_server ? latency_up_ms.load() : latency_down_ms.load();
            to.chunks.push_back(
                {steady::now() + std::chrono::milliseconds(delay), std::string(buffer.data(), n)});
            to.bytes += n;
            note_buffered(static_cast<std::int64_t>(n));
            to.has_data.cancel();
        }
    }

    asio::awaitable<void> write(std::shared_ptr<connection_pair> p, connection_pair::line& from,
                                tcp::socket& to, direction d) {
        for (;;) {
            while (from.chunks.empty() && !from.eof && !p->closed) co_await wait(from.has_data);
            if (p->closed) co_return;
            if (from.chunks.empty()) co_return shut(*p, cut_kind::close);  // its reader saw EOF
            if (auto due = from.chunks.front().due; due > steady::now()) {
                asio::steady_timer t(io, due);
                error_code ec;
                co_await t.async_wait(with_ec(ec));
            }
            if (p->silent) co_return co_await go_silent(p);
            if (p->closed) co_return;
            auto bytes = std::move(from.chunks.front().bytes);
            from.chunks.pop_front();
            from.bytes -= bytes.size();
            note_buffered(-static_cast<std::int64_t>(bytes.size()));
            from.has_room.cancel();
            if (d == direction::to_client && p->cut != cut_kind::none) {
                co_await send(p, to, std::string_view(bytes).substr(0, (bytes.size() + 1) / 2), d);
                ++cuts;
                co_return shut(*p, p->cut);
            }
            if (!co_await send(p, to, bytes, d)) co_return shut(*p, cut_kind::close);
        }
    }

    // Writes `bytes`, paced by the bandwidth limit. False when the socket failed.
    asio::awaitable<bool> send(std::shared_ptr<connection_pair> p, tcp::socket& to,
                               std::string_view bytes, direction d) {
        while (!bytes.empty()) {
            auto rate = bandwidth.load();
            auto slice =
                rate ? std::min(bytes.size(), std::max<std::size_t>(1, rate / 50)) : bytes.size();
            error_code ec;
            co_await asio::async_write(to, asio::buffer(bytes.data(), slice), with_ec(ec));
            if (ec || p->closed) co_return false;
            (d == direction::to_server ? up_bytes : down_bytes) += slice;
            bytes.remove_prefix(slice);
            if (rate) {
                asio::steady_timer t(io, std::chrono::microseconds(slice * 1'000'000 / rate));
                co_await t.async_wait(with_ec(ec));
            }
        }
        co_return true;
    }

    asio::awaitable<void> wait(asio::steady_timer& t) {
        error_code ec;
        t.expires_at(steady::time_point::max());
        co_await t.async_wait(with_ec(ec));
    }

    void note_buffered(std::int64_t delta) {
        auto now = buffered += static_cast<std::uint64_t>(delta);
        auto peak = buffered_peak.load();
        while (now > peak && !buffered_peak.compare_exchange_weak(peak, now)) {
        }
    }

    // Ends a pair: RST (SO_LINGER 0) or FIN towards the client, the server side closed.
    void shut(connection_pair& p, cut_kind how) {
        if (p.closed) return;
        p.closed = true;
        error_code ignored;
        if (how == cut_kind::reset)
            p.client.set_option(asio::socket_base::linger(true, 0), ignored);
        if (how == cut_kind::close) p.client.shutdown(tcp::socket::shutdown_both, ignored);
        p.client.close(ignored);
        p.server.close(ignored);
        for (auto* l : {&p.up, &p.down}) {
            note_buffered(-static_cast<std::int64_t>(l->bytes));
            l->bytes = 0;
            l->chunks.clear();
            l->has_data.cancel();
            l->has_room.cancel();
        }
    }

    // Runs `fn` on each open pair, on the proxy's thread.
    template <class Fn>
    void each_pair(Fn fn) {
        asio::post(io, [self = this, fn] {
            self->forget_closed();
            for (auto& w : self->pairs)
                if (auto p = w.lock(); p && !p->closed) fn(*self, *p);
        });
    }
};

fault_proxy::fault_proxy(std::uint16_t upstream_port)
    : impl_(std::make_shared<impl>(upstream_port)) {
    asio::co_spawn(impl_->io, impl_->accept_loop(), asio::detached);
    impl_->thread = std::thread([i = impl_.get()] { i->io.run(); });
}

fault_proxy::~fault_proxy() {
    impl_->io.stop();
    impl_->thread.join();
}

std::uint16_t fault_proxy::port() const {
    return impl_->acceptor->local_endpoint().port();
}

std::string fault_proxy::url() const {
    return "redis://127.0.0.1:" + std::to_string(port());
}

void fault_proxy::set_latency(direction d, std::chrono::milliseconds delay) {
    (d == direction::to_server ? impl_->latency_up_ms : impl_->latency_down_ms) = delay.count();
}

void fault_proxy::set_bandwidth(std::size_t bytes_per_second) {
    impl_->bandwidth = bytes_per_second;
}

void fault_proxy::stall() {
    impl_->stalled = true;
    impl_->each_pair([](impl&, connection_pair& p) { p.silent = true; });
}

void fault_proxy::reset_mid_reply() {
    impl_->each_pair([](impl&, connection_pair& p) { p.cut = cut_kind::reset; });
}

void fault_proxy::close_mid_reply() {
    impl_->each_pair([](impl&, connection_pair& p) { p.cut = cut_kind::close; });
}

void fault_proxy::reset_all() {
    impl_->each_pair([](impl& i, connection_pair& p) {
        if (!p.silent) i.shut(p, cut_kind::reset);
    });
}

void fault_proxy::heal() {
    impl_->stalled = false;
    impl_->latency_up_ms = 0;
    impl_->latency_down_ms = 0;
    impl_->bandwidth = 0;
}

fault_proxy_stats fault_proxy::stats() const {
    return {impl_->accepted.load(),   impl_->open.load(), impl_->up_bytes.load(),
            impl_->down_bytes.load(), impl_->cuts.load(), impl_->buffered_peak.load()};
}

}  // namespace keel::test
