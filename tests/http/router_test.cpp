// The routing table: matches, parameters, precedence, 404/405, trailing slashes,
// HEAD/OPTIONS, and registration errors.

#include <gtest/gtest.h>

#include <keel/http/controller.hpp>
#include <keel/http/router.hpp>

#include "support.hpp"

namespace keel::http {
namespace {

using test_support::handle;
using test_support::text;

// Echoes the matched pattern and parameters: "<pattern>|name=value|..."
handler echo() {
    return [](request& req) -> asio::awaitable<response> {
        std::string out(req.route_pattern());
        for (auto& [name, value] : req.params()) out += "|" + std::string(name) + "=" + value;
        co_return response::text(out);
    };
}

router sample() {
    router r;
    r.get("/", echo());
    r.get("/orders", echo());
    r.post("/orders", echo());
    r.get("/orders/new", echo());
    r.get("/orders/:id<int>", echo());
    r.del("/orders/:id<int>", echo());
    r.get("/orders/:id<int>/lines/:line", echo());
    r.get("/users/:user<uuid>", echo());
    r.get("/files/*path", echo());
    r.get("/files/readme", echo());
    return r;
}

TEST(router, matches_static_and_parameter_segments) {
    auto r = sample();
    EXPECT_EQ(handle(r, method::get, "/").body(), "/");
    EXPECT_EQ(handle(r, method::get, "/orders").body(), "/orders");
    EXPECT_EQ(handle(r, method::get, "/orders/42").body(), "/orders/:id<int>|id=42");
    EXPECT_EQ(handle(r, method::get, "/orders/-7").body(), "/orders/:id<int>|id=-7");
    EXPECT_EQ(handle(r, method::get, "/orders/42/lines/a%20b").body(),
              "/orders/:id<int>/lines/:line|id=42|line=a b");
    EXPECT_EQ(handle(r, method::get, "/users/123e4567-e89b-12d3-a456-426614174000").body(),
              "/users/:user<uuid>|user=123e4567-e89b-12d3-a456-426614174000");
}

TEST(router, query_string_is_not_part_of_the_path) {
    auto r = sample();
    EXPECT_EQ(handle(r, method::get, "/orders/5?verbose=1").body(), "/orders/:id<int>|id=5");
}

TEST(router, static_segments_take_precedence_over_parameters_and_wildcards) {
    auto r = sample();
    EXPECT_EQ(handle(r, method::get, "/orders/new").body(), "/orders/new");
    EXPECT_EQ(handle(r, method::get, "/files/readme").body(), "/files/readme");
    EXPECT_EQ(handle(r, method::get, "/files/readme/more").body(), "/files/*path|path=readme/more");
}

TEST(router, backtracks_from_a_static_segment_that_leads_nowhere) {
    router r;
    r.get("/a/static/x", echo());
    r.get("/a/:p/y", echo());
    EXPECT_EQ(handle(r, method::get, "/a/static/y").body(), "/a/:p/y|p=static");
}

TEST(router, wildcard_takes_the_rest_of_the_path) {
    auto r = sample();
    EXPECT_EQ(handle(r, method::get, "/files/a/b/c.txt").body(), "/files/*path|path=a/b/c.txt");
    EXPECT_EQ(handle(r, method::get, "/files").body(), "/files/*path|path=");
}

TEST(router, trailing_slash_is_not_significant) {
    auto r = sample();
    EXPECT_EQ(handle(r, method::get, "/orders/").body(), "/orders");
    EXPECT_EQ(handle(r, method::get, "/orders/42/").body(), "/orders/:id<int>|id=42");
    // But an empty segment in the middle is not a match.
    EXPECT_EQ(handle(r, method::get, "/orders//42").status(), status::not_found);
}

TEST(router, typed_parameter_that_does_not_convert_is_400_naming_it) {
    auto r = sample();
    auto res = handle(r, method::get, "/orders/abc");
    EXPECT_EQ(res.status(), status::bad_request);
    EXPECT_EQ(res.header("Content-Type"), "application/problem+json");
    auto body = nlohmann::json::parse(res.body());
    EXPECT_EQ(body["field"], "id");
    EXPECT_EQ(body["status"], 400);
    EXPECT_NE(body["detail"].get<std::string>().find("integer"), std::string::npos);
    EXPECT_EQ(handle(r, method::get, "/orders/99999999999999999999").status(), status::bad_request);
    EXPECT_EQ(handle(r, method::get, "/users/not-a-uuid").status(), status::bad_request);
}

TEST(router, unknown_path_is_404_problem) {
    auto r = sample();
    auto res = handle(r, method::get, "/nope");
    EXPECT_EQ(res.status(), status::not_found);
    EXPECT_EQ(res.header("Content-Type"), "application/problem+json");
    EXPECT_EQ(handle(r, method::get, "/orders/1/unknown").status(), status::not_found);
}

TEST(router, wrong_method_is_405_with_allow) {
    auto r = sample();
    auto res = handle(r, method::put, "/orders");
    EXPECT_EQ(res.status(), status::method_not_allowed);
    EXPECT_EQ(res.header("Allow"), "GET, HEAD, POST, OPTIONS");
    auto del = handle(r, method::post, "/orders/7");
    EXPECT_EQ(del.header("Allow"), "GET, HEAD, DELETE, OPTIONS");
    request other(method::other, "/orders");
    other.set_method_name("BREW");
    EXPECT_EQ(handle(r, other).status(), status::method_not_allowed);
}

TEST(router, head_uses_the_get_route_and_options_lists_methods) {
    auto r = sample();
    EXPECT_EQ(handle(r, method::head, "/orders/1").body(), "/orders/:id<int>|id=1");
    auto options = handle(r, method::options, "/orders");
    EXPECT_EQ(options.status(), status::no_content);
    EXPECT_EQ(options.header("Allow"), "GET, HEAD, POST, OPTIONS");
}

TEST(router, explicit_options_route_wins) {
    router r;
    r.get("/x", text("get"));
    r.add(method::options, "/x", text("custom"));
    EXPECT_EQ(handle(r, method::options, "/x").body(), "custom");
}

TEST(router, malformed_percent_encoding_is_400) {
    auto r = sample();
    EXPECT_EQ(handle(r, method::get, "/orders/%zz").status(), status::bad_request);
}

void expect_route_error(const std::function<void()>& f, std::string_view contains) {
    try {
        f();
        ADD_FAILURE() << "expected route_error containing: " << contains;
    } catch (const route_error& e) {
        EXPECT_NE(std::string(e.what()).find(contains), std::string::npos) << e.what();
    }
}

TEST(router, registration_errors_name_the_route_and_reason) {
    expect_route_error([] { router().get("orders", text("")); }, "must start with '/'");
    expect_route_error([] { router().get("/a/*rest/b", text("")); }, "wildcard must be the last");
    expect_route_error([] { router().get("/a/:id<float>", text("")); }, "unknown parameter type");
    expect_route_error([] { router().get("/a/:1x", text("")); }, "not an identifier");
    expect_route_error([] { router().get("/a/:x/:x", text("")); }, "appears twice");
    expect_route_error([] { router().get("/a//b", text("")); }, "empty path segment");
    expect_route_error([] { router().get("/a", handler{}); }, "handler is empty");
    expect_route_error(
        [] {
            router r;
            r.get("/orders/:id", text(""));
            r.get("/orders/:id/", text(""));
        },
        "duplicate route GET /orders/:id");
    expect_route_error(
        [] {
            router r;
            r.get("/orders/:id<int>", text(""));
            r.del("/orders/:order/lines", text(""));
        },
        "conflicts with /orders/:id<int>");
    expect_route_error(
        [] {
            router r;
            r.get("/orders/:id<int>", text(""));
            r.put("/orders/:id<uuid>", text(""));
        },
        "conflicts");
}

TEST(router, lists_routes_in_registration_order) {
    auto r = sample();
    auto routes = r.routes();
    ASSERT_EQ(routes.size(), 10u);
    EXPECT_EQ(routes[4]->pattern, "/orders/:id<int>");
    EXPECT_EQ(routes[4]->method, method::get);
}

struct greeter {
    std::string greeting = "hello";
    static void routes(controller_routes<greeter>& r) {
        r.prefix("/greet");
        r.get("/:name", &greeter::greet);
        r.post("/", &greeter::create, {.max_body = 16});
    }
    asio::awaitable<response> greet(request& req) {
        co_return response::text(greeting + ", " + std::string(req.param("name")));
    }
    asio::awaitable<response> create(request&) { co_return response(status::created); }
};

TEST(router, mounts_a_controller_under_its_prefix) {
    router r;
    greeter g;
    mount(r, g);
    EXPECT_EQ(handle(r, method::get, "/greet/ada").body(), "hello, ada");
    EXPECT_EQ(handle(r, method::post, "/greet").status(), status::created);
    ASSERT_EQ(r.routes().size(), 2u);
    EXPECT_EQ(r.routes()[1]->max_body, 16u);
}

}  // namespace
}  // namespace keel::http
