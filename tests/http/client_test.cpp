// keel::http::client against keel's own server, scripted TCP peers (silent, slow, hostile)
// and TLS servers with certificates made at run time.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <keel/framework/concurrency/combinators.hpp>
#include <keel/http/client.hpp>
#include <keel/http/router.hpp>
#include <keel/http/testing.hpp>
#include <keel/test/run.hpp>
#include <thread>

#include "tls_support.hpp"

namespace keel::http::client_test {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;
using result = client::result;

std::string local(std::uint16_t port, std::string_view path = "/hello") {
    return "http://127.0.0.1:" + std::to_string(port) + std::string(path);
}

std::string origin_of(std::uint16_t port, bool tls = false) {
    return std::string(tls ? "https" : "http") + "://127.0.0.1:" + std::to_string(port);
}

result fetch(asio::io_context& io, client& c, client_request req) {
    return keel::test::run(io, c.request(std::move(req)));
}

result fetch(asio::io_context& io, client& c, std::string url) {
    return fetch(io, c, client_request::get(std::move(url)));
}

// A router with what the plain-HTTP cases need, and a count of concurrent /slow requests.
struct keel_backend {
    keel_backend() {
        router.get("/hello", [](request&) -> asio::awaitable<response> {
            co_return response::text("hello").header("X-Test", "yes");
        });
        router.post("/echo", [](request& req) -> asio::awaitable<response> {
            nlohmann::json body = {
                {"content_type", std::string(req.header("Content-Type").value_or(""))},
                {"body", req.json<nlohmann::json>()}};
            co_return response::json(body);
        });
        router.get("/text", [](request&) -> asio::awaitable<response> {
            co_return response::text("<html>not json</html>", status::ok, "text/html");
        });
        router.get("/slow", [this](request&) -> asio::awaitable<response> {
            int now = ++in_flight;
            int seen = max_in_flight.load();
            while (now > seen && !max_in_flight.compare_exchange_weak(seen, now)) {
            }
            asio::steady_timer t(co_await asio::this_coro::executor, 150ms);
            co_await t.async_wait(asio::use_awaitable);
            --in_flight;
            co_return response::text("slow");
        });
        router.get("/redirect", [](request&) -> asio::awaitable<response> {
            co_return response(status::found).header("Location", "/hello");
        });
        router.get("/loop", [](request&) -> asio::awaitable<response> {
            co_return response(status::found).header("Location", "/loop");
        });
        router.post("/redirect", [](request&) -> asio::awaitable<response> {
            co_return response(status::see_other).header("Location", "/hello");
        });
        router.get("/trace", [](request& req) -> asio::awaitable<response> {
            co_return response::json(
                {{"traceparent", std::string(req.header("traceparent").value_or(""))},
                 {"tracestate", std::string(req.header("tracestate").value_or(""))}});
        });
    }
    http::router router;
    std::atomic<int> in_flight{0};
    std::atomic<int> max_in_flight{0};
};

// ---------------------------------------------------------------------------------------
// Plain HTTP against keel's server

TEST(http_client, gets_from_a_keel_server) {
    keel_backend backend;
    testing::test_server server(backend.router);
    asio::io_context io;
    client c(io);
    auto r = fetch(io, c, local(server.port()));
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->status(), status::ok);
    EXPECT_EQ(r->body(), "hello");
    EXPECT_EQ(r->header("X-Test"), "yes");
    EXPECT_EQ(r->url(), origin_of(server.port()) + "/hello");
    auto s = c.stats(origin_of(server.port()));
    EXPECT_EQ(s.requests, 1u);
    EXPECT_EQ(s.connections_opened, 1u);
    EXPECT_EQ(s.errors, 0u);
}

