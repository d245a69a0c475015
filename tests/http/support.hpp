#pragma once

// Helpers shared by the HTTP tests.

#include <boost/asio/io_context.hpp>
#include <keel/http/router.hpp>
#include <keel/test/run.hpp>

namespace keel::http::test_support {

namespace asio = boost::asio;

// Handles one request through the router (no server) on a private io_context.
inline response handle(const router& r, request& req) {
    asio::io_context io;
    return keel::test::run(io, r.handle(req));
}

inline response handle(const router& r, method m, std::string target, headers h = {},
                       std::string body = {}) {
    request req(m, std::move(target), std::move(h), std::move(body));
    return handle(r, req);
}

// A handler answering with a fixed text.
inline handler text(std::string body) {
    return [body = std::move(body)](request&) -> asio::awaitable<response> {
        co_return response::text(body);
    };
}

}  // namespace keel::http::test_support
