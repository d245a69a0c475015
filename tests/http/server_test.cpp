// The server over real loopback connections: round trips, keep-alive, pipelining, HEAD,
// 100-continue, 1,000 concurrent keep-alive connections, the connection limit, graceful
// shutdown with a request in flight, and readiness against a real Redis.

#include <gtest/gtest.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <future>
#include <keel/framework/redis/connection.hpp>
#include <keel/http/builtin.hpp>
#include <keel/http/testing.hpp>
#include <keel/test/redis_server.hpp>

#include "support.hpp"

namespace keel::http {
namespace {

using testing::raw_connection;
using testing::test_server;
using testing::test_server_options;

router echo_router() {
    router r;
    r.get("/echo/:word", [](request& req) -> asio::awaitable<response> {
        co_return response::json({{"word", req.param("word")}});
    });
    r.post("/sum", [](request& req) -> asio::awaitable<response> {
        auto numbers = req.json<std::vector<int>>();
        int sum = 0;
        for (int n : numbers) sum += n;
        co_return response::json({{"sum", sum}}, status::created);
    });
    r.get("/throw", [](request&) -> asio::awaitable<response> {
        throw std::logic_error("internal detail");
        co_return response();
    });
    return r;
}

std::string get_request(std::string_view target, std::string_view extra = "") {
    return "GET " + std::string(target) + " HTTP/1.1\r\nHost: t\r\n" + std::string(extra) + "\r\n";
}

TEST(server, serves_json_over_a_keep_alive_connection) {
    auto r = echo_router();
    metrics m;
    test_server server(r, {.server = {.metrics = &m}});
    auto client = server.client();
    auto res = client.get("/echo/ada");
    EXPECT_EQ(res.status, status::ok);
    EXPECT_EQ(res.json()["word"], "ada");
    EXPECT_EQ(res.header("Content-Type"), "application/json");
    EXPECT_EQ(res.header("Server"), "keel");
    EXPECT_TRUE(res.header("Date"));
    EXPECT_TRUE(res.keep_alive);
    auto sum = client.post_json("/sum", {1, 2, 3});
    EXPECT_EQ(sum.status, status::created);
    EXPECT_EQ(sum.json()["sum"], 6);
    EXPECT_EQ(client.get("/echo/again").status, status::ok);
    EXPECT_EQ(m.connections_open(), 1);
}

TEST(server, pipelined_requests_are_answered_in_order) {
    auto r = echo_router();
    test_server server(r);
    auto raw = server.raw();
    raw.send(get_request("/echo/one") + get_request("/nowhere") + get_request("/echo/three"));
    auto first = raw.read_response();
    auto second = raw.read_response();
    auto third = raw.read_response();
    ASSERT_TRUE(first && second && third);
    EXPECT_EQ(first->json()["word"], "one");
    EXPECT_EQ(second->status, status::not_found);
    EXPECT_EQ(third->json()["word"], "three");
}

TEST(server, head_has_the_length_but_no_body) {
    auto r = echo_router();
    test_server server(r);
    auto client = server.client();
    auto head = client.request(method::head, "/echo/abc");
    EXPECT_EQ(head.status, status::ok);
    EXPECT_EQ(head.body, "");
    EXPECT_EQ(head.header("Content-Length"), "14");  // {"word":"abc"}
    EXPECT_EQ(client.get("/echo/abc").body.size(), 14u);
}

TEST(server, answers_100_continue_before_reading_the_body) {
    auto r = echo_router();
    test_server server(r);
    auto raw = server.raw();
    raw.send(
        "POST /sum HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
        "Content-Length: 5\r\nExpect: 100-continue\r\n\r\n");
    auto interim = raw.read_response();
    ASSERT_TRUE(interim);
    EXPECT_EQ(interim->status, status::continue_);
    raw.send("[2,3]");
    auto res = raw.read_response();
    ASSERT_TRUE(res);
    EXPECT_EQ(res->json()["sum"], 5);
}

TEST(server, http_1_0_connection_closes_after_the_response) {
    auto r = echo_router();
    test_server server(r);
    auto raw = server.raw();
    raw.send("GET /echo/x HTTP/1.0\r\n\r\n");
    auto res = raw.read_response();
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, status::ok);
    EXPECT_TRUE(raw.wait_closed());
}

TEST(server, an_exception_without_error_middleware_is_a_bare_500_and_serving_continues) {
    auto r = echo_router();
    test_server server(r);
    auto client = server.client();
    auto res = client.get("/throw");
    EXPECT_EQ(res.status, status::internal_server_error);
    EXPECT_EQ(res.body.find("internal detail"), std::string::npos);
    EXPECT_EQ(client.get("/echo/after").status, status::ok);
}

TEST(server, serves_a_thousand_concurrent_keep_alive_connections) {
    auto r = echo_router();
    metrics m;
    test_server server(r, {.threads = 2, .server = {.metrics = &m}});
    std::vector<raw_connection> connections;
    connections.reserve(1000);
    for (int i = 0; i < 1000; ++i) connections.push_back(server.raw());
    for (int round = 0; round < 2; ++round) {
        // Every connection has a request outstanding before any response is read.
        for (std::size_t i = 0; i < connections.size(); ++i)
            connections[i].send(get_request("/echo/c" + std::to_string(i)));
        for (std::size_t i = 0; i < connections.size(); ++i) {
            auto res = connections[i].read_response();
            ASSERT_TRUE(res) << "connection " << i;
            ASSERT_EQ(res->status, status::ok);
            ASSERT_EQ(res->json()["word"], "c" + std::to_string(i));
            ASSERT_TRUE(res->keep_alive);
        }
    }
    EXPECT_EQ(m.connections_open(), 1000);
}

TEST(server, over_the_connection_limit_answers_503) {
    auto r = echo_router();
    test_server server(r, {.server = {.max_connections = 2, .probe_connections = 0}});
    auto a = server.raw();
    auto b = server.raw();
    for (auto* c : {&a, &b}) {
        c->send(get_request("/echo/x"));
        ASSERT_TRUE(c->read_response());
    }
    auto third = server.raw();
    auto refused = third.read_response();
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->status, status::service_unavailable);
    a.send(get_request("/echo/still"));
    EXPECT_EQ(a.read_response()->status, status::ok);
}

