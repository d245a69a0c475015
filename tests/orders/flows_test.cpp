// keel-orders' fulfilment and verification flows in a unit test: the service's own
// registrations (orders::add_services), its signals and processes, in virtual time, with the
// process store and the order and user documents in memory. No Redis, no HTTP, no threads:
// three days of payment timeout pass in a call.

#include <gtest/gtest.h>

#include <keel/process/testing.hpp>

#include "test_env.hpp"

namespace {

using namespace std::chrono_literals;
using keel::process::instance_status;
using orders::order;
using orders::user;

class orders_flows : public ::testing::Test {
  protected:
    orders_flows() { orders::test::configure(env); }

    keel::ref<order> new_order(std::string id, double total) {
        keel::ref<order> o(id);
        order value{.id = id, .email = "ann@example.com", .address = "1 Quay St", .total = total};
        EXPECT_TRUE(env.run(env.get<orders::order_book>().repository().put(o, value)));
        return o;
    }
    order read(const keel::ref<order>& o) {
        auto got = env.run(env.get<orders::order_book>().repository().get(o));
        if (!got || !*got) throw std::runtime_error("no order " + o.id());
        return **got;
    }
    user read(const keel::ref<user>& u) {
        auto got = env.run(env.get<orders::user_book>().repository().get(u));
        if (!got || !*got) throw std::runtime_error("no user " + u.id());
        return **got;
    }
    orders::payment_signals& payments() { return env.get<orders::payment_signals>(); }

    keel::process::testing::environment env{orders::add_services};
};

TEST_F(orders_flows, a_paid_order_ships_and_completes_when_delivered) {
    auto o = new_order("o-1", 42.5);
    auto flow = env.start(orders::order_fulfillment, o);
    EXPECT_EQ(env.status(flow), instance_status::suspended);

    env.emit(payments().received, o, orders::payment{"tx-1", 42.5});
    EXPECT_EQ(read(o).status, "shipped");
    ASSERT_EQ(read(o).payments.size(), 1u);
    EXPECT_EQ(env.status(flow), instance_status::suspended);  // waits for the delivery

    env.emit(env.get<orders::shipping_signals>().delivered, o);
    EXPECT_EQ(read(o).status, "delivered");
    ASSERT_EQ(env.status(flow), instance_status::completed);
    EXPECT_EQ(env.result(flow)->status, "completed");
}

TEST_F(orders_flows, an_unpaid_order_expires_when_the_payment_timeout_passes) {
    auto o = new_order("o-2", 10);
    auto flow = env.start(orders::order_fulfillment, o);
    env.advance(72h - 1s);
    EXPECT_EQ(env.status(flow), instance_status::suspended);
    EXPECT_EQ(read(o).status, "created");
    env.advance(1s);
    ASSERT_EQ(env.status(flow), instance_status::completed);
    EXPECT_EQ(env.result(flow)->status, "payment_timeout");
    EXPECT_EQ(read(o).status, "expired");
}

TEST_F(orders_flows, a_failed_payment_ends_the_flow) {
    auto o = new_order("o-3", 10);
    auto flow = env.start(orders::order_fulfillment, o);
    env.emit(payments().failed, o);
    EXPECT_EQ(env.result(flow)->status, "payment_failed");
    EXPECT_EQ(read(o).status, "payment_failed");
}

// The payment step locks the order: while someone else holds it, the step waits (in virtual
// time: nothing happens until the holder lets go), then goes on at once.
TEST_F(orders_flows, the_payment_step_waits_for_the_orders_lock) {
    auto o = new_order("o-4", 42.5);
    auto flow = env.start(orders::order_fulfillment, o);
    auto held = env.run(env.get<orders::order_book>().repository().lock(o));
    ASSERT_TRUE(held);
    env.emit(payments().received, o, orders::payment{"tx-4", 42.5});
    EXPECT_EQ(read(o).status, "created");
    // Resumed, its step waiting: leased, and still suspended until the step commits (or
    // outlasts half a lease, or fails an attempt: store_conformance).
    EXPECT_EQ(env.status(flow), instance_status::suspended);
    EXPECT_TRUE(env.snapshot(flow.id()).lease);

    held->release();
    env.settle();
    EXPECT_EQ(read(o).status, "shipped");
    EXPECT_EQ(env.status(flow), instance_status::suspended);
}

TEST_F(orders_flows, a_user_verifies_with_the_code_in_the_outbox) {
    keel::ref<user> u("u-1");
    ASSERT_TRUE(env.run(env.get<orders::user_book>().repository().put(
        u, user{.id = "u-1", .email = "ann@example.com"})));
    auto flow = env.start(orders::email_verification, u);
    auto sent = read(u).outbox;
    ASSERT_EQ(sent.size(), 1u);
    auto& signals = env.get<orders::verification_signals>();

    env.emit(signals.code_submitted, u, std::string("not-the-code"));
    EXPECT_EQ(env.status(flow), instance_status::suspended);
    env.emit(signals.code_submitted, u, sent.front());
    ASSERT_EQ(env.status(flow), instance_status::completed);
    EXPECT_TRUE(env.result(flow)->verified);
    EXPECT_EQ(env.result(flow)->attempts, 2);
    EXPECT_TRUE(read(u).verified);
}

TEST_F(orders_flows, a_verification_times_out) {
    keel::ref<user> u("u-2");
    ASSERT_TRUE(env.run(env.get<orders::user_book>().repository().put(
        u, user{.id = "u-2", .email = "bob@example.com"})));
    auto flow = env.start(orders::email_verification, u);
    env.advance(10min);
    ASSERT_EQ(env.status(flow), instance_status::completed);
    EXPECT_EQ(env.result(flow)->reason, "timeout");
    EXPECT_FALSE(read(u).verified);
}

}  // namespace
