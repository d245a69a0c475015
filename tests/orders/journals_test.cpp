// keel-orders' recorded journals: real journals of its flows, kept in tests/orders/journals/,
// replayed against today's code. A change to the flows that would park instances in flight
// (an operation added, removed, renamed or reordered without ctx.patched) fails here.
//
// The journals are recorded by this test: KEEL_RECORD_JOURNALS=1 runs each flow in the
// testing environment and writes its journal (the format of `keel journal ID --json`)
// instead of replaying it. Record again only for a new flow or case, never to make a
// failing replay pass: the old journals are what instances in production have.

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <keel/process/testing.hpp>

#include "test_env.hpp"

namespace {

using namespace std::chrono_literals;
using orders::order;
using orders::user;

class orders_journals : public ::testing::Test {
  protected:
    orders_journals() { orders::test::configure(env); }

    static bool recording() { return std::getenv("KEEL_RECORD_JOURNALS") != nullptr; }
    static std::string file(const std::string& name) {
        return std::string(KEEL_ORDERS_JOURNALS) + "/" + name + ".json";
    }
    void record(const std::string& name, const std::string& id) {
        std::ofstream(file(name)) << nlohmann::json{{"entries", env.journal(id)}}.dump(2) << "\n";
    }
    nlohmann::json recorded(const std::string& name) {
        std::ifstream in(file(name));
        if (!in) throw std::runtime_error("no recorded journal " + file(name));
        return nlohmann::json::parse(in);
    }
    template <class... P>
    void expect_replays(const std::string& name, const auto& definition, const P&... params) {
        auto report = keel::process::testing::replay(definition, env, recorded(name), params...);
        EXPECT_TRUE(report.ok()) << name << ": " << report.mismatch.value_or("");
    }

    keel::ref<order> new_order(const std::string& id) {
        keel::ref<order> o(id);
        order value{.id = id, .email = "ann@example.com", .address = "1 Quay St", .total = 42.5};
        EXPECT_TRUE(env.run(env.get<orders::order_book>().repository().put(o, value)));
        return o;
    }
    keel::ref<user> new_user(const std::string& id) {
        keel::ref<user> u(id);
        EXPECT_TRUE(env.run(env.get<orders::user_book>().repository().put(
            u, user{.id = id, .email = "ann@example.com"})));
        return u;
    }

    keel::process::testing::environment env{orders::add_services};
};

TEST_F(orders_journals, paid_and_shipped_waiting_for_delivery) {
    keel::ref<order> o("o-1");
    if (recording()) {
        new_order("o-1");
        auto flow = env.start(orders::order_fulfillment, o);
        env.emit(env.get<orders::payment_signals>().received, o, orders::payment{"tx-1", 42.5});
        return record("fulfilment-shipped", flow.id());
    }
    expect_replays("fulfilment-shipped", orders::order_fulfillment, o);
}

TEST_F(orders_journals, delivered) {
    keel::ref<order> o("o-2");
    if (recording()) {
        new_order("o-2");
        auto flow = env.start(orders::order_fulfillment, o);
        env.emit(env.get<orders::payment_signals>().received, o, orders::payment{"tx-2", 42.5});
        env.emit(env.get<orders::shipping_signals>().delivered, o);
        return record("fulfilment-delivered", flow.id());
    }
    expect_replays("fulfilment-delivered", orders::order_fulfillment, o);
}

TEST_F(orders_journals, payment_timed_out) {
    keel::ref<order> o("o-3");
    if (recording()) {
        new_order("o-3");
        auto flow = env.start(orders::order_fulfillment, o);
        env.advance(72h);
        return record("fulfilment-expired", flow.id());
    }
    expect_replays("fulfilment-expired", orders::order_fulfillment, o);
}

TEST_F(orders_journals, verified_after_a_wrong_code) {
    keel::ref<user> u("u-1");
    if (recording()) {
        new_user("u-1");
        auto flow = env.start(orders::email_verification, u);
        auto& signals = env.get<orders::verification_signals>();
        env.emit(signals.code_submitted, u, std::string("not-the-code"));
        env.emit(signals.code_submitted, u,
                 env.run(env.get<orders::user_book>().repository().get(u))->value().outbox.front());
        return record("verification-verified", flow.id());
    }
    expect_replays("verification-verified", orders::email_verification, u);
}

}  // namespace
