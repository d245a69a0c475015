// The optional signal route: POST <prefix>/<signal path> emits the matching signal with the
// body as payload and the Idempotency-Key header as key; unknown paths are 404, payloads of
// the wrong type 400 with nothing emitted. The emitter here records what it is given (the
// delivery itself is the engine's, tested with the signals).

#include <gtest/gtest.h>

#include <keel/http/signal_route.hpp>

#include "support.hpp"

namespace keel::http {
namespace {

using test_support::handle;

struct order {
    static constexpr std::string_view model_name = "order";
};
struct paid {
    std::string tx;
    double amount = 0;
    NLOHMANN_DEFINE_TYPE_INTRUSIVE(paid, tx, amount)
};
struct payment_signals : signals::signal_group {
    signals::signal<paid, order> received{this, "/payment/:order/received"};
    signals::signal<void, order> failed{this, "/payment/:order/failed"};
};

struct recording_emitter final : signals::emitter {
    std::vector<signals::emit_request> seen;
    asio::awaitable<signals::emit_result> emit(signals::emit_request r) override {
        seen.push_back(std::move(r));
        co_return signals::emit_result{3, seen.size() > 1};
    }
};

struct signal_route_test : ::testing::Test {
    payment_signals payments;
    recording_emitter emitter;
    router r;
    void SetUp() override {
        payments.attach(emitter);
        add_signal_route(r, {&payments}, {.prefix = "/ops/signals"});
    }
    response post(std::string target, std::string body, headers h = {}) {
        h.set("Content-Type", "application/json");
        return handle(r, method::post, std::move(target), std::move(h), std::move(body));
    }
};

TEST_F(signal_route_test, emits_the_signal_whose_pattern_matches_the_path) {
    headers h;
    h.set("Idempotency-Key", "tx-1");
    auto res = post("/ops/signals/payment/o-1/received", R"({"tx":"tx-1","amount":2})", h);
    ASSERT_EQ(res.status(), status::ok) << res.body();
    EXPECT_EQ(nlohmann::json::parse(res.body()),
              (nlohmann::json{{"delivered", 3}, {"duplicate", false}}));
    ASSERT_EQ(emitter.seen.size(), 1u);
    EXPECT_EQ(emitter.seen[0].path, "/payment/o-1/received");
    EXPECT_EQ(emitter.seen[0].key, "tx-1");
    EXPECT_EQ(emitter.seen[0].payload["tx"], "tx-1");
    EXPECT_EQ(emitter.seen[0].subscriptions, std::vector<std::string>{"/payment/o-1/received"});
}

TEST_F(signal_route_test, emit_options_take_the_idempotency_key_else_the_natural_key) {
    router hooks;
    hooks.post("/hook", [](request& req) -> asio::awaitable<response> {
        co_return response::json({{"key", emit_options_from(req, "delivered/o-1").key}});
    });
    headers with;
    with.set("Idempotency-Key", "retry-7");
    auto keyed = handle(hooks, method::post, "/hook", with, "");
    EXPECT_EQ(nlohmann::json::parse(keyed.body())["key"], "retry-7");
    auto plain = handle(hooks, method::post, "/hook", {}, "");
    EXPECT_EQ(nlohmann::json::parse(plain.body())["key"], "delivered/o-1");
}

TEST_F(signal_route_test, a_signal_without_payload_takes_an_empty_body) {
    auto res = post("/ops/signals/payment/o-1/failed", "");
    ASSERT_EQ(res.status(), status::ok) << res.body();
    ASSERT_EQ(emitter.seen.size(), 1u);
    EXPECT_TRUE(emitter.seen[0].payload.is_null());
    EXPECT_TRUE(emitter.seen[0].key.empty());
}

TEST_F(signal_route_test, an_unknown_path_is_404) {
    auto res = post("/ops/signals/payment/o-1/refunded", "{}");
    EXPECT_EQ(res.status(), status::not_found);
    EXPECT_TRUE(emitter.seen.empty());
}

TEST_F(signal_route_test, a_payload_of_the_wrong_type_is_400_and_nothing_is_emitted) {
    auto wrong = post("/ops/signals/payment/o-1/received", R"({"tx": 7})");
    EXPECT_EQ(wrong.status(), status::bad_request) << wrong.body();
    auto broken = post("/ops/signals/payment/o-1/received", R"({"tx": )");
    EXPECT_EQ(broken.status(), status::bad_request) << broken.body();
    EXPECT_TRUE(emitter.seen.empty());
}

}  // namespace
}  // namespace keel::http
