// Every limit and bad input is answered with the right status, and the server keeps
// serving afterwards.

#include <gtest/gtest.h>

#include <keel/http/builtin.hpp>
#include <keel/http/testing.hpp>

namespace keel::http {
namespace {

using testing::test_server;

struct item {
    std::string name;
    int count = 0;
};
void from_json(const nlohmann::json& j, item& i) {
    read_field(j, "name", i.name);
    read_field(j, "count", i.count);
}

router limits_router() {
    router r;
    r.get("/ok", [](request&) -> asio::awaitable<response> { co_return response::text("ok"); });
    r.post("/items", [](request& req) -> asio::awaitable<response> {
        auto i = req.json<item>();
        co_return response::json({{"name", i.name}, {"count", i.count}}, status::created);
    });
    r.post("/small",
           [](request& req) -> asio::awaitable<response> {
               co_return response::text(std::to_string(req.body().size()));
           },
           {.max_body = 10});
    r.post("/large",
           [](request& req) -> asio::awaitable<response> {
               co_return response::text(std::to_string(req.body().size()));
           },
           {.max_body = 4 * 1024 * 1024});
    r.post("/default", [](request& req) -> asio::awaitable<response> {
        co_return response::text(std::to_string(req.body().size()));
    });
    return r;
}

// The server still answers a fresh client.
void expect_still_serving(const test_server& server) {
    EXPECT_EQ(server.client().get("/ok").status, status::ok);
}

std::optional<testing::test_response> send_raw(const test_server& server, std::string bytes) {
    auto raw = server.raw();
    raw.send(bytes);
    return raw.read_response();
}

std::string post(std::string_view target, std::size_t length, std::string_view extra = "") {
    return "POST " + std::string(target) +
           " HTTP/1.1\r\nHost: t\r\nContent-Length: " + std::to_string(length) + "\r\n" +
           std::string(extra) + "\r\n";
}

TEST(limits, malformed_request_line_is_400) {
    auto r = limits_router();
    test_server server(r);
    for (std::string bad : {"GARBAGE\r\n\r\n", "GET /ok HTTP/9.9\r\n\r\n", "GET  HTTP/1.1\r\n\r\n",
                            "GET /ok HTTP/1.1\r\nBad Header\r\n\r\n"}) {
        auto res = send_raw(server, bad);
        ASSERT_TRUE(res) << bad;
        EXPECT_EQ(res->status, status::bad_request) << bad;
        EXPECT_EQ(res->header("Content-Type"), "application/problem+json");
        EXPECT_FALSE(res->keep_alive);
    }
    expect_still_serving(server);
}

TEST(limits, target_that_is_not_an_absolute_path_is_400) {
    auto r = limits_router();
    test_server server(r);
    auto res = send_raw(server, "GET http://example.com/ok HTTP/1.1\r\nHost: t\r\n\r\n");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, status::bad_request);
    expect_still_serving(server);
}

TEST(limits, oversized_header_is_431) {
    auto r = limits_router();
    test_server server(r, {.server = {.max_header_bytes = 4096}});
    auto res = send_raw(
        server, "GET /ok HTTP/1.1\r\nHost: t\r\nX-Big: " + std::string(8000, 'a') + "\r\n\r\n");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, status::request_header_fields_too_large);
    // Just under the limit is fine.
    auto fits = send_raw(
        server, "GET /ok HTTP/1.1\r\nHost: t\r\nX-Big: " + std::string(3000, 'a') + "\r\n\r\n");
    ASSERT_TRUE(fits);
    EXPECT_EQ(fits->status, status::ok);
    expect_still_serving(server);
}

TEST(limits, body_over_the_default_limit_is_413_before_it_is_read) {
    auto r = limits_router();
    test_server server(r);
    auto res = send_raw(server, post("/default", 1024 * 1024 + 1));
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, status::payload_too_large);
    auto exact = send_raw(server, post("/default", 1024 * 1024) + std::string(1024 * 1024, 'x'));
    ASSERT_TRUE(exact);
    EXPECT_EQ(exact->body, std::to_string(1024 * 1024));
    expect_still_serving(server);
}

TEST(limits, body_limit_is_per_route) {
    auto r = limits_router();
    test_server server(r);
    EXPECT_EQ(send_raw(server, post("/small", 11) + std::string(11, 'x'))->status,
              status::payload_too_large);
    EXPECT_EQ(send_raw(server, post("/small", 10) + std::string(10, 'x'))->body, "10");
    auto big = std::string(2 * 1024 * 1024, 'y');
    auto large = send_raw(server, post("/large", big.size()) + big);
    ASSERT_TRUE(large);
    EXPECT_EQ(large->body, std::to_string(big.size()));
    expect_still_serving(server);
}

