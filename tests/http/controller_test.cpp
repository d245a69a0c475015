// Controllers resolved through keel::di: a scope per request, per-request objects that die
// with the request, fakes swapped in by a test, and mounting errors at start-up.

#include <gtest/gtest.h>

#include <keel/http/controller.hpp>

#include "support.hpp"

namespace keel::http {
namespace {

using test_support::handle;

struct greeting_store {
    virtual ~greeting_store() = default;
    virtual std::string greeting() const { return "hello"; }
};

struct fake_store : greeting_store {
    std::string greeting() const override { return "fake"; }
};

// One per request: counts how many were made.
struct request_context {
    static inline int made = 0;
    int number = ++made;
};

struct greeter_controller {
    using inject = di::inject<greeting_store&, request_context&>;
    greeter_controller(greeting_store& store, request_context& ctx) : store_(store), ctx_(ctx) {}

    static void routes(controller_routes<greeter_controller>& r) {
        r.prefix("/greet");
        r.get("/:name", &greeter_controller::greet);
    }

    asio::awaitable<response> greet(request& req) {
        // The request's scope is the one this controller came from.
        auto& same = req.scope()->get<request_context>();
        co_return response::json(
            {{"text", store_.greeting() + ", " + std::string(req.param("name"))},
             {"request", ctx_.number},
             {"same_scope", &same == &ctx_}});
    }

  private:
    greeting_store& store_;
    request_context& ctx_;
};

di::registry services() {
    di::registry reg;
    reg.singleton<greeting_store>()
        .per_request<request_context>()
        .per_request<greeter_controller>();
    return reg;
}

TEST(controller, is_resolved_in_a_fresh_scope_per_request) {
    auto container = services().build();
    router r;
    mount<greeter_controller>(r, container);
    request_context::made = 0;

    request first(method::get, "/greet/ada");
    auto a = nlohmann::json::parse(handle(r, first).body());
    EXPECT_EQ(a["text"], "hello, ada");
    EXPECT_EQ(a["request"], 1);
    EXPECT_EQ(a["same_scope"], true);
    EXPECT_EQ(first.scope(), nullptr);  // the scope ended with the request

    auto b = nlohmann::json::parse(handle(r, method::get, "/greet/bob").body());
    EXPECT_EQ(b["request"], 2);
}

TEST(controller, a_test_can_replace_a_dependency_with_a_fake) {
    auto reg = services();
    reg.replace<greeting_store>(std::make_shared<fake_store>());
    auto container = reg.build();
    router r;
    mount<greeter_controller>(r, container);
    auto res = nlohmann::json::parse(handle(r, method::get, "/greet/ada").body());
    EXPECT_EQ(res["text"], "fake, ada");
}

TEST(controller, mounting_an_unregistered_controller_fails_at_start_up) {
    di::registry reg;
    reg.singleton<greeting_store>();
    auto container = reg.build();
    router r;
    try {
        mount<greeter_controller>(r, container);
        FAIL() << "expected route_error";
    } catch (const route_error& e) {
        EXPECT_NE(std::string(e.what()).find("greeter_controller"), std::string::npos) << e.what();
    }
    EXPECT_TRUE(r.routes().empty());
}

TEST(controller, a_missing_dependency_fails_when_the_container_is_built) {
    di::registry reg;
    reg.per_request<request_context>().per_request<greeter_controller>();
    try {
        (void)reg.build();
        FAIL() << "expected di::error";
    } catch (const di::error& e) {
        EXPECT_NE(std::string(e.what()).find("greeting_store"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace keel::http
