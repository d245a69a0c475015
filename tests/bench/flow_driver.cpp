#include "flow_driver.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

namespace keel::bench {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;

std::optional<driver_mode> parse_driver_mode(std::string_view text) {
    if (text == "threads") return driver_mode::threads;
    if (text == "loop") return driver_mode::loop;
    return std::nullopt;
}

std::string_view to_string(driver_mode mode) {
    return mode == driver_mode::threads ? "threads" : "loop";
}

struct http_connection::impl {
    impl(asio::any_io_executor ex, std::uint16_t p, std::chrono::milliseconds t)
        : stream(std::move(ex)), port(p), timeout(t) {}

    asio::awaitable<http_reply> request(bhttp::verb verb, std::string target, std::string body) {
        bhttp::request<bhttp::string_body> req{verb, target, 11};
        req.set(bhttp::field::host, "127.0.0.1");
        if (verb == bhttp::verb::post) {
            req.set(bhttp::field::content_type, "application/json");
            req.body() = std::move(body);
            req.prepare_payload();
        }
        bool reused = open;
        if (!open) co_await connect();
        auto reply = co_await exchange(req);
        if (!reply && reused) {  // closed by the server while idle: once on a new connection
            co_await connect();
            reply = co_await exchange(req);
        }
        if (!reply) throw std::runtime_error("the server closed the connection without a response");
        co_return std::move(*reply);
    }

    asio::awaitable<void> connect() {
        beast::error_code ignored;
        stream.socket().close(ignored);
        buffer.clear();
        stream.expires_after(timeout);
        try {
            co_await stream.async_connect(
                tcp::endpoint(asio::ip::make_address_v4("127.0.0.1"), port), asio::use_awaitable);
        } catch (const boost::system::system_error& e) {
            throw std::runtime_error("cannot connect to 127.0.0.1:" + std::to_string(port) + ": " +
                                     e.code().message());
        }
        open = true;
    }

    // One request and its response; empty when the connection was found closed before the
    // response began.
    asio::awaitable<std::optional<http_reply>> exchange(
        const bhttp::request<bhttp::string_body>& req) {
        beast::error_code ec;
        stream.expires_after(timeout);
        co_await bhttp::async_write(stream, req, asio::redirect_error(asio::use_awaitable, ec));
        bhttp::response_parser<bhttp::string_body> parser;
        parser.body_limit(boost::none);
        if (!ec)
            co_await bhttp::async_read(stream, buffer, parser,
                                       asio::redirect_error(asio::use_awaitable, ec));
        if (ec == bhttp::error::end_of_stream || ec == asio::error::connection_reset ||
            ec == asio::error::broken_pipe) {
            open = false;
            co_return std::nullopt;
        }
        if (ec) {
            open = false;
            throw std::runtime_error("request " + std::string(req.target()) +
                                     " failed: " + ec.message());
        }
        auto& msg = parser.get();
        if (!msg.keep_alive()) {
            beast::error_code ignored;
            stream.socket().close(ignored);
            open = false;
        }
        co_return http_reply{static_cast<keel::http::status>(msg.result_int()),
                             std::move(msg.body())};
    }

    beast::tcp_stream stream;
    std::uint16_t port;
    std::chrono::milliseconds timeout;
    beast::flat_buffer buffer;
    bool open = false;
};

http_connection::http_connection(asio::any_io_executor ex, std::uint16_t port,
                                 std::chrono::milliseconds timeout)
    : impl_(std::make_unique<impl>(std::move(ex), port, timeout)) {}
http_connection::~http_connection() = default;
http_connection::http_connection(http_connection&&) noexcept = default;
http_connection& http_connection::operator=(http_connection&&) noexcept = default;

asio::awaitable<http_reply> http_connection::get(std::string target) {
    return impl_->request(bhttp::verb::get, std::move(target), {});
}

asio::awaitable<http_reply> http_connection::post_json(std::string target,
                                                       const nlohmann::json& body) {
    return impl_->request(bhttp::verb::post, std::move(target), body.dump());
}

asio::awaitable<void> sleep_until(std::chrono::steady_clock::time_point when) {
    asio::steady_timer timer(co_await asio::this_coro::executor, when);
    co_await timer.async_wait(asio::use_awaitable);
}

asio::awaitable<void> sleep_for(std::chrono::steady_clock::duration how_long) {
    return sleep_until(std::chrono::steady_clock::now() + how_long);
}

void run_clients(driver_mode mode, int clients, const client_body& client) {
    std::exception_ptr failure;
    std::mutex failure_mutex;
    auto spawn = [&](asio::io_context& io, int i) {
        asio::co_spawn(io, client(io.get_executor(), i), [&](std::exception_ptr e) {
            std::lock_guard lock(failure_mutex);
            if (e && !failure) failure = e;
        });
    };
    if (mode == driver_mode::loop) {
        asio::io_context io(1);
        for (int i = 0; i < clients; ++i) spawn(io, i);
        io.run();
    } else {
        std::vector<std::thread> threads;
        for (int i = 0; i < clients; ++i)
            threads.emplace_back([&, i] {
                asio::io_context io(1);
                spawn(io, i);
                io.run();
            });
        for (auto& t : threads) t.join();
    }
    if (failure) std::rethrow_exception(failure);
}

}  // namespace keel::bench
