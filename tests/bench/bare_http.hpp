#pragma once

// A bare Boost.Beast server for the benchmarks' baselines: Beast's awaitable server loop (its
// example's shape: a 30 s timeout per operation, keep-alive), with what each request gets
// answered left to the caller. keel_http_bench measures Keel's HTTP stack against it, and
// keel_http_floor (keel_orders_load's floor) answers keel-orders' requests with it.

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <chrono>
#include <concepts>

namespace keel::bench::bare {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using request = bhttp::request<bhttp::string_body>;
using response = bhttp::response<bhttp::string_body>;

// Fills in a response (200, the request's version, "Server: bare" already set).
template <class Answer>
concept answerer = std::invocable<Answer&, const request&, response&>;

template <answerer Answer>
asio::awaitable<void> session(beast::tcp_stream stream, Answer answer) {
    beast::flat_buffer buffer;
    for (;;) {
        request req;
        stream.expires_after(std::chrono::seconds(30));
        auto [ec, n] =
            co_await bhttp::async_read(stream, buffer, req, asio::as_tuple(asio::use_awaitable));
        if (ec) break;
        response res{bhttp::status::ok, req.version()};
        res.set(bhttp::field::server, "bare");
        answer(req, res);
        res.keep_alive(req.keep_alive());
        res.prepare_payload();
        auto [wec, wn] =
            co_await bhttp::async_write(stream, res, asio::as_tuple(asio::use_awaitable));
        if (wec || !res.keep_alive()) break;
    }
    beast::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
}

// Accepts until the acceptor is closed; a session per connection, on the acceptor's executor.
template <answerer Answer>
asio::awaitable<void> listen(tcp::acceptor& acceptor, Answer answer) {
    for (;;) {
        auto [ec, socket] = co_await acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
        if (ec) break;
        asio::co_spawn(acceptor.get_executor(),
                       session(beast::tcp_stream(std::move(socket)), answer), asio::detached);
    }
}

}  // namespace keel::bench::bare
