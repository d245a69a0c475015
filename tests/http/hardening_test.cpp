// The HTTP layer against hostile and faulty clients: spellings of a guarded path that must
// not bypass its group's middleware, JSON built to cost the parser, requests without a
// Host, clients that take every connection or announce bodies they never send, and
// dependencies that are down (503 with Retry-After, never 500).

#include <gtest/gtest.h>
#include <malloc.h>

#include <keel/framework/errors.hpp>
#include <keel/http/router.hpp>
#include <keel/http/testing.hpp>
#include <vector>

namespace keel::http {
namespace {

using testing::raw_connection;
using testing::test_server;

asio::awaitable<response> ok(request&) {
    co_return response::text("handled");
}

// A guard that refuses everything: a request that reaches a guarded handler went around it.
struct guarded_router {
    router r;
    int guard_calls = 0;
    guarded_router() {
        r.post("/webhooks/payment", ok);
        r.post("/webhooks/signals/*path", ok);
        r.get("/public", ok);
        r.group("/webhooks").use([this](request& req, next) -> asio::awaitable<response> {
            ++guard_calls;
            co_return response::problem(status::unauthorized, "no signature",
                                        std::string(req.path()));
        });
    }
};

response run(const router& r, method m, std::string target) {
    request req(m, std::move(target));
    asio::io_context io;
    std::optional<response> out;
    asio::co_spawn(io, r.handle(req), [&](std::exception_ptr e, response res) {
        if (e) std::rethrow_exception(e);
        out.emplace(std::move(res));
    });
    io.run();
    return std::move(*out);
}

TEST(route_group, every_spelling_of_a_guarded_path_is_refused_or_meets_the_guard) {
    guarded_router g;
    const std::vector<std::string> spellings = {
        "/webhooks/payment",        "/%77ebhooks/payment",     "/webhook%73/payment",
        "/webhooks/%70ayment",      "/%77%65%62hooks/payment", "/webhooks/payment/",
        "/webhooks/payment?x=1",    "/webhooks%2Fpayment",     "/webhooks%2fpayment",
        "//webhooks/payment",       "/./webhooks/payment",     "/x/../webhooks/payment",
        "/webhooks/./payment",      "/%2e/webhooks/payment",   "/%2E%2E/webhooks/payment",
        "/webhooks/payment%00",     "/%2577ebhooks/payment",   "/WEBHOOKS/payment",
        "/webhooks/signals/a/b",    "/webhooks/signals/a%2Fb", "/%77ebhooks/signals/x",
        "/webhooks/signals/%2e%2e", "/webhooks//payment",      "/webhooks/payment%0a"};
    for (const auto& target : spellings) {
        int before = g.guard_calls;
        auto res = run(g.r, method::post, target);
        auto code = to_int(res.status());
        bool met_guard = g.guard_calls == before + 1 && code == 401;
        bool refused = g.guard_calls == before && (code == 400 || code == 404 || code == 405);
        EXPECT_TRUE(met_guard || refused) << target << " -> " << code << " " << res.body();
        EXPECT_NE(res.body(), "handled") << target;
    }
    EXPECT_EQ(to_int(run(g.r, method::get, "/public").status()), 200);
}

// A guard decides first: a request under its prefix that matches no route (404), names a
// route's path with another method (405) or asks which methods there are (OPTIONS) meets it
// before any answer, so nobody without its credentials can map what lies behind it.
TEST(route_group, a_guard_answers_before_404_405_and_options_under_its_prefix) {
    guarded_router g;
    const std::vector<std::pair<method, std::string>> probes = {
        {method::post, "/webhooks/nope"},     {method::post, "/webhooks"},
        {method::get, "/webhooks/payment"},   {method::options, "/webhooks/payment"},
        {method::del, "/webhooks/signals/a"}, {method::options, "/webhooks/signals/a/b"}};
    for (const auto& [m, target] : probes) {
        int before = g.guard_calls;
        auto res = run(g.r, m, target);
        EXPECT_EQ(to_int(res.status()), 401) << to_string(m) << " " << target;
        EXPECT_EQ(g.guard_calls, before + 1) << to_string(m) << " " << target;
        EXPECT_FALSE(res.header("Allow")) << to_string(m) << " " << target;
    }
    // Elsewhere the router answers as before, without the guard.
    int before = g.guard_calls;
    EXPECT_EQ(to_int(run(g.r, method::post, "/webhooksx").status()), 404);
    EXPECT_EQ(to_int(run(g.r, method::post, "/public").status()), 405);
    auto options = run(g.r, method::options, "/public");
    EXPECT_EQ(to_int(options.status()), 204);
    EXPECT_EQ(options.header("Allow").value_or(""), "GET, HEAD, OPTIONS");
    EXPECT_EQ(g.guard_calls, before);
}

TEST(route_group, covers_routes_added_before_and_after_and_nests_outermost_first) {
    router r;
    std::vector<std::string> order;
    auto mark = [&order](std::string name) {
        return [&order, name](request& req, next n) -> asio::awaitable<response> {
            order.push_back(name);
            co_return co_await n(req);
        };
    };
    r.post("/api/v1/orders", ok);
    r.group("/api/v1").use(mark("v1"));
    r.group("/api").use(mark("api"));
    r.group("/api").group("/v1").post("/users", ok);
    r.post("/apix", ok);  // not under /api: whole segments only
    EXPECT_EQ(run(r, method::post, "/api/v1/orders").body(), "handled");
    EXPECT_EQ(order, (std::vector<std::string>{"api", "v1"}));
    order.clear();
    EXPECT_EQ(run(r, method::post, "/api/v1/users").body(), "handled");
    EXPECT_EQ(order, (std::vector<std::string>{"api", "v1"}));
    order.clear();
    EXPECT_EQ(run(r, method::post, "/apix").body(), "handled");
    EXPECT_TRUE(order.empty());
}

TEST(request, path_is_decoded_once_and_canonical) {
    request a(method::get, "/orders/o%201/?q=1");
    EXPECT_EQ(a.path(), "/orders/o 1");
    EXPECT_EQ(a.raw_path(), "/orders/o%201/");
    EXPECT_EQ(a.path_segments(), (std::vector<std::string>{"orders", "o 1"}));
    EXPECT_TRUE(a.path_error().empty());
    EXPECT_EQ(request(method::get, "/").path(), "/");
    EXPECT_EQ(request(method::get, "/%2525").path(), "/%25");  // decoded once, not twice
    for (auto bad : {"/a%2Fb", "/a/%2e%2E", "/a/./b", "/a%00", "/a%zz", "relative"}) {
        request r(method::get, bad);
        EXPECT_FALSE(r.path_error().empty()) << bad;
        EXPECT_TRUE(r.path().empty()) << bad;
    }
}

// --- JSON ------------------------------------------------------------------------------

request json_request(std::string body) {
    headers h;
    h.add("Content-Type", "application/json");
    return request(method::post, "/", std::move(h), std::move(body));
}

TEST(json_limits, nesting_beyond_64_levels_is_400_naming_where) {
    std::string at_limit = std::string(64, '[') + std::string(64, ']');
    EXPECT_TRUE(json_request(at_limit).json_document());

    auto deep = json_request(R"({"a":[)" + std::string(100, '[') + std::string(100, ']') + "]}");
    auto doc = deep.json_document();
    ASSERT_FALSE(doc);
    EXPECT_EQ(doc.error().status, status::bad_request);
    EXPECT_NE(doc.error().detail.find("nested deeper than 64"), std::string::npos);
    EXPECT_EQ(doc.error().field.substr(0, 5), "/a/0/");
}

TEST(json_limits, half_a_million_levels_are_refused_without_parsing_them) {
    auto hostile = json_request(std::string(500'000, '[') + std::string(500'000, ']'));
    auto doc = hostile.json_document();
    ASSERT_FALSE(doc);
    EXPECT_EQ(doc.error().status, status::bad_request);
}

TEST(json_limits, a_number_beyond_a_double_is_400_naming_the_field) {
    auto doc =
        json_request(R"({"order": {"lines": [{"qty": 1}, {"amount": 1e400}]}})").json_document();
    ASSERT_FALSE(doc);
    EXPECT_EQ(doc.error().status, status::bad_request);
    EXPECT_EQ(doc.error().field, "/order/lines/1/amount");
    EXPECT_NE(doc.error().detail.find("overflow"), std::string::npos);

    auto digits = json_request("[" + std::string(400, '9') + "]").json_document();
    ASSERT_FALSE(digits);
    EXPECT_EQ(digits.error().field, "/0");
    EXPECT_TRUE(json_request(R"({"big": 1e300, "n": 18446744073709551615})").json_document());
}

struct counted {
    std::int64_t count = 0;
    std::vector<int> small;
};
void from_json(const nlohmann::json& j, counted& c) {
    read_field(j, "count", c.count);
    read_field(j, "small", c.small);
}

// Found by fuzzing: nlohmann casts a float to an integer unchecked (undefined for 1e19).
TEST(json_limits, integers_come_only_from_json_integers_in_range) {
    auto good =
        json_request(R"({"count": -9223372036854775808, "small": [1, 2]})").try_json<counted>();
    ASSERT_TRUE(good);
    EXPECT_EQ(good->small, (std::vector<int>{1, 2}));
    for (auto [body, field] :
         {std::pair{R"({"count": 1e19, "small": []})", "/count"},
          std::pair{R"({"count": 2.7, "small": []})", "/count"},
          std::pair{R"({"count": 9223372036854775808, "small": []})", "/count"},
          std::pair{R"({"count": 1, "small": [1, 4294967296]})", "/small/1"}}) {
        auto bad = json_request(body).try_json<counted>();
        ASSERT_FALSE(bad) << body;
        EXPECT_EQ(bad.error().status, status::bad_request) << body;
        EXPECT_EQ(bad.error().field, field) << body;
    }
}

TEST(request, repeated_trailing_slashes_are_one_canonical_path) {
    request r(method::get, "/files/a//");
    EXPECT_EQ(r.path(), "/files/a");
    EXPECT_EQ(r.path_segments(), (std::vector<std::string>{"files", "a"}));
}

TEST(request, an_absurd_idempotency_key_is_400) {
    headers h;
    h.add("Idempotency-Key", std::string(request::max_idempotency_key_bytes, 'k'));
    EXPECT_EQ(request(method::post, "/", h).idempotency_key()->size(), 256u);
    headers big;
    big.add("Idempotency-Key", std::string(request::max_idempotency_key_bytes + 1, 'k'));
    try {
        (void)request(method::post, "/", big).idempotency_key();
        ADD_FAILURE() << "a 257-byte key was accepted";
    } catch (const problem_error& e) {
        EXPECT_EQ(e.problem().status, status::bad_request);
        EXPECT_EQ(e.problem().field, "Idempotency-Key");
    }
}

// --- over the wire -----------------------------------------------------------------------

router plain_router() {
    router r;
    r.get("/ok", ok);
    r.get("/healthz", ok);
    r.post("/upload", [](request& req) -> asio::awaitable<response> {
        co_return response::text(std::to_string(req.body().size()));
    });
    r.get("/down", [](request&) -> asio::awaitable<response> {
        throw keel::unavailable_error("redis://10.0.0.1:6379 is down", std::chrono::seconds(3));
        co_return response::text("unreachable");
    });
    r.get("/busy", [](request&) -> asio::awaitable<response> {
        throw problem_error(status::service_unavailable, "storage is unavailable");
        co_return response::text("unreachable");
    });
    return r;
}

std::optional<testing::test_response> exchange(const test_server& s, const std::string& bytes) {
    auto c = s.raw();
    c.send(bytes);
    return c.read_response();
}

TEST(server, host_is_required_once_in_http_1_1) {
    auto r = plain_router();
    test_server server(r);
    auto none = exchange(server, "GET /ok HTTP/1.1\r\n\r\n");
    ASSERT_TRUE(none);
    EXPECT_EQ(none->status, status::bad_request);
    auto two = exchange(server, "GET /ok HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n");
    ASSERT_TRUE(two);
    EXPECT_EQ(two->status, status::bad_request);
    auto old = exchange(server, "GET /ok HTTP/1.0\r\n\r\n");
    ASSERT_TRUE(old);
    EXPECT_EQ(old->status, status::ok);
    auto fine = exchange(server, "GET /ok HTTP/1.1\r\nHost: a\r\n\r\n");
    ASSERT_TRUE(fine);
    EXPECT_EQ(fine->status, status::ok);
}

TEST(server, an_unavailable_dependency_is_503_with_retry_after_not_500) {
    auto r = plain_router();
    test_server server(r);
    auto client = server.client();
    auto down = client.get("/down");
    EXPECT_EQ(down.status, status::service_unavailable);
    EXPECT_EQ(down.header("Retry-After"), "3");
    EXPECT_EQ(down.body.find("10.0.0.1"), std::string::npos) << "internal address leaked";
    auto busy = client.get("/busy");
    EXPECT_EQ(busy.status, status::service_unavailable);
    EXPECT_EQ(busy.header("Retry-After"), "1");
}

TEST(server, one_client_address_cannot_take_every_connection) {
    auto r = plain_router();
    test_server server(r, {.server = {.max_connections_per_client = 3, .probe_connections = 2}});
    std::vector<raw_connection> hog;
    for (int i = 0; i < 3; ++i) {
        hog.push_back(server.raw());
        hog.back().send("GET /ok HTTP/1.1\r\nHost: t\r\n\r\n");
        ASSERT_EQ(hog.back().read_response()->status, status::ok);
    }
    auto fourth = exchange(server, "GET /ok HTTP/1.1\r\nHost: t\r\n\r\n");
    ASSERT_TRUE(fourth);
    EXPECT_EQ(fourth->status, status::too_many_requests);
    EXPECT_TRUE(fourth->header("Retry-After"));
    // The same client's health probe still gets through, in a probe slot.
    auto probe = exchange(server, "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n");
    ASSERT_TRUE(probe);
    EXPECT_EQ(probe->status, status::ok);
    EXPECT_FALSE(probe->keep_alive);
    // Another client address is served as usual.
    raw_connection other("127.0.0.1", server.port(), std::chrono::seconds(10), "127.0.0.2");
    other.send("GET /ok HTTP/1.1\r\nHost: t\r\n\r\n");
    auto res = other.read_response();
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, status::ok);
    EXPECT_TRUE(res->keep_alive);
}

TEST(server, health_probes_are_answered_when_every_slot_is_taken) {
    auto r = plain_router();
    test_server server(r, {.server = {.max_connections = 2, .probe_connections = 1}});
    auto a = server.raw();
    auto b = server.raw();
    for (auto* c : {&a, &b}) {
        c->send("GET /ok HTTP/1.1\r\nHost: t\r\n\r\n");
        ASSERT_TRUE(c->read_response());
    }
    auto probe = exchange(server, "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n");
    ASSERT_TRUE(probe);
    EXPECT_EQ(probe->status, status::ok);
    auto other = exchange(server, "GET /ok HTTP/1.1\r\nHost: t\r\n\r\n");
    ASSERT_TRUE(other);
    EXPECT_EQ(other->status, status::service_unavailable);
    // With the probe slot held, the next connection is refused at once. (The slot of the
    // exchange above comes back when the server has closed that connection: try again.)
    bool refused_at_once = false;
    for (int attempt = 0; attempt < 50 && !refused_at_once; ++attempt) {
        auto holder = server.raw();
        auto refused = server.raw(std::chrono::milliseconds(300));
        try {
            auto canned = refused.read_response();
            refused_at_once = canned && canned->status == status::service_unavailable;
        } catch (const std::exception&) {  // it got the probe slot: no answer without a request
        }
    }
    EXPECT_TRUE(refused_at_once);
}

std::size_t heap_in_use() {
    auto info = mallinfo2();
    return info.uordblks + info.hblkhd;
}

// A client that announces a large body and stalls must not make the server reserve it.
// (Heap bytes in use, mmapped blocks included: reserved memory counts even if untouched.)
TEST(server, a_stalled_body_costs_what_was_sent_not_what_was_announced) {
#if defined(__SANITIZE_ADDRESS__)
    GTEST_SKIP() << "mallinfo2 does not see AddressSanitizer's allocator";
#endif
    auto r = plain_router();
    test_server server(r);
    constexpr int stalled = 100;
    std::vector<raw_connection> clients;
    for (int i = 0; i < 5; ++i) clients.push_back(server.raw());  // warm up the pools
    auto before = heap_in_use();
    for (int i = 0; i < stalled; ++i) {
        clients.push_back(server.raw());
        clients.back().send("POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: 1000000\r\n\r\n" +
                            std::string(100, 'x'));
    }
    // Every connection is past its header: a request that follows them is answered.
    EXPECT_EQ(server.client().get("/ok").status, status::ok);
    auto per_connection = (heap_in_use() - before) / stalled;
    RecordProperty("heap_bytes_per_stalled_connection", static_cast<int>(per_connection));
    EXPECT_LT(per_connection, 128u * 1024) << per_connection << " bytes per stalled connection";
}

// The response of `handler` to a GET, read on a connection that has a GET of a plain route
// pipelined behind it; fails the test unless that second response is read in step too.
testing::test_response answer_followed_by_another(handler h) {
    router r;
    r.get("/under-test", std::move(h));
    r.get("/ok", ok);
    test_server server(r);
    auto raw = server.raw();
    raw.send("GET /under-test HTTP/1.1\r\nHost: t\r\n\r\nGET /ok HTTP/1.1\r\nHost: t\r\n\r\n");
    auto res = raw.read_response();
    auto next = raw.read_response();
    if (!res || !next || next->body != "handled")
        ADD_FAILURE() << "the connection is out of step after the response";
    return res.value_or(testing::test_response{});
}

// A handler that echoes what a client sent into a header field (a redirect's Location, say)
// cannot add fields of its own or end the response early: control characters in a value
// (HTAB aside) are sent as spaces, and a field whose name is not a token is left out.
TEST(server, a_handler_cannot_split_a_response_through_its_header_fields) {
    auto res = answer_followed_by_another([](request&) -> asio::awaitable<response> {
        co_return response::text("body")
            .header("X-Echo",
                    std::string("a\r\nSet-Cookie: stolen=1\r\n\r\nHTTP/1.1 200 OK\0!", 44))
            .header("X-Controls",
                    "1\x01"
                    "2\x7f"
                    "3\t4")
            .header("Bad Name", "x")
            .header("X-Fine", "kept");
    });
    EXPECT_EQ(res.status, status::ok);
    EXPECT_EQ(res.header("X-Echo"), "a  Set-Cookie: stolen=1    HTTP/1.1 200 OK !");
    EXPECT_FALSE(res.header("Set-Cookie"));
    EXPECT_FALSE(res.header("Bad Name"));
    EXPECT_EQ(res.header("X-Controls"), "1 2 3\t4");
    EXPECT_EQ(res.header("X-Fine"), "kept");
    EXPECT_EQ(res.body, "body");
}

// Content-Length, Transfer-Encoding, Connection, Proxy-Connection, Server and Date are the
// server's: a handler
// that sets them does not change how the response is framed or whether the connection stays.
TEST(server, the_framing_fields_are_the_servers) {
    auto res = answer_followed_by_another([](request&) -> asio::awaitable<response> {
        co_return response::text("eleven byte")
            .header("Content-Length", "5")
            .header("Transfer-Encoding", "chunked")
            .header("Connection", "close")
            .header("Proxy-Connection", "close")
            .header("Server", "other")
            .header("Date", "yesterday");
    });
    EXPECT_EQ(res.body, "eleven byte");
    EXPECT_EQ(res.header("Content-Length"), "11");
    EXPECT_FALSE(res.header("Transfer-Encoding"));
    EXPECT_FALSE(res.header("Proxy-Connection"));
    EXPECT_EQ(res.header("Server"), "keel");
    EXPECT_NE(res.header("Date"), "yesterday");
    EXPECT_TRUE(res.keep_alive);
}

// 1xx, 204 and 304 have no body (RFC 9110, 6.4.1) and, for 1xx and 204, no Content-Length
// (8.6): what a handler put in the body is not sent.
TEST(server, a_no_content_response_sends_no_body_and_no_length) {
    auto res = answer_followed_by_another([](request&) -> asio::awaitable<response> {
        co_return response::text("dropped", status::no_content);
    });
    EXPECT_EQ(res.status, status::no_content);
    EXPECT_EQ(res.body, "");
    EXPECT_FALSE(res.header("Content-Length"));
}

// An HTTP/1.0 client that asks to keep the connection is told so and served again on it.
TEST(server, an_http_1_0_client_may_keep_its_connection) {
    router r;
    r.get("/ok", ok);
    test_server server(r);
    auto raw = server.raw();
    raw.send("GET /ok HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    auto res = raw.read_response();
    ASSERT_TRUE(res);
    EXPECT_EQ(res->header("Connection"), "keep-alive");
    raw.send("GET /ok HTTP/1.0\r\n\r\n");
    auto next = raw.read_response();
    ASSERT_TRUE(next);
    EXPECT_EQ(next->body, "handled");
    EXPECT_TRUE(raw.wait_closed());
}

}  // namespace
}  // namespace keel::http