TEST(limits, chunked_body_over_the_limit_is_413) {
    auto r = limits_router();
    test_server server(r);
    auto res = send_raw(server,
                        "POST /small HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                        "8\r\n12345678\r\n8\r\n12345678\r\n0\r\n\r\n");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, status::payload_too_large);
    expect_still_serving(server);
}

TEST(limits, slow_client_is_disconnected_at_the_header_deadline) {
    auto r = limits_router();
    test_server server(r, {.server = {.header_timeout = std::chrono::milliseconds(200)}});
    auto raw = server.raw();
    raw.send("GET /ok HTTP/1.1\r\nHost: t\r\nX-Slow: ");  // and never finishes
    EXPECT_TRUE(raw.wait_closed());
    auto silent = server.raw();  // connects and sends nothing
    EXPECT_TRUE(silent.wait_closed());
    expect_still_serving(server);
}

TEST(limits, a_slow_second_request_gets_the_header_deadline_not_the_idle_one) {
    auto r = limits_router();
    test_server server(r, {.server = {.header_timeout = std::chrono::milliseconds(200),
                                      .idle_timeout = std::chrono::seconds(60)}});
    auto raw = server.raw(std::chrono::seconds(5));
    raw.send("GET /ok HTTP/1.1\r\nHost: t\r\n\r\n");
    ASSERT_TRUE(raw.read_response());
    raw.send("GET /ok HTTP/1.1\r\nHost: t\r\nX-Slow: ");  // then nothing more
    EXPECT_TRUE(raw.wait_closed());
}

TEST(limits, idle_keep_alive_connection_is_closed_after_the_idle_timeout) {
    auto r = limits_router();
    test_server server(r, {.server = {.header_timeout = std::chrono::milliseconds(200),
                                      .idle_timeout = std::chrono::milliseconds(200)}});
    auto raw = server.raw();
    raw.send("GET /ok HTTP/1.1\r\nHost: t\r\n\r\n");
    auto res = raw.read_response();
    ASSERT_TRUE(res);
    EXPECT_TRUE(res->keep_alive);
    EXPECT_TRUE(raw.wait_closed());
    // A client whose kept-alive connection was closed retries on a new one.
    auto client = server.client();
    EXPECT_EQ(client.get("/ok").status, status::ok);
    auto closed = server.raw();
    EXPECT_TRUE(closed.wait_closed());  // opened later, so `client`'s deadline passed too
    EXPECT_EQ(client.get("/ok").status, status::ok);
}

TEST(limits, slow_body_is_disconnected_at_the_body_deadline) {
    auto r = limits_router();
    test_server server(r, {.server = {.body_timeout = std::chrono::milliseconds(200)}});
    auto raw = server.raw();
    raw.send(post("/default", 100) + "only a part");
    EXPECT_TRUE(raw.wait_closed());
    expect_still_serving(server);
}

TEST(limits, json_errors_are_answered_and_the_connection_stays_usable) {
    auto r = limits_router();
    test_server server(r);
    auto client = server.client();

    auto invalid = client.request(method::post, "/items",
                                  "{\"name\":", {{"Content-Type", "application/json"}});
    EXPECT_EQ(invalid.status, status::bad_request);
    EXPECT_EQ(invalid.header("Content-Type"), "application/problem+json");
    EXPECT_TRUE(invalid.keep_alive);

    auto missing = client.post_json("/items", {{"name", "x"}});
    EXPECT_EQ(missing.status, status::bad_request);
    EXPECT_EQ(missing.json()["field"], "/count");

    auto wrong = client.post_json("/items", {{"name", "x"}, {"count", "three"}});
    EXPECT_EQ(wrong.status, status::bad_request);
    EXPECT_EQ(wrong.json()["field"], "/count");

    headers text;
    text.add("Content-Type", "text/plain");
    auto media = client.request(method::post, "/items", R"({"name":"x","count":1})", text);
    EXPECT_EQ(media.status, status::unsupported_media_type);

    auto good = client.post_json("/items", {{"name", "x"}, {"count", 3}});
    EXPECT_EQ(good.status, status::created);
    EXPECT_EQ(good.json()["count"], 3);
}

TEST(limits, bad_path_encoding_and_unknown_methods_are_answered) {
    auto r = limits_router();
    test_server server(r);
    auto client = server.client();
    EXPECT_EQ(client.get("/o%zzk").status, status::bad_request);
    EXPECT_EQ(client.request(method::put, "/ok").status, status::method_not_allowed);
    auto brew = send_raw(server, "BREW /ok HTTP/1.1\r\nHost: t\r\n\r\n");
    ASSERT_TRUE(brew);
    EXPECT_EQ(brew->status, status::method_not_allowed);
    EXPECT_EQ(client.get("/ok").status, status::ok);
}

}  // namespace
}  // namespace keel::http