TEST(http_client, a_request_made_in_a_span_sends_a_child_of_it) {
    keel_backend backend;
    testing::test_server server(backend.router);
    asio::io_context io;
    client c(io);
    auto span = *trace::parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                                          "congo=t61rcWkgMzE");
    auto r = fetch(io, c, client_request::get(origin_of(server.port()) + "/trace").in(span));
    ASSERT_TRUE(r) << r.error().message;
    auto got = r->json();
    auto sent = trace::parse_traceparent(got["traceparent"].get<std::string>());
    ASSERT_TRUE(sent) << got.dump();
    EXPECT_EQ(sent->trace, span.trace);
    EXPECT_NE(sent->span, span.span);  // the attempt's own span
    EXPECT_EQ(got["tracestate"], "congo=t61rcWkgMzE");

    // Fields the caller set itself are sent as they are; no span, no fields.
    auto own = client_request::get(origin_of(server.port()) + "/trace").in(span);
    own.header("traceparent", "00-11111111111111111111111111111111-2222222222222222-01");
    auto r2 = fetch(io, c, own);
    ASSERT_TRUE(r2) << r2.error().message;
    EXPECT_EQ(r2->json()["traceparent"], "00-11111111111111111111111111111111-2222222222222222-01");
    auto r3 = fetch(io, c, client_request::get(origin_of(server.port()) + "/trace"));
    ASSERT_TRUE(r3) << r3.error().message;
    EXPECT_EQ(r3->json()["traceparent"], "");
}

TEST(http_client, sequential_requests_reuse_one_connection) {
    keel_backend backend;
    testing::test_server server(backend.router);
    asio::io_context io;
    client c(io);
    for (int i = 0; i < 5; ++i) {
        auto r = fetch(io, c, local(server.port()));
        ASSERT_TRUE(r) << r.error().message;
        EXPECT_EQ(r->body(), "hello");
    }
    auto s = c.stats(origin_of(server.port()));
    EXPECT_EQ(s.requests, 5u);
    EXPECT_EQ(s.connections_opened, 1u);
    EXPECT_EQ(s.connections_reused, 4u);
}

TEST(http_client, concurrent_requests_stay_within_the_cap_per_origin) {
    keel_backend backend;
    testing::test_server server(backend.router);
    asio::io_context io;
    client_options options;
    options.max_connections_per_origin = 2;
    client c(io, options);
    std::atomic<int> ok{0};
    keel::test::run_concurrently(io, 6, [&](int) {
        return [&]() -> asio::awaitable<void> {
            auto r = co_await c.get(local(server.port(), "/slow"));
            if (r && r->body() == "slow") ++ok;
        };
    });
    EXPECT_EQ(ok.load(), 6);
    EXPECT_EQ(backend.max_in_flight.load(), 2);  // the server never saw more than the cap
    auto s = c.stats(origin_of(server.port()));
    EXPECT_EQ(s.connections_opened, 2u);
    EXPECT_EQ(s.connections_reused, 4u);
}

TEST(http_client, waiting_for_a_connection_is_bounded_by_the_request_timeout) {
    keel_backend backend;
    testing::test_server server(backend.router);
    asio::io_context io;
    client_options options;
    options.max_connections_per_origin = 1;
    client c(io, options);
    std::optional<result> first, second;
    keel::test::run_concurrently(io, 2, [&](int i) {
        return [&, i]() -> asio::awaitable<void> {
            auto req = client_request::get(local(server.port(), "/slow"));
            if (i == 1) req.timeout = 50ms;  // queued behind the first, which takes 150 ms
            auto r = co_await c.request(std::move(req));
            (i == 0 ? first : second).emplace(std::move(r));
        };
    });
    ASSERT_TRUE(first && *first);
    ASSERT_TRUE(second && !*second);
    EXPECT_EQ(second->error().kind, client_error_kind::timeout);
    EXPECT_EQ(c.stats(origin_of(server.port())).connections_opened, 1u);
}