TEST(server, graceful_shutdown_finishes_in_flight_work_and_closes_idle_connections) {
    router r;
    std::promise<void> entered;
    asio::steady_timer* gate = nullptr;
    r.get("/fast", [](request&) -> asio::awaitable<response> { co_return response::text("fast"); });
    r.get("/slow", [&entered, &gate](request&) -> asio::awaitable<response> {
        asio::steady_timer timer(co_await asio::this_coro::executor,
                                 std::chrono::steady_clock::time_point::max());
        gate = &timer;
        entered.set_value();
        co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));  // until cancelled
        co_return response::text("finished");
    });
    metrics m;
    test_server server(r, {.server = {.metrics = &m}});

    auto idle = server.raw();
    idle.send(get_request("/fast"));
    ASSERT_TRUE(idle.read_response());

    std::optional<testing::test_response> slow;
    std::thread in_flight([&] { slow = server.client().get("/slow"); });
    entered.get_future().wait();
    EXPECT_EQ(m.requests_in_flight(), 1);
    EXPECT_EQ(m.connections_open(), 2);

    server.begin_stop();
    EXPECT_TRUE(idle.wait_closed());                 // idle keep-alive: closed
    EXPECT_THROW(server.raw(), std::runtime_error);  // no longer accepting
    asio::post(server.service().executor(0), [&gate] { gate->cancel(); });
    in_flight.join();
    ASSERT_TRUE(slow);
    EXPECT_EQ(slow->status, status::ok);
    EXPECT_EQ(slow->body, "finished");
    EXPECT_FALSE(slow->keep_alive);
    server.wait_stopped();
}

TEST(server, refuses_to_start_on_a_port_in_use_or_a_bad_address) {
    auto r = echo_router();
    test_server first(r);
    keel::service svc({.threads = 2, .handle_signals = false});
    http::server second(svc, r, {.address = "127.0.0.1", .port = first.port()});
    try {
        second.start();
        FAIL() << "expected std::system_error";
    } catch (const std::system_error& e) {
        EXPECT_NE(std::string(e.what()).find("127.0.0.1:" + std::to_string(first.port())),
                  std::string::npos)
            << e.what();
    }
    http::server bad(svc, r, {.address = "not-an-address"});
    EXPECT_THROW(bad.start(), std::system_error);
    EXPECT_THROW(http::server(svc, r, {.server_header = "keel\r\nSet-Cookie: x=1"}),
                 std::invalid_argument);
    EXPECT_EQ(first.client().get("/echo/still").status, status::ok);
}

TEST(server, options_come_from_configuration) {
    config::schema schema;
    add_server_options(schema);
    std::vector<std::string_view> args{"--http_port", "9001", "--http_idle_timeout", "5s"};
    auto values = config::load(schema, args, {{"KEEL_HTTP_MAX_BODY_BYTES", "2048"}});
    ASSERT_TRUE(values) << values.error().what();
    auto o = server_options_from(*values);
    EXPECT_EQ(o.port, 9001);
    EXPECT_EQ(o.idle_timeout, std::chrono::seconds(5));
    EXPECT_EQ(o.max_body_bytes, 2048u);
    EXPECT_EQ(o.header_timeout, server_options{}.header_timeout);
    EXPECT_EQ(o.address, "0.0.0.0");
    std::vector<std::string_view> bad{"--http_port", "70000"};
    EXPECT_FALSE(config::load(schema, bad, {}));
}

TEST(server, readiness_follows_redis) {
    keel::test::redis_server redis;
    asio::io_context io;
    auto connection = redis::connection::create(io.get_executor(), {.url = redis.url()});
    ASSERT_TRUE(connection);
    router r;
    metrics m;
    health h;
    h.add_check("redis", redis_check(*connection, std::chrono::milliseconds(500)));
    install_defaults(r, m, h);

    request up(method::get, "/readyz");
    auto ready = keel::test::run(io, r.handle(up));
    EXPECT_EQ(ready.status(), status::ok);
    EXPECT_EQ(nlohmann::json::parse(ready.body())["checks"]["redis"], "ok");

    redis.kill();
    request down(method::get, "/readyz");
    auto not_ready = keel::test::run(io, r.handle(down));
    EXPECT_EQ(not_ready.status(), status::service_unavailable);
    EXPECT_NE(nlohmann::json::parse(not_ready.body())["checks"]["redis"], "ok");
    connection->close();
}

}  // namespace
}  // namespace keel::http
