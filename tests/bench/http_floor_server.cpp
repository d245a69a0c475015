// keel_http_floor: what keel-orders' three requests per flow cost by themselves, for
// keel_orders_load's floor. A bare Boost.Beast server (bare_http.hpp: Beast's awaitable
// server loop, one thread, keep-alive) that answers the flow's requests as keel-orders
// does, without doing anything durable: it reads each request, parses its JSON body, and
// writes a response of the same status, headers and JSON shape as keel-orders':
//
//   POST /orders               201 {"order": id, "process": "order/<id>/fulfillment"}, Location
//   POST /webhooks/payment     200 {"received": true, "delivered": 1, "duplicate": false}
//   POST /webhooks/delivered   200 the same
//   GET  /readyz               200 (the harness waits for it)
//
// Anything else is 404; a body that is not JSON, 400. It takes keel-orders' command line
// (service_process passes --port, --redis, --threads, --log-level) and uses only --port:
// the floor is the cheapest way to serve these requests, one thread on one io_context.
// SIGTERM or SIGINT stop it with exit status 0.

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "bare_http.hpp"

namespace {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using json = nlohmann::json;
using keel::bench::bare::request;
using keel::bench::bare::response;

void answer_json(response& res, bhttp::status status, const json& body) {
    res.result(status);
    res.set(bhttp::field::content_type, "application/json");
    res.body() = body.dump();
}

void answer(const request& req, response& res) {
    auto target = std::string_view(req.target());
    if (req.method() == bhttp::verb::get && target == "/readyz") {
        res.body() = "ready";
        return;
    }
    bool known =
        req.method() == bhttp::verb::post &&
        (target == "/orders" || target == "/webhooks/payment" || target == "/webhooks/delivered");
    if (!known) {
        res.result(bhttp::status::not_found);
        return;
    }
    auto body = json::parse(req.body(), nullptr, false);
    if (body.is_discarded() || !body.is_object()) {
        res.result(bhttp::status::bad_request);
        return;
    }
    if (target == "/orders") {
        auto id = body.value("id", std::string());
        answer_json(res, bhttp::status::created,
                    {{"order", id}, {"process", "order/" + id + "/fulfillment"}});
        res.set(bhttp::field::location, "/orders/" + id);
    } else {
        answer_json(res, bhttp::status::ok,
                    {{"received", true}, {"delivered", 1}, {"duplicate", false}});
    }
}

}  // namespace

int main(int argc, char** argv) {
    int port = -1;
    for (int i = 1; i + 1 < argc; i += 2)
        if (std::string_view(argv[i]) == "--port") port = std::atoi(argv[i + 1]);
    if (port < 0 || port > 65535) {
        std::fprintf(stderr, "usage: keel_http_floor --port PORT [ignored flag value]...\n");
        return 2;
    }
    asio::io_context io(1);
    tcp::acceptor acceptor(
        io, {asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)});
    asio::signal_set stop(io, SIGTERM, SIGINT);
    stop.async_wait([&](auto, int) { io.stop(); });
    asio::co_spawn(io, keel::bench::bare::listen(acceptor, answer), asio::detached);
    io.run();
    return 0;
}