TEST(http_client, sends_and_reads_json) {
    keel_backend backend;
    testing::test_server server(backend.router);
    asio::io_context io;
    client c(io);
    nlohmann::json body = {{"amount", 42.5}, {"sku", "x-1"}};
    auto r = keel::test::run(io, c.post_json(local(server.port(), "/echo"), body));
    ASSERT_TRUE(r) << r.error().message;
    ASSERT_EQ(r->status(), status::ok);
    auto j = r->json();
    EXPECT_EQ(j["content_type"], "application/json");
    EXPECT_EQ(j["body"], body);

    auto text = fetch(io, c, local(server.port(), "/text"));
    ASSERT_TRUE(text);
    try {
        (void)text->json();
        FAIL() << "a text/html body parsed as JSON";
    } catch (const client_json_error& e) {
        std::string what = e.what();
        EXPECT_NE(what.find("is not JSON"), std::string::npos) << what;
        EXPECT_NE(what.find("text/html"), std::string::npos) << what;
        EXPECT_NE(what.find("/text"), std::string::npos) << what;
    }
}

TEST(http_client, redirects_are_off_by_default_and_bounded_when_on) {
    keel_backend backend;
    testing::test_server server(backend.router);
    asio::io_context io;
    client plain(io);
    auto r = fetch(io, plain, local(server.port(), "/redirect"));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status(), status::found);

    client_options options;
    options.max_redirects = 3;
    client following(io, options);
    r = fetch(io, following, local(server.port(), "/redirect"));
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->body(), "hello");
    EXPECT_EQ(r->url(), origin_of(server.port()) + "/hello");

    r = fetch(io, following, local(server.port(), "/loop"));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().kind, client_error_kind::protocol);
    EXPECT_NE(r.error().message.find("more than 3"), std::string::npos) << r.error().message;

    // Only GET and HEAD follow: a POST gets its 303 back.
    auto post = client_request::json(method::post, local(server.port(), "/redirect"),
                                     nlohmann::json::object());
    r = fetch(io, following, std::move(post));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status(), status::see_other);
}

