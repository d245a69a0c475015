// Middleware (request id, error mapping, ordering, per-route, webhook signatures),
// metrics and the built-in endpoints.

#include <gtest/gtest.h>

#include <keel/http/builtin.hpp>
#include <keel/http/middleware.hpp>

#include "support.hpp"

namespace keel::http {
namespace {

using test_support::handle;
using test_support::text;

nlohmann::json body_of(const response& r) {
    return nlohmann::json::parse(r.body());
}

TEST(middleware, request_id_is_generated_and_echoed) {
    router r;
    r.use(request_id());
    r.get("/id", [](request& req) -> asio::awaitable<response> {
        co_return response::text(std::string(req.request_id()));
    });
    auto res = handle(r, method::get, "/id");
    ASSERT_TRUE(res.header("X-Request-Id"));
    EXPECT_EQ(res.header("X-Request-Id")->size(), 32u);
    EXPECT_EQ(res.body(), *res.header("X-Request-Id"));
    EXPECT_NE(handle(r, method::get, "/id").body(), res.body());
}

TEST(middleware, request_id_is_taken_from_the_request_when_sane) {
    router r;
    r.use(request_id());
    r.get("/id", text("x"));
    headers h;
    h.add("X-Request-Id", "abc-123");
    EXPECT_EQ(handle(r, method::get, "/id", h).header("X-Request-Id"), "abc-123");
    headers bad;
    bad.add("X-Request-Id", "has spaces and \"quotes\"");
    auto res = handle(r, method::get, "/id", bad);
    EXPECT_EQ(res.header("X-Request-Id")->size(), 32u);
}

// The span a request is served in, as the handler sees it.
router traced_router() {
    router r;
    r.use(trace_context());
    r.get("/span", [](request& req) -> asio::awaitable<response> {
        const auto& t = req.trace();
        co_return response::json({{"trace", t.trace.hex()},
                                  {"span", t.span.hex()},
                                  {"parent", t.parent.hex()},
                                  {"sampled", t.sampled},
                                  {"state", t.state}});
    });
    return r;
}

TEST(middleware, trace_context_continues_the_callers_trace) {
    auto r = traced_router();
    headers h;
    h.add("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
    h.add("tracestate", "congo=t61rcWkgMzE");
    auto span = body_of(handle(r, method::get, "/span", h));
    EXPECT_EQ(span["trace"], "4bf92f3577b34da6a3ce929d0e0e4736");
    EXPECT_EQ(span["parent"], "00f067aa0ba902b7");
    EXPECT_NE(span["span"], "00f067aa0ba902b7");
    EXPECT_EQ(span["sampled"], false);
    EXPECT_EQ(span["state"], "congo=t61rcWkgMzE");
}

TEST(middleware, trace_context_starts_a_trace_when_the_caller_names_none_or_a_bad_one) {
    auto r = traced_router();
    auto first = body_of(handle(r, method::get, "/span"));
    auto second = body_of(handle(r, method::get, "/span"));
    EXPECT_NE(first["trace"], second["trace"]);
    EXPECT_EQ(first["parent"], "0000000000000000");
    EXPECT_EQ(first["sampled"], true);
    headers h;
    h.add("traceparent", "00-00000000000000000000000000000000-00f067aa0ba902b7-01");
    h.add("tracestate", "congo=t61rcWkgMzE");
    auto bad = body_of(handle(r, method::get, "/span", h));
    EXPECT_NE(bad["trace"], "00000000000000000000000000000000");
    EXPECT_EQ(bad["parent"], "0000000000000000");
    EXPECT_EQ(bad["state"], "");  // tracestate goes with an invalid traceparent
}

TEST(middleware, a_request_without_the_middleware_has_one_stable_span) {
    request req(method::get, "/x");
    auto a = req.trace();
    EXPECT_TRUE(a.valid());
    EXPECT_EQ(req.trace(), a);
}

TEST(middleware, request_id_reaches_router_answers) {
    router r;
    r.use(request_id());
    headers h;
    h.add("X-Request-Id", "trace-1");
    auto res = handle(r, method::get, "/missing", h);
    EXPECT_EQ(res.status(), status::not_found);
    EXPECT_EQ(body_of(res)["request_id"], "trace-1");
}

TEST(middleware, error_mapping_hides_internals_and_carries_the_request_id) {
    router r;
    r.use(request_id());
    r.use(error_mapping());
    r.get("/boom", [](request&) -> asio::awaitable<response> {
        throw std::runtime_error("password=hunter2 in /srv/db.cpp:42");
        co_return response();
    });
    headers h;
    h.add("X-Request-Id", "rid-42");
    auto res = handle(r, method::get, "/boom", h);
    EXPECT_EQ(res.status(), status::internal_server_error);
    EXPECT_EQ(res.header("Content-Type"), "application/problem+json");
    EXPECT_EQ(res.body().find("hunter2"), std::string::npos);
    EXPECT_EQ(res.body().find("db.cpp"), std::string::npos);
    EXPECT_EQ(body_of(res)["request_id"], "rid-42");
}

TEST(middleware, problem_error_from_a_handler_becomes_its_problem) {
    router r;
    r.get("/conflict", [](request&) -> asio::awaitable<response> {
        throw problem_error(status::conflict, "order already paid", "/order");
        co_return response();
    });
    auto res = handle(r, method::get, "/conflict");
    EXPECT_EQ(res.status(), status::conflict);
    EXPECT_EQ(body_of(res)["detail"], "order already paid");
}

middleware tag(std::string name) {
    return [name = std::move(name)](request& req, next n) -> asio::awaitable<response> {
        auto trail = std::string(req.header("X-Trail").value_or("")) + name + ">";
        req.headers().set("X-Trail", trail);
        auto res = co_await n(req);
        res.header("X-Trail", std::string(res.header("X-Trail").value_or("")) + "<" + name);
        co_return res;
    };
}

TEST(middleware, runs_in_order_before_and_after_and_per_route) {
    router r;
    r.use(tag("a"));
    r.use(tag("b"));
    r.get("/plain", [](request& req) -> asio::awaitable<response> {
        co_return response::text(std::string(req.header("X-Trail").value_or("")));
    });
    route_options o;
    o.middleware.push_back(tag("route"));
    r.get(
        "/special",
        [](request& req) -> asio::awaitable<response> {
            co_return response::text(std::string(req.header("X-Trail").value_or("")));
        },
        std::move(o));
    auto plain = handle(r, method::get, "/plain");
    EXPECT_EQ(plain.body(), "a>b>");
    EXPECT_EQ(plain.header("X-Trail"), "<b<a");
    auto special = handle(r, method::get, "/special");
    EXPECT_EQ(special.body(), "a>b>route>");
    EXPECT_EQ(special.header("X-Trail"), "<route<b<a");
}

TEST(middleware, middleware_can_answer_without_calling_the_handler) {
    router r;
    bool called = false;
    r.use(
        [](request&, next) -> asio::awaitable<response> { co_return response(status::forbidden); });
    r.get("/x", [&called](request&) -> asio::awaitable<response> {
        called = true;
        co_return response();
    });
    EXPECT_EQ(handle(r, method::get, "/x").status(), status::forbidden);
    EXPECT_FALSE(called);
}

TEST(signature, matches_the_rfc_4231_vector) {
    EXPECT_EQ(sign("Jefe", "what do ya want for nothing?"),
              "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    EXPECT_TRUE(verify_signature(
        "Jefe", "what do ya want for nothing?",
        "sha256=5BDCC146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"));
    EXPECT_FALSE(verify_signature("Jefe", "what do ya want for nothing!",
                                  sign("Jefe", "what do ya want for nothing?")));
    EXPECT_FALSE(verify_signature("Jefe", "x", "sha256=zz"));
    EXPECT_FALSE(verify_signature("Jefe", "x", sign("Jefe", "x", "sha1=")));
}

TEST(signature, webhook_middleware_rejects_missing_or_wrong_signatures) {
    router r;
    route_options o;
    o.middleware.push_back(
        webhook_signature({.secret = "s3cret", .header = "X-Hub-Signature-256"}));
    r.post("/hook", text("accepted"), std::move(o));
    std::string body = R"({"event":"paid"})";

    headers good;
    good.add("X-Hub-Signature-256", sign("s3cret", body));
    auto ok = handle(r, method::post, "/hook", good, body);
    EXPECT_EQ(ok.status(), status::ok);
    EXPECT_EQ(ok.body(), "accepted");

    headers wrong;
    wrong.add("X-Hub-Signature-256", sign("other", body));
    EXPECT_EQ(handle(r, method::post, "/hook", wrong, body).status(), status::unauthorized);
    EXPECT_EQ(handle(r, method::post, "/hook", {}, body).status(), status::unauthorized);
    EXPECT_EQ(handle(r, method::post, "/hook", good, body + " ").status(), status::unauthorized);
    EXPECT_THROW(webhook_signature({}), std::invalid_argument);
}

TEST(bearer, accepts_exactly_the_token_under_the_bearer_scheme) {
    bearer_check check("s3cret-token");
    EXPECT_TRUE(check("Bearer s3cret-token"));
    EXPECT_TRUE(check("bearer s3cret-token"));  // the scheme is case-insensitive
    EXPECT_FALSE(check("Bearer s3cret-tokeN"));
    EXPECT_FALSE(check("Bearer s3cret-token "));
    EXPECT_FALSE(check("Bearer s3cret"));
    EXPECT_FALSE(check("Bearer "));
    EXPECT_FALSE(check("Basic s3cret-token"));
    EXPECT_FALSE(check("s3cret-token"));
    EXPECT_FALSE(check(""));
    EXPECT_THROW(bearer_check(""), std::invalid_argument);
    EXPECT_THROW(bearer_token(""), std::invalid_argument);
}

TEST(bearer, middleware_answers_401_with_the_challenge_before_the_handler) {
    router r;
    bool reached = false;
    r.group("/admin").use(bearer_token("t0k"));
    r.get("/admin/x", [&](request&) -> asio::awaitable<response> {
        reached = true;
        co_return response::text("in");
    });
    auto refused = handle(r, method::get, "/admin/x");
    EXPECT_EQ(refused.status(), status::unauthorized);
    EXPECT_EQ(refused.headers().get("WWW-Authenticate").value_or(""), "Bearer");
    EXPECT_FALSE(reached);
    headers ok;
    ok.add("Authorization", "Bearer t0k");
    EXPECT_EQ(handle(r, method::get, "/admin/x", ok).body(), "in");
    EXPECT_TRUE(reached);
}

TEST(metrics, counts_requests_by_route_and_status_and_renders_prometheus_text) {
    router r;
    metrics m;
    health h;
    install_defaults(r, m, h);
    r.get("/orders/:id<int>", text("order"));
    for (int i = 0; i < 3; ++i) handle(r, method::get, "/orders/" + std::to_string(i));
    handle(r, method::get, "/orders/x");
    handle(r, method::get, "/nowhere");

    const route_info* route = r.routes().back();
    EXPECT_EQ(m.requests(route, status::ok), 3u);
    EXPECT_EQ(m.requests(route, status::bad_request), 1u);
    EXPECT_EQ(m.requests(nullptr, status::not_found), 1u);

    auto text = m.render();
    EXPECT_NE(text.find("# TYPE keel_http_requests_total counter"), std::string::npos);
    EXPECT_NE(
        text.find(
            R"(keel_http_requests_total{method="GET",route="/orders/:id<int>",status="200"} 3)"),
        std::string::npos)
        << text;
    EXPECT_NE(text.find(R"(keel_http_requests_total{method="",route="unmatched",status="404"} 1)"),
              std::string::npos);
    EXPECT_NE(
        text.find(
            R"(keel_http_request_duration_seconds_bucket{method="GET",route="/orders/:id<int>",le="+Inf"} 4)"),
        std::string::npos);
    EXPECT_NE(
        text.find(
            R"(keel_http_request_duration_seconds_count{method="GET",route="/orders/:id<int>"} 4)"),
        std::string::npos);
    EXPECT_NE(text.find("keel_http_connections_open 0"), std::string::npos);
    EXPECT_NE(text.find("keel_http_requests_in_flight 0"), std::string::npos);

    auto served = handle(r, method::get, "/metrics");
    EXPECT_EQ(served.status(), status::ok);
    EXPECT_EQ(served.header("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
    EXPECT_NE(served.body().find("keel_http_requests_total"), std::string::npos);
}

TEST(metrics, sources_add_their_text_and_a_failing_one_hides_nothing_else) {
    metrics m;
    health h;
    router r;
    add_builtin_routes(r, m, h);
    m.add_source([]() -> asio::awaitable<std::string> {
        throw std::runtime_error("store down");
        co_return std::string();
    });
    m.add_source([]() -> asio::awaitable<std::string> { co_return "keel_extra_total 7\n"; });
    auto res = handle(r, method::get, "/metrics");
    EXPECT_EQ(res.status(), status::ok);
    EXPECT_NE(res.body().find("# keel: a metrics source failed: store down\n"), std::string::npos)
        << res.body();
    EXPECT_NE(res.body().find("keel_extra_total 7\n"), std::string::npos) << res.body();
    EXPECT_NE(res.body().find("keel_http_connections_open"), std::string::npos) << res.body();
}

// A credential sent in a query string is never written to a log, however its name is
// spelt; everything else of the target is logged as sent.
TEST(loggable_target, hides_the_values_of_credentials_only) {
    auto shown = [](std::string target) { return loggable_target(request(method::get, target)); };
    EXPECT_EQ(shown("/admin/stats"), "/admin/stats");
    EXPECT_EQ(shown("/admin/instances?status=failed&limit=5"),
              "/admin/instances?status=failed&limit=5");
    EXPECT_EQ(shown("/admin/stats?token=s3cret"), "/admin/stats?token=***");
    EXPECT_EQ(shown("/x?access_token=a&b=1&API_KEY=k&sig=s&password=p&code=123456"),
              "/x?access_token=***&b=1&API_KEY=***&sig=***&password=***&code=***");
    EXPECT_EQ(shown("/x?%74oken=s3cret&t%6Fken=s3cret"), "/x?%74oken=***&t%6Fken=***");
    EXPECT_EQ(shown("/x?token"), "/x?token");  // no value to hide
    EXPECT_EQ(shown("/x?a=1&&token=s&"), "/x?a=1&&token=***&");
    EXPECT_EQ(shown("/x?%zz=1"), "/x?%zz=***");  // a name that does not decode: hidden
}

TEST(builtin, healthz_and_readyz_reflect_checks_and_draining) {
    router r;
    metrics m;
    health h;
    bool redis_up = true;
    h.add_check("redis", [&redis_up]() -> asio::awaitable<keel::expected<void, std::string>> {
        if (redis_up) co_return keel::expected<void, std::string>{};
        co_return keel::unexpected(std::string("connection refused"));
    });
    install_defaults(r, m, h);

    EXPECT_EQ(handle(r, method::get, "/healthz").status(), status::ok);
    auto ready = handle(r, method::get, "/readyz");
    EXPECT_EQ(ready.status(), status::ok);
    EXPECT_EQ(body_of(ready)["checks"]["redis"], "ok");

    redis_up = false;
    auto down = handle(r, method::get, "/readyz");
    EXPECT_EQ(down.status(), status::service_unavailable);
    EXPECT_EQ(body_of(down)["checks"]["redis"], "connection refused");

    redis_up = true;
    h.set_draining();
    EXPECT_EQ(handle(r, method::get, "/readyz").status(), status::service_unavailable);
    EXPECT_EQ(handle(r, method::get, "/healthz").status(), status::ok);
}

}  // namespace
}  // namespace keel::http
