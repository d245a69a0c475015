// keel-payments-sim's state without HTTP: the test cards, the --rate window (a sliding
// second, on a time the test moves) and the charge book's idempotency.

#include <gtest/gtest.h>

#include <chrono>

#include "payments_sim/cards.hpp"
#include "payments_sim/charges.hpp"
#include "payments_sim/rate_window.hpp"

namespace {

using namespace std::chrono_literals;
using billing::sim::charge_book;
using billing::sim::charge_outcome;
using billing::sim::charge_request;
using billing::sim::charge_status;
using billing::sim::outcome_for;
using billing::sim::rate_window;

const auto t0 = std::chrono::steady_clock::time_point() + 1h;

charge_request on(std::string card, std::string reference = "inv-1") {
    return {std::move(card), 1000, "eur", std::move(reference)};
}

TEST(billing_payments_sim_cards, each_test_card_answers_as_documented) {
    EXPECT_EQ(outcome_for("4242424242424242", 1), charge_status::succeeded);
    EXPECT_EQ(outcome_for("4000000000000002", 1), charge_status::declined);
    EXPECT_EQ(outcome_for("4000000000000077", 1), charge_status::pending);
    EXPECT_EQ(outcome_for("4000000000009995", 1), charge_status::declined);
    EXPECT_EQ(outcome_for("4000000000009995", 2), charge_status::declined);
    EXPECT_EQ(outcome_for("4000000000009995", 3), charge_status::succeeded);
    EXPECT_EQ(outcome_for("4000000000009995", 9), charge_status::succeeded);
    EXPECT_EQ(outcome_for("5555555555554444", 1), charge_status::declined);  // unknown
}

TEST(billing_payments_sim_cards, a_card_number_is_12_to_19_digits) {
    EXPECT_TRUE(billing::sim::well_formed_card("4242424242424242"));
    EXPECT_TRUE(billing::sim::well_formed_card("123456789012"));
    EXPECT_FALSE(billing::sim::well_formed_card("12345678901"));
    EXPECT_FALSE(billing::sim::well_formed_card("12345678901234567890"));
    EXPECT_FALSE(billing::sim::well_formed_card("4242 4242 4242 4242"));
    EXPECT_FALSE(billing::sim::well_formed_card(""));
    EXPECT_EQ(billing::sim::last4("4242424242424242"), "4242");
}

TEST(billing_payments_sim_rate_window, allows_n_in_any_second_sliding) {
    rate_window w(3);
    EXPECT_TRUE(w.try_take(t0));
    EXPECT_TRUE(w.try_take(t0 + 400ms));
    EXPECT_TRUE(w.try_take(t0 + 800ms));
    EXPECT_FALSE(w.try_take(t0 + 900ms));   // 3 in (t0 - 100ms, t0 + 900ms]
    EXPECT_FALSE(w.try_take(t0 + 999ms));   // refusals are not counted ...
    EXPECT_TRUE(w.try_take(t0 + 1000ms));   // ... and the first one has left the window
    EXPECT_FALSE(w.try_take(t0 + 1100ms));  // a fixed window would allow this one
    EXPECT_TRUE(w.try_take(t0 + 1400ms));
    EXPECT_TRUE(w.try_take(t0 + 10s));
}

TEST(billing_payments_sim_charge_book, a_replay_answers_the_same_charge_and_charges_nothing) {
    charge_book book(20);
    auto first = book.charge("k1", on("4242424242424242"), t0);
    ASSERT_EQ(first.outcome, charge_outcome::created);
    EXPECT_TRUE(first.made->id.starts_with("ch_"));
    EXPECT_EQ(first.made->status, charge_status::succeeded);
    auto again = book.charge("k1", on("4242424242424242"), t0 + 1ms);
    ASSERT_EQ(again.outcome, charge_outcome::replayed);
    EXPECT_EQ(again.made->id, first.made->id);
    EXPECT_EQ(book.list(std::nullopt).size(), 1u);
    EXPECT_EQ(first.made->requests, 1);
    EXPECT_EQ(again.made->requests, 2);
    EXPECT_EQ(book.list(std::nullopt)[0].requests, 2) << "the listing counts the replay";
}

TEST(billing_payments_sim_charge_book, the_same_key_for_another_request_is_refused) {
    charge_book book(20);
    ASSERT_EQ(book.charge("k1", on("4242424242424242"), t0).outcome, charge_outcome::created);
    auto other = on("4242424242424242");
    other.amount = 1001;
    auto reused = book.charge("k1", other, t0);
    EXPECT_EQ(reused.outcome, charge_outcome::key_reused);
    EXPECT_FALSE(reused.made);
    EXPECT_EQ(book.charge("k1", on("4242424242424242", "inv-2"), t0).outcome,
              charge_outcome::key_reused);
    EXPECT_EQ(book.list(std::nullopt).size(), 1u);
}

TEST(billing_payments_sim_charge_book, the_retry_card_counts_its_own_charges_not_replays) {
    charge_book book(20);
    EXPECT_EQ(book.charge("a", on("4000000000009995"), t0).made->status, charge_status::declined);
    // Replays and other cards do not move its count.
    EXPECT_EQ(book.charge("a", on("4000000000009995"), t0).made->status, charge_status::declined);
    EXPECT_EQ(book.charge("x", on("4242424242424242"), t0).made->status, charge_status::succeeded);
    EXPECT_EQ(book.charge("b", on("4000000000009995"), t0).made->status, charge_status::declined);
    EXPECT_EQ(book.charge("c", on("4000000000009995"), t0).made->status, charge_status::succeeded);
}

TEST(billing_payments_sim_charge_book, past_the_rate_nothing_is_charged_but_replays_are_answered) {
    charge_book book(2);
    ASSERT_EQ(book.charge("a", on("4242424242424242"), t0).outcome, charge_outcome::created);
    ASSERT_EQ(book.charge("b", on("4242424242424242"), t0).outcome, charge_outcome::created);
    EXPECT_EQ(book.charge("c", on("4242424242424242"), t0).outcome, charge_outcome::rate_limited);
    EXPECT_EQ(book.charge("a", on("4242424242424242"), t0).outcome, charge_outcome::replayed);
    EXPECT_EQ(book.list(std::nullopt).size(), 2u);
    // The refused key was not remembered: it charges once the window has room.
    EXPECT_EQ(book.charge("c", on("4242424242424242"), t0 + 1s).outcome, charge_outcome::created);
}

TEST(billing_payments_sim_charge_book, settles_a_pending_charge_once) {
    charge_book book(20);
    auto pending = book.charge("p", on("4000000000000077"), t0);
    ASSERT_EQ(pending.made->status, charge_status::pending);
    auto paid = book.charge("q", on("4242424242424242"), t0);
    EXPECT_TRUE(book.settle(pending.made->id));
    EXPECT_FALSE(book.settle(pending.made->id));  // already succeeded
    EXPECT_FALSE(book.settle(paid.made->id));     // never pending
    EXPECT_FALSE(book.settle("ch_unknown"));
    EXPECT_EQ(book.charge("p", on("4000000000000077"), t0).made->status,
              charge_status::succeeded);  // a replay answers the charge as it is now
}

TEST(billing_payments_sim_charge_book, lists_by_reference_in_creation_order) {
    charge_book book(20);
    auto a = book.charge("1", on("4242424242424242", "inv-1"), t0);
    auto b = book.charge("2", on("4000000000000002", "inv-2"), t0);
    auto c = book.charge("3", on("4000000000000002", "inv-1"), t0);
    auto inv1 = book.list("inv-1");
    ASSERT_EQ(inv1.size(), 2u);
    EXPECT_EQ(inv1[0].id, a.made->id);
    EXPECT_EQ(inv1[1].id, c.made->id);
    EXPECT_TRUE(book.list("inv-9").empty());
    auto all = book.list(std::nullopt);
    ASSERT_EQ(all.size(), 3u);
    EXPECT_EQ(all[1].id, b.made->id);
}

}  // namespace