TEST(http_client, metrics_count_requests_errors_and_latency_per_origin) {
    keel_backend backend;
    testing::test_server server(backend.router);
    scripted_server closing([](tcp::socket& s, int) { s.close(); });
    asio::io_context io;
    client c(io);
    ASSERT_TRUE(fetch(io, c, local(server.port())));
    ASSERT_TRUE(fetch(io, c, local(server.port())));
    auto failed = fetch(io, c, local(closing.port()));
    ASSERT_FALSE(failed);
    auto text = keel::test::run(io, client_metrics(c)());
    auto origin = "origin=\"" + origin_of(server.port()) + "\"";
    auto other = "origin=\"" + origin_of(closing.port()) + "\"";
    EXPECT_NE(text.find("keel_http_client_requests_total{" + origin + "} 2\n"), std::string::npos)
        << text;
    EXPECT_NE(text.find("keel_http_client_responses_total{" + origin + ",class=\"2xx\"} 2\n"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("keel_http_client_request_duration_seconds_count{" + origin + "} 2\n"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("keel_http_client_connections_opened_total{" + origin + "} 1\n"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("keel_http_client_connections_reused_total{" + origin + "} 1\n"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("keel_http_client_errors_total{" + other + ",kind=\"protocol\"} 1\n"),
              std::string::npos)
        << text;
}

TEST(http_client, runs_on_a_service_threads_and_moves_foreign_callers_onto_them) {
    keel_backend backend;
    testing::test_server_options server_options;
    server_options.threads = 2;
    testing::test_server server(backend.router, server_options);
    client c(server.service());
    // From a thread the client does not serve: the call runs on a service thread.
    asio::io_context io;
    auto r = fetch(io, c, local(server.port()));
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->body(), "hello");
    // From each service thread: each thread has its own pool.
    std::atomic<int> ok{0};
    for (std::size_t t = 0; t < 2; ++t)
        server.service().spawn(t, "client call", [&]() -> asio::awaitable<void> {
            auto res = co_await c.get(local(server.port()));
            if (res && res->body() == "hello") ++ok;
        });
    auto until = steady::now() + 10s;
    while (ok.load() < 2 && steady::now() < until) std::this_thread::sleep_for(5ms);
    EXPECT_EQ(ok.load(), 2);
    EXPECT_EQ(c.stats(origin_of(server.port())).requests, 3u);
}

// ---------------------------------------------------------------------------------------
// Failures: each of its kind, with a message that says why

TEST(http_client, connection_refused_is_connect) {
    std::uint16_t port;
    {
        asio::io_context probe;
        tcp::acceptor a(probe, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
        port = a.local_endpoint().port();
    }  // closed: nothing listens there now
    asio::io_context io;
    client c(io);
    auto r = fetch(io, c, local(port));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().kind, client_error_kind::connect);
    EXPECT_NE(r.error().message.find("refused"), std::string::npos) << r.error().message;
}

TEST(http_client, unknown_host_is_dns) {
    asio::io_context io;
    client c(io);
    auto r = fetch(io, c, "http://no-such-host.invalid/x");
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().kind, client_error_kind::dns);
    EXPECT_NE(r.error().message.find("no-such-host.invalid"), std::string::npos)
        << r.error().message;
}

TEST(http_client, a_silent_server_times_out_within_the_bound) {
    scripted_server silent([](tcp::socket& s, int) {
        std::string buffer;
        read_request(s, buffer);
        char byte;
        boost::system::error_code ec;
        s.read_some(asio::buffer(&byte, 1), ec);  // until the client gives up
    });
    asio::io_context io;
    client c(io);
    auto req = client_request::get(local(silent.port()));
    req.timeout = 300ms;
    auto start = steady::now();
    auto r = fetch(io, c, std::move(req));
    auto took = steady::now() - start;
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().kind, client_error_kind::timeout);
    EXPECT_NE(r.error().message.find("300 ms"), std::string::npos) << r.error().message;
    EXPECT_GE(took, 290ms);
    EXPECT_LT(took, 2s);
}

TEST(http_client, a_response_over_the_limit_is_too_large) {
    std::string big(4096, 'x');
    scripted_server announced([&](tcp::socket& s, int) {
        std::string buffer;
        read_request(s, buffer);
        write_all(s, "HTTP/1.1 200 OK\r\nContent-Length: 4096\r\n\r\n" + big);
    });
    scripted_server chunked([&](tcp::socket& s, int) {
        std::string buffer;
        read_request(s, buffer);
        std::string out = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
        for (int i = 0; i < 8; ++i) out += "200\r\n" + std::string(512, 'y') + "\r\n";
        write_all(s, out + "0\r\n\r\n");
    });
    scripted_server header([&](tcp::socket& s, int) {
        std::string buffer;
        read_request(s, buffer);
        write_all(s, "HTTP/1.1 200 OK\r\nX-Big: " + big + "\r\nContent-Length: 0\r\n\r\n");
    });
    asio::io_context io;
    client_options options;
    options.max_response_bytes = 1024;
    client c(io, options);
    for (auto port : {announced.port(), chunked.port(), header.port()}) {
        auto r = fetch(io, c, local(port));
        ASSERT_FALSE(r) << "port " << port;
        EXPECT_EQ(r.error().kind, client_error_kind::too_large) << r.error().message;
        EXPECT_NE(r.error().message.find("1024"), std::string::npos) << r.error().message;
    }
}

TEST(http_client, hostile_responses_are_protocol_errors) {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"closed mid-body", "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b"},
        {"malformed status line", "HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n"},
        {"not HTTP", "SSH-2.0-OpenSSH_9.2\r\n\r\n"},
        {"bad chunk",
         "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n"},
        {"body longer than Content-Length",
         "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokAND MORE"},
        {"two lengths", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok"},
        {"switching protocols", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n"},
        {"closed mid-header", "HTTP/1.1 200 OK\r\nContent-Le"},
        {"nothing", ""},
    };
    asio::io_context io;
    client c(io);
    for (const auto& [name, bytes] : cases) {
        scripted_server hostile([&](tcp::socket& s, int) {
            std::string buffer;
            read_request(s, buffer);
            write_all(s, bytes);
            s.shutdown(tcp::socket::shutdown_send);
            std::this_thread::sleep_for(50ms);
        });
        auto r = fetch(io, c, local(hostile.port()));
        ASSERT_FALSE(r) << name;
        EXPECT_EQ(r.error().kind, client_error_kind::protocol) << name << ": " << r.error().message;
        EXPECT_FALSE(r.error().message.empty()) << name;
        if (name == "closed mid-body") {
            EXPECT_NE(r.error().message.find("closed the connection after 10 bytes of the body"),
                      std::string::npos)
                << r.error().message;
        }
    }
}

TEST(http_client, a_slow_server_is_cancelled_promptly_by_token) {
    scripted_server slow([](tcp::socket& s, int) {
        std::string buffer;
        read_request(s, buffer);
        write_all(s, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n");
        char byte;
        boost::system::error_code ec;
        s.read_some(asio::buffer(&byte, 1), ec);
    });
    asio::io_context io;
    client c(io);
    concurrency::cancel_source source;
    auto req = client_request::get(local(slow.port()));
    req.cancel = source.token();
    asio::steady_timer later(io, 200ms);
    later.async_wait([&](boost::system::error_code) { source.cancel(); });
    auto start = steady::now();
    auto r = fetch(io, c, std::move(req));
    auto took = steady::now() - start;
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().kind, client_error_kind::cancelled) << r.error().message;
    EXPECT_GE(took, 190ms);
    EXPECT_LT(took, 1s);
}

TEST(http_client, cancelling_the_calling_task_cancels_the_request) {
    scripted_server slow([](tcp::socket& s, int) {
        std::string buffer;
        read_request(s, buffer);
        char byte;
        boost::system::error_code ec;
        s.read_some(asio::buffer(&byte, 1), ec);
    });
    asio::io_context io;
    client c(io);
    concurrency::cancel_source source;
    asio::steady_timer later(io, 100ms);
    later.async_wait([&](boost::system::error_code) { source.cancel(); });
    auto start = steady::now();
    std::optional<client_error_kind> kind;
    bool threw = false;
    try {
        auto call = c.get(local(slow.port()));
        auto r =
            keel::test::run(io, concurrency::with_cancellation(source.token(), std::move(call)));
        if (!r) kind = r.error().kind;
    } catch (const concurrency::cancelled_error&) {
        threw = true;
    }
    // The task ends as cancelled (the combinator's cancelled_error), or its value says so;
    // and promptly: the request's own timeout is 30 s.
    EXPECT_TRUE(threw || kind == client_error_kind::cancelled);
    EXPECT_LT(steady::now() - start, 1s);
}

TEST(http_client, an_idle_connection_the_server_closed_is_not_used) {
    scripted_server once([](tcp::socket& s, int) {
        std::string buffer;
        read_request(s, buffer);
        write_all(s, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
        s.close();  // while the client keeps the connection in its pool
    });
    asio::io_context io;
    client c(io);
    ASSERT_TRUE(fetch(io, c, local(once.port())));
    std::this_thread::sleep_for(50ms);
    auto r = fetch(io, c, local(once.port()));
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->body(), "ok");
    auto s = c.stats(origin_of(once.port()));
    EXPECT_EQ(s.connections_opened, 2u);
    EXPECT_EQ(s.connections_reused, 0u);
}

// The server reads the second request on a kept-alive connection and closes it without
// answering: a GET is sent again on a new connection, a POST is not.
TEST(http_client, only_idempotent_requests_are_resent_after_a_server_close_on_a_pooled_connection) {
    std::atomic<int> gets{0}, posts{0};
    scripted_server flaky([&](tcp::socket& s, int index) {
        std::string buffer;
        for (int n = 0;; ++n) {
            auto req = read_request(s, buffer);
            if (req.empty()) return;
            (req.starts_with("POST") ? posts : gets)++;
            if (index == 0 && n == 1) {
                s.close();  // the request reached the server, which answers nothing
                return;
            }
            write_all(s, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
        }
    });
    asio::io_context io;
    client c(io);
    ASSERT_TRUE(fetch(io, c, local(flaky.port())));
    auto again = fetch(io, c, local(flaky.port()));
    ASSERT_TRUE(again) << again.error().message;
    EXPECT_EQ(gets.load(), 3);  // the first, the unanswered one, its retry
    EXPECT_EQ(flaky.accepted(), 2);

    scripted_server flaky_post([&](tcp::socket& s, int index) {
        std::string buffer;
        for (int n = 0;; ++n) {
            auto req = read_request(s, buffer);
            if (req.empty()) return;
            (req.starts_with("POST") ? posts : gets)++;
            if (index == 0 && n == 1) {
                s.close();
                return;
            }
            write_all(s, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
        }
    });
    nlohmann::json body = {{"pay", 1}};
    ASSERT_TRUE(fetch(io, c, client_request::json(method::post, local(flaky_post.port()), body)));
    auto lost = fetch(io, c, client_request::json(method::post, local(flaky_post.port()), body));
    ASSERT_FALSE(lost);
    EXPECT_EQ(lost.error().kind, client_error_kind::protocol) << lost.error().message;
    std::this_thread::sleep_for(50ms);
    EXPECT_EQ(posts.load(), 2);  // never sent twice
    EXPECT_EQ(flaky_post.accepted(), 1);
}

TEST(http_client, caller_mistakes_throw) {
    asio::io_context io;
    client c(io);
    EXPECT_THROW((void)fetch(io, c, "ftp://example.com/"), std::invalid_argument);
    EXPECT_THROW((void)fetch(io, c, "http://user:pw@example.com/"), std::invalid_argument);
    EXPECT_THROW((void)fetch(io, c, "http://example.com:99999/"), std::invalid_argument);
    auto req = client_request::get("http://127.0.0.1:1/");
    req.header("X-Evil", "a\r\nInjected: yes");
    EXPECT_THROW((void)fetch(io, c, std::move(req)), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------
// TLS

client_options trusting_test_ca() {
    client_options o;
    o.tls.ca_file = pki().ca;
    return o;
}

TEST(http_client_tls, a_good_certificate_is_accepted_by_name_and_by_address) {
    tls_server server(pki().good);
    asio::io_context io;
    client c(io, trusting_test_ca());
    for (int i = 0; i < 3; ++i) {
        auto r = fetch(io, c, "https://localhost:" + std::to_string(server.port()) + "/x");
        ASSERT_TRUE(r) << r.error().message;
        EXPECT_EQ(r->body(), "tls ok");
    }
    auto by_ip = fetch(io, c, "https://127.0.0.1:" + std::to_string(server.port()) + "/x");
    ASSERT_TRUE(by_ip) << by_ip.error().message;
    auto s = c.stats("https://localhost:" + std::to_string(server.port()));
    EXPECT_EQ(s.connections_opened, 1u);  // keep-alive over TLS
    EXPECT_EQ(s.connections_reused, 2u);
    EXPECT_EQ(server.handshakes(), 2);  // one per origin
}

void expect_refused(const cert_files& identity, std::string_view reason,
                    std::string host = "localhost") {
    tls_server server(identity);
    asio::io_context io;
    client c(io, trusting_test_ca());
    auto r = fetch(io, c, "https://" + host + ":" + std::to_string(server.port()) + "/x");
    ASSERT_FALSE(r) << "accepted";
    EXPECT_EQ(r.error().kind, client_error_kind::tls) << r.error().message;
    EXPECT_NE(r.error().message.find(reason), std::string::npos) << r.error().message;
    EXPECT_EQ(server.requests(), 0);
}

TEST(http_client_tls, a_wrong_host_name_is_refused) {
    expect_refused(pki().wrong_host, "hostname mismatch");
}

TEST(http_client_tls, a_wrong_address_is_refused) {
    expect_refused(pki().wrong_host, "IP address mismatch", "127.0.0.1");
}

TEST(http_client_tls, an_expired_certificate_is_refused) {
    expect_refused(pki().expired, "certificate has expired");
}

TEST(http_client_tls, a_self_signed_certificate_is_refused) {
    expect_refused(pki().self_signed, "self-signed certificate");
}

TEST(http_client_tls, an_unknown_ca_is_refused) {
    expect_refused(pki().unknown_ca, "unable to get local issuer certificate");
}

TEST(http_client_tls, the_system_store_does_not_trust_the_test_ca) {
    tls_server server(pki().good);
    asio::io_context io;
    client c(io);  // default: the system's CA store
    auto r = fetch(io, c, "https://localhost:" + std::to_string(server.port()) + "/x");
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().kind, client_error_kind::tls);
    EXPECT_NE(r.error().message.find("unable to get local issuer certificate"), std::string::npos)
        << r.error().message;
}

TEST(http_client_tls, verification_off_accepts_any_certificate) {
    tls_server server(pki().self_signed);
    asio::io_context io;
    client_options options;
    options.tls.verify = false;
    client c(io, options);
    auto r = fetch(io, c, "https://localhost:" + std::to_string(server.port()) + "/x");
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->body(), "tls ok");
}

TEST(http_client_tls, mutual_tls_with_the_right_client_certificate) {
    tls_server server(pki().good, pki().ca);
    asio::io_context io;
    auto options = trusting_test_ca();
    options.tls.certificate_file = pki().client.cert;
    options.tls.private_key_file = pki().client.key;
    client c(io, options);
    auto r = fetch(io, c, "https://localhost:" + std::to_string(server.port()) + "/x");
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->body(), "tls ok client=keel-test-client");
}

TEST(http_client_tls, mutual_tls_refuses_no_certificate_and_a_strangers_certificate) {
    tls_server server(pki().good, pki().ca);
    asio::io_context io;
    client without(io, trusting_test_ca());
    auto r = fetch(io, without, "https://localhost:" + std::to_string(server.port()) + "/x");
    ASSERT_FALSE(r) << "served without a client certificate: " << r->body();
    EXPECT_EQ(r.error().kind, client_error_kind::tls) << r.error().message;

    auto options = trusting_test_ca();
    options.tls.certificate_file = pki().other_client.cert;
    options.tls.private_key_file = pki().other_client.key;
    client stranger(io, options);
    r = fetch(io, stranger, "https://localhost:" + std::to_string(server.port()) + "/x");
    ASSERT_FALSE(r) << "served a stranger: " << r->body();
    EXPECT_EQ(r.error().kind, client_error_kind::tls) << r.error().message;
    EXPECT_EQ(server.requests(), 0);
}

TEST(http_client_tls, a_redirect_from_https_to_http_is_not_followed) {
    keel_backend backend;
    testing::test_server plain(backend.router);
    tls_server server(pki().good, {}, plain.port());
    asio::io_context io;
    auto options = trusting_test_ca();
    options.max_redirects = 5;
    client c(io, options);
    auto r =
        fetch(io, c, "https://localhost:" + std::to_string(server.port()) + "/redirect-to-http");
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->status(), status::found);  // returned, not followed
    EXPECT_EQ(c.stats(origin_of(plain.port())).requests, 0u);
}

TEST(http_client_tls, an_unloadable_client_certificate_is_refused_at_construction) {
    asio::io_context io;
    client_options options;
    options.tls.certificate_file = pki().dir.string() + "/missing.pem";
    options.tls.private_key_file = pki().client.key;
    EXPECT_THROW((void)client(io, options), std::invalid_argument);
    options.tls.certificate_file = pki().client.cert;
    options.tls.private_key_file = pki().good.key;  // not the certificate's key
    EXPECT_THROW((void)client(io, options), std::invalid_argument);
}

}  // namespace
}  // namespace keel::http::client_test
