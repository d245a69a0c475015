// examples/billing end to end: keel-billing and keel-payments-sim, the real binaries, on a
// real redis-server, every call over TLS (billing_stack.hpp). Each test card takes its path
// (paid; declined until the invoice fails and the subscription is cancelled; declined twice
// then paid; pending until the provider's signed webhook), a cancel refunds the unused part
// of the paid period once, a plan change bills the new price from the next period, unsigned
// webhooks are refused, and under load, a kill -9, a provider outage and two workers no
// invoice is lost nor charged twice (counted at the provider) and the provider's rate holds.
// Every wait polls with a deadline; each test has its own Redis, workers and provider.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <keel/http/client.hpp>
#include <keel/http/middleware.hpp>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "billing_stack.hpp"

namespace {

using namespace std::chrono_literals;
using billing_e2e::answer;
using billing_e2e::billing_stack;
using billing_e2e::json;
using billing_e2e::stack_options;
using sys_clock = std::chrono::system_clock;
using steady = std::chrono::steady_clock;

constexpr auto card_ok = "4242424242424242";
constexpr auto card_declined = "4000000000000002";
constexpr auto card_third_time = "4000000000009995";
constexpr auto card_pending = "4000000000000077";

std::string nth(const std::string& prefix, int i) {
    return prefix + "-" + std::to_string(i);
}

std::chrono::milliseconds left(steady::time_point deadline) {
    auto d = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now());
    return std::max(d, 1ms);
}

// A customer and a subscription of it, both created (201).
void subscribe(billing_stack& s, const std::string& sub, const std::string& customer,
               const std::string& card, const std::string& plan = "basic", int at = 0) {
    auto c = s.create_customer(customer, at);
    ASSERT_TRUE(c.status == 201 || c.status == 200) << c.describe();
    auto r = s.subscribe(sub, customer, plan, card, at);
    ASSERT_EQ(r.status, 201) << r.describe();
}

// Polls GET /invoices/<id> until `accept` holds.
std::optional<json> wait_invoice(billing_stack& s, const std::string& id,
                                 const std::function<bool(const json&)>& accept,
                                 std::chrono::milliseconds timeout, const std::string& what) {
    std::string last;
    auto found = s.poll("/invoices/" + id, accept, timeout, last);
    if (!found) ADD_FAILURE() << "invoice " << id << " never " << what << "; " << last;
    return found;
}

std::optional<json> wait_paid(billing_stack& s, const std::string& id,
                              std::chrono::milliseconds timeout = 15s) {
    return wait_invoice(
        s, id, [](const json& i) { return i.value("status", "") == "paid"; }, timeout, "paid");
}

std::optional<json> wait_subscription(billing_stack& s, const std::string& id,
                                      const std::string& status,
                                      std::chrono::milliseconds timeout = 15s) {
    std::string last;
    auto found = s.poll(
        "/subscriptions/" + id, [&](const json& x) { return x.value("status", "") == status; },
        timeout, last, 10ms);
    if (!found) ADD_FAILURE() << "subscription " << id << " never " << status << "; " << last;
    return found;
}

// The statuses of the provider's charges for `reference`, in creation order.
std::vector<std::string> statuses(const json& charges) {
    std::vector<std::string> out;
    for (const auto& c : charges) out.push_back(c.value("status", ""));
    return out;
}

std::vector<std::string> ids(const json& charges) {
    std::vector<std::string> out;
    for (const auto& c : charges) out.push_back(c.value("id", ""));
    return out;
}

// Every invoice `<sub>-1` of the subscriptions `subs` paid on its first attempt with one
// charge, and the provider holding exactly that one charge, succeeded, for it.
void expect_each_paid_once(billing_stack& s, const std::vector<std::string>& subs,
                           std::chrono::milliseconds timeout) {
    auto deadline = steady::now() + timeout;
    for (const auto& sub : subs) {
        auto id = sub + "-1";
        auto paid = wait_paid(s, id, left(deadline));
        ASSERT_TRUE(paid) << "not every invoice was paid in time";
        EXPECT_EQ(paid->value("attempts", 0), 1) << paid->dump();
        ASSERT_EQ((*paid)["charges"].size(), 1u) << paid->dump();
        auto at_provider = s.charges(id);
        ASSERT_EQ(at_provider.size(), 1u)
            << id << " charged " << at_provider.size() << " times: " << at_provider.dump();
        EXPECT_EQ(at_provider[0].value("status", ""), "succeeded") << at_provider.dump();
        EXPECT_EQ(at_provider[0].value("id", ""), (*paid)["charges"][0]) << at_provider.dump();
        EXPECT_EQ(at_provider[0].value("amount", 0), 1000) << at_provider.dump();
    }
    EXPECT_EQ(s.charges().size(), subs.size()) << "charges with no invoice at the provider";
}

// ---- each test card's path ----

// --period 5s rather than 2s: the declined card's four attempts take the dunning's 3 s, and
// the subscription must be seen past_due before its period ends.
TEST(billing_e2e, each_test_card_takes_its_path_over_https) {
    billing_stack s({.billing_args = {"--period", "5s", "--dunning", "1s,1s,1s"},
                     .sim_args = {"--pending-delay", "2s"}});
    auto started = sys_clock::now();
    ASSERT_NO_FATAL_FAILURE(subscribe(s, "s-ok", "c-ok", card_ok));
    ASSERT_NO_FATAL_FAILURE(subscribe(s, "s-declined", "c-declined", card_declined));
    ASSERT_NO_FATAL_FAILURE(subscribe(s, "s-third", "c-third", card_third_time));
    ASSERT_NO_FATAL_FAILURE(subscribe(s, "s-pending", "c-pending", card_pending));

    // Pending: charged once, the invoice open while the provider says pending...
    auto pending = wait_invoice(
        s, "s-pending-1", [](const json& i) { return i.value("attempts", 0) == 1; }, 10s,
        "charged");
    ASSERT_TRUE(pending);
    EXPECT_EQ(pending->value("status", ""), "open") << pending->dump();
    auto pending_charges = s.charges("s-pending-1");
    ASSERT_EQ(pending_charges.size(), 1u) << pending_charges.dump();
    EXPECT_EQ(pending_charges[0].value("status", ""), "pending") << pending_charges.dump();
    // ... then paid by the sim's signed webhook, with no other charge.
    auto paid_late = wait_paid(s, "s-pending-1", 10s);
    ASSERT_TRUE(paid_late);
    EXPECT_EQ(paid_late->value("attempts", 0), 1) << paid_late->dump();
    EXPECT_EQ((*paid_late)["charges"], json::array({pending_charges[0]["id"]}))
        << paid_late->dump();
    EXPECT_EQ(statuses(s.charges("s-pending-1")), std::vector<std::string>{"succeeded"});

    // 4242...: paid at the first attempt.
    auto ok = wait_paid(s, "s-ok-1");
    ASSERT_TRUE(ok);
    EXPECT_EQ(ok->value("attempts", 0), 1) << ok->dump();
    EXPECT_EQ(ok->value("amount", 0), 1000) << ok->dump();
    auto ok_charges = s.charges("s-ok-1");
    EXPECT_EQ(statuses(ok_charges), std::vector<std::string>{"succeeded"}) << ok_charges.dump();
    EXPECT_EQ((*ok)["charges"], json(ids(ok_charges)));
    auto ok_sub = s.subscription("s-ok");
    EXPECT_EQ(ok_sub.value.value("status", ""), "active") << ok_sub.describe();

    // 9995: declined twice, paid at the third attempt (after two dunning waits).
    auto third = wait_paid(s, "s-third-1");
    ASSERT_TRUE(third);
    EXPECT_EQ(third->value("attempts", 0), 3) << third->dump();
    auto third_charges = s.charges("s-third-1");
    EXPECT_EQ(statuses(third_charges),
              (std::vector<std::string>{"declined", "declined", "succeeded"}))
        << third_charges.dump();
    EXPECT_EQ((*third)["charges"], json(ids(third_charges)));

    // 0002: declined four times (1 + 3 dunning retries): the invoice failed, the subscription
    // past_due, then cancelled at the end of its period, with no second invoice.
    auto past_due = wait_subscription(s, "s-declined", "past_due", 10s);
    ASSERT_TRUE(past_due);
    auto failed = s.invoice("s-declined-1");
    EXPECT_EQ(failed.value.value("status", ""), "failed") << failed.describe();
    EXPECT_EQ(failed.value.value("attempts", 0), 4) << failed.describe();
    auto declined_charges = s.charges("s-declined-1");
    EXPECT_EQ(statuses(declined_charges), std::vector<std::string>(4, "declined"))
        << declined_charges.dump();
    EXPECT_EQ(failed.value["charges"], json(ids(declined_charges)));
    auto cancelled = wait_subscription(s, "s-declined", "cancelled", 10s);
    ASSERT_TRUE(cancelled);
    EXPECT_GE(sys_clock::now() - started, 5s) << "cancelled before its period ended";
    EXPECT_EQ(cancelled->value("period", 0), 1) << cancelled->dump();
    EXPECT_EQ((*cancelled)["invoices"].size(), 1u) << cancelled->dump();
    EXPECT_EQ(s.invoice("s-declined-2").status, 404);
    EXPECT_EQ(s.charges("s-declined-2").size(), 0u);
}

// ---- cancel ----

// A 10 s period: the cancel must land in the first period, after its invoice is paid.
TEST(billing_e2e, a_cancel_refunds_the_unused_part_of_the_paid_period_once) {
    constexpr double period_ms = 10'000;
    billing_stack s({.billing_args = {"--period", "10s", "--dunning", "1s,1s,1s"}});
    auto before_start = sys_clock::now();
    ASSERT_NO_FATAL_FAILURE(subscribe(s, "s-1", "c-1", card_ok));
    ASSERT_TRUE(wait_paid(s, "s-1-1", 8s));
    auto seen_paid = sys_clock::now();  // the period began before this

    std::this_thread::sleep_for(1s);  // a refund visibly below the whole amount
    auto before_cancel = sys_clock::now();
    auto first = s.cancel("s-1", "cancel-key-1");
    auto after_cancel = sys_clock::now();
    ASSERT_EQ(first.status, 200) << first.describe();
    EXPECT_EQ(first.value.value("status", ""), "cancelled") << first.describe();
    ASSERT_TRUE(first.value.contains("refund") && first.value["refund"].is_number_integer())
        << "the refund must be integer cents: " << first.describe();
    auto refund = first.value["refund"].get<std::int64_t>();

    // The unused part of the period is between what the earliest possible start and latest
    // possible cancel leave, and what the latest possible start and earliest cancel leave.
    using ms = std::chrono::duration<double, std::milli>;
    auto least = ms(before_start - after_cancel).count() + period_ms;
    auto most = ms(seen_paid - before_cancel).count() + period_ms;
    auto low = std::clamp<std::int64_t>(std::floor(1000 * least / period_ms), 0, 1000);
    auto high = std::clamp<std::int64_t>(std::floor(1000 * most / period_ms), 0, 1000);
    EXPECT_GE(refund, low) << first.describe();
    EXPECT_LE(refund, high) << first.describe();
    EXPECT_LT(refund, 1000) << "a second of the period was used";
    EXPECT_GT(refund, 0);

    // The same request again (its Idempotency-Key) gets the first answer; another is 409.
    auto replay = s.cancel("s-1", "cancel-key-1");
    EXPECT_EQ(replay.status, 200) << replay.describe();
    EXPECT_EQ(replay.value, first.value) << replay.describe();
    auto second = s.cancel("s-1", "cancel-key-2");
    EXPECT_EQ(second.status, 409) << second.describe();
    auto keyless = s.cancel("s-1");
    EXPECT_EQ(keyless.status, 409) << keyless.describe();

    auto sub = s.subscription("s-1");
    EXPECT_EQ(sub.value.value("status", ""), "cancelled") << sub.describe();
    EXPECT_EQ(s.invoice("s-1-1").value.value("status", ""), "paid");
    EXPECT_EQ(s.charges().size(), 1u) << "a refund is not a charge";
    EXPECT_EQ(s.cancel("s-none").status, 404);
}

// ---- plan change ----

TEST(billing_e2e, a_plan_change_bills_the_new_price_from_the_next_period) {
    billing_stack s({.billing_args = {"--period", "2s", "--dunning", "1s,1s,1s"}});
    ASSERT_NO_FATAL_FAILURE(subscribe(s, "s-1", "c-1", card_ok, "basic"));
    auto first = wait_paid(s, "s-1-1", 8s);
    ASSERT_TRUE(first);
    EXPECT_EQ(first->value("amount", 0), 1000) << first->dump();

    auto same = s.change_plan("s-1", "basic");
    EXPECT_EQ(same.status, 409) << same.describe();
    auto unknown = s.change_plan("s-1", "gold");
    EXPECT_EQ(unknown.status, 400) << unknown.describe();
    EXPECT_EQ(unknown.value.value("field", ""), "/plan") << unknown.describe();

    auto changed = s.change_plan("s-1", "pro", "plan-key-1");
    ASSERT_EQ(changed.status, 200) << changed.describe();
    EXPECT_EQ(changed.value.value("plan", ""), "pro") << changed.describe();
    auto effective = changed.value.value("effective_period", std::int64_t{0});
    ASSERT_GE(effective, 2) << changed.describe();
    auto replay = s.change_plan("s-1", "pro", "plan-key-1");
    EXPECT_EQ(replay.status, 200) << replay.describe();
    EXPECT_EQ(replay.value, changed.value);
    auto again = s.change_plan("s-1", "pro", "plan-key-2");
    EXPECT_EQ(again.status, 409) << "pro is the plan of the next period already: "
                                 << again.describe();
    EXPECT_EQ(again.value.value("detail", ""),
              "subscription s-1 is already on plan pro (now or from the next period)")
        << "in the client's terms, no internal ids: " << again.describe();

    // The period before the change is billed at basic, the one it takes effect in at pro.
    auto before = wait_paid(s, nth("s-1", static_cast<int>(effective - 1)), 10s);
    ASSERT_TRUE(before);
    EXPECT_EQ(before->value("amount", 0), 1000) << before->dump();
    auto after = wait_paid(s, nth("s-1", static_cast<int>(effective)), 10s);
    ASSERT_TRUE(after);
    EXPECT_EQ(after->value("amount", 0), 3000) << after->dump();
    auto at_provider = s.charges(nth("s-1", static_cast<int>(effective)));
    ASSERT_EQ(at_provider.size(), 1u) << at_provider.dump();
    EXPECT_EQ(at_provider[0].value("amount", 0), 3000) << at_provider.dump();
    auto sub = s.subscription("s-1");
    EXPECT_EQ(sub.value.value("plan", ""), "pro") << sub.describe();
}

// ---- the provider's webhooks ----

keel::http::client_request webhook(billing_stack& s, const std::string& body,
                                   std::optional<std::string> signature) {
    keel::http::client_request req;
    req.method = keel::http::method::post;
    req.url = s.billing_url() + "/webhooks/provider";
    req.body = body;
    req.header("Content-Type", "application/json");
    if (signature) req.header("X-Signature", *signature);
    return req;
}

TEST(billing_e2e, provider_webhooks_without_a_valid_signature_are_refused_401) {
    billing_stack s({.billing_args = {"--period", "1h", "--dunning", "1s,1s,1s"},
                     .sim_args = {"--pending-delay", "6s"}});
    ASSERT_NO_FATAL_FAILURE(subscribe(s, "s-1", "c-1", card_pending));
    auto pending = wait_invoice(
        s, "s-1-1", [](const json& i) { return i.value("attempts", 0) == 1; }, 10s, "charged");
    ASSERT_TRUE(pending);
    auto charge = (*pending)["charges"].at(0).get<std::string>();

    // A forged charge.succeeded for the pending charge: refused however it is signed.
    json event = {{"type", "charge.succeeded"}, {"charge", charge}, {"reference", "s-1-1"}};
    auto body = event.dump();
    json other_event = event;
    other_event["charge"] = "ch_000000000000000000000000";
    auto hex_only = keel::http::sign(billing_e2e::webhook_secret, body).substr(7);
    struct forged {
        const char* what;
        std::optional<std::string> signature;
    };
    const std::vector<forged> forgeries = {
        {"no signature", std::nullopt},
        {"an empty signature", std::string()},
        {"zeros", "sha256=" + std::string(64, '0')},
        {"another secret's", keel::http::sign("not-the-secret", body)},
        {"another body's", keel::http::sign(billing_e2e::webhook_secret, other_event.dump())},
        {"the digest without its prefix", hex_only},
    };
    for (const auto& f : forgeries) {
        auto res = s.client().send(webhook(s, body, f.signature));
        EXPECT_EQ(res.status, 401) << f.what << ": " << res.describe();
    }
    auto still = s.invoice("s-1-1");
    EXPECT_EQ(still.value.value("status", ""), "open")
        << "a forged webhook paid the invoice: " << still.describe();

    // A correctly signed event is accepted (here one naming no invoice: 200, not delivered)...
    json stray = {{"type", "charge.succeeded"}, {"charge", "ch_1"}, {"reference", "nobody-1"}};
    auto signed_stray = s.client().send(
        webhook(s, stray.dump(), keel::http::sign(billing_e2e::webhook_secret, stray.dump())));
    EXPECT_EQ(signed_stray.status, 200) << signed_stray.describe();
    EXPECT_EQ(signed_stray.value.value("delivered", true), false) << signed_stray.describe();
    // ... and the sim's own signed webhook pays the invoice.
    auto paid = wait_paid(s, "s-1-1", 15s);
    ASSERT_TRUE(paid);
    EXPECT_EQ((*paid)["charges"], json::array({charge})) << paid->dump();
}

// ---- load, crashes, outages ----

// Customers and their subscriptions (`subs` of them, on card 4242), created in turn on the
// workers; returns the subscription ids.
std::vector<std::string> subscribe_many(billing_stack& s, int subs, int workers = 1) {
    std::vector<std::string> out;
    for (int i = 0; i < subs; ++i) {
        auto c = s.create_customer(nth("c", i), i % workers);
        EXPECT_EQ(c.status, 201) << c.describe();
    }
    for (int i = 0; i < subs; ++i) {
        auto r = s.subscribe(nth("s", i), nth("c", i), "basic", card_ok, i % workers);
        EXPECT_EQ(r.status, 201) << r.describe();
        out.push_back(nth("s", i));
    }
    return out;
}

// 200 subscriptions falling due within a few seconds of each other (a 3 s trial, so that
// their charges do not trickle out as they are created), charged at keel-billing's
// --provider-rate 40 against a provider that takes 30 a second. The provider's 429s happen,
// are retried inside the charge's step, and never become an invoice's failed attempt.
TEST(billing_e2e, two_hundred_subscriptions_due_together_are_each_charged_once_through_429s) {
#ifdef KEEL_SANITIZED
    GTEST_SKIP() << "a load test: too slow under ASan";
#endif
    billing_stack s({.billing_args = {"--period", "1h", "--trial", "3s", "--dunning", "1s,1s,1s",
                                      "--provider-rate", "40"},
                     .sim_args = {"--rate", "30"}});
    auto subs = subscribe_many(s, 200);
    ASSERT_FALSE(::testing::Test::HasFailure());
    ASSERT_NO_FATAL_FAILURE(expect_each_paid_once(s, subs, 60s));
    EXPECT_GT(s.charge_answers(429), 0) << "the provider refused nothing: no 429 was tested";
    EXPECT_EQ(s.charge_answers(201), 200);
}

// keel-billing killed with SIGKILL while it charges 100 invoices, then started again: each
// invoice is paid (none lost) with one charge at the provider (none charged twice: a step
// that ran again replays its Idempotency-Key). Most runs end 5 s after the restart; when the
// kill falls between an invoice's admission on the `charges` queue and its start, that
// invoice waits for the queue's 30 s re-check (docs/guide/queues.md), hence 90 s.
TEST(billing_e2e, kill_9_during_charges_loses_no_invoice_and_charges_none_twice) {
    billing_stack s({.billing_args = {"--period", "1h", "--trial", "2s", "--dunning", "1s,1s,1s",
                                      "--provider-rate", "20"},
                     .sim_args = {"--rate", "100"}});
    auto subs = subscribe_many(s, 100);
    ASSERT_FALSE(::testing::Test::HasFailure());
    ASSERT_TRUE(keel::e2e::eventually([&] { return s.charges().size() >= 20; }, 20s, 20ms))
        << "charges did not start";
    s.kill_worker(0);
    auto charged_at_kill = s.charges().size();
    EXPECT_LT(charged_at_kill, 100u) << "the kill came after every charge";
    s.start_worker(0);
    ASSERT_NO_FATAL_FAILURE(expect_each_paid_once(s, subs, 90s));
}

// A durable call interrupted: the provider holds each charge's answer for 3 s after booking
// it (--answer-delay), keel-billing is killed -9 while the first charges wait for theirs, and
// started again. The steps that were in flight run again after the restart with the same
// Idempotency-Key: every charge booked before the kill is asked for again (a replay, counted
// by the provider) and none is made twice.
TEST(billing_e2e, a_worker_killed_mid_call_calls_again_with_the_same_idempotency_key) {
    billing_stack s({.billing_args = {"--period", "1h", "--trial", "1s", "--dunning", "1s,1s,1s"},
                     .sim_args = {"--answer-delay", "3s"}});
    auto subs = subscribe_many(s, 5);
    ASSERT_FALSE(::testing::Test::HasFailure());
    ASSERT_TRUE(keel::e2e::eventually([&] { return s.charges().size() >= 1; }, 20s, 20ms))
        << "charges did not start";
    s.kill_worker(0);  // within 3 s of the first booking: its answer is still held
    auto booked = s.charges();
    std::set<std::string> in_flight;
    for (const auto& c : booked) in_flight.insert(c["id"].get<std::string>());
    s.start_worker(0);
    ASSERT_NO_FATAL_FAILURE(expect_each_paid_once(s, subs, 90s));
    for (const auto& c : s.charges()) {
        if (!in_flight.contains(c["id"].get<std::string>())) continue;
        EXPECT_GE(c["requests"].get<int>(), 2)
            << c.dump() << ": booked before the kill, not asked for again after the restart";
    }
}

// Three keel-billing workers on one Redis share the `charges` queue (one charge at a time per
// customer: partition_concurrency 1); one is killed -9 while they charge, and started again.
// 10 customers with 3 subscriptions each fall due together, and the provider holds each answer
// 300 ms, so a customer's invoices compete. Sampled from the store every 50 ms (the admin API's
// queue view on a worker that stays up): no customer ever has two invoices admitted, and some
// wait their turn. Every invoice is paid with one charge, and at the end the queue holds
// nothing: the dead worker's slots came back.
TEST(billing_e2e, three_workers_one_killed_keep_one_charge_per_customer_at_a_time) {
    const std::string token = "queue-ops";
    billing_stack s({.billing_args = {"--period", "1h", "--trial", "2s", "--dunning", "1s,1s,1s",
                                      "--provider-rate", "100", "--admin-token", token},
                     .sim_args = {"--answer-delay", "300ms", "--rate", "1000"},
                     .workers = 3});
    constexpr int customers = 10, subs_per_customer = 3;
    for (int c = 0; c < customers; ++c)
        ASSERT_EQ(s.create_customer(nth("c", c), c % 3).status, 201);
    std::vector<std::string> subs;
    for (int i = 0; i < customers * subs_per_customer; ++i) {
        auto r = s.subscribe(nth("s", i), nth("c", i % customers), "basic", card_ok, i % 3);
        ASSERT_EQ(r.status, 201) << r.describe();
        subs.push_back(nth("s", i));
    }

    std::atomic<bool> done{false};
    std::atomic<int> samples{0}, most_admitted{0}, most_waiting{0};
    std::string queue_url = s.billing_url(0) + "/admin/queues/charges";
    auto queue_state = [&](billing_e2e::https_client& c) {
        auto req = keel::http::client_request::get(queue_url);
        req.header("Authorization", "Bearer " + token);
        return c.send(std::move(req));
    };
    std::thread sampler([&] {
        billing_e2e::https_client own;
        while (!done) {
            auto q = queue_state(own);
            if (q.status == 200) {
                ++samples;
                for (const auto& p : q.value["partitions"]) {
                    int admitted = p.value("admitted", 0), waiting = p.value("waiting", 0);
                    if (admitted > most_admitted) most_admitted = admitted;
                    if (waiting > most_waiting) most_waiting = waiting;
                }
            }
            std::this_thread::sleep_for(50ms);
        }
    });
    bool charging = keel::e2e::eventually([&] { return s.charges().size() >= 3; }, 20s, 20ms);
    if (charging) {
        s.kill_worker(2);
        std::this_thread::sleep_for(1s);
        s.start_worker(2);
    }
    if (charging) expect_each_paid_once(s, subs, 90s);
    done = true;
    sampler.join();
    ASSERT_TRUE(charging) << "charges did not start";
    EXPECT_GT(samples.load(), 10);
    EXPECT_EQ(most_admitted.load(), 1) << "a customer had two invoices admitted at once";
    EXPECT_GE(most_waiting.load(), 1) << "no invoice ever waited: the queue was not tested";
    answer last;
    EXPECT_TRUE(keel::e2e::eventually(
        [&] {
            last = queue_state(s.client());
            return last.status == 200 && last.value.value("admitted", -1) == 0 &&
                   last.value.value("waiting", -1) == 0;
        },
        40s, 100ms))
        << "slots still held: " << last.describe();
}

// The provider down for 10 s (stopped, then a new one started on the same port with the same
// certificates): the invoices wait, none fails, then each is paid with one charge.
TEST(billing_e2e, invoices_wait_out_a_10_second_provider_outage_then_are_paid) {
    billing_stack s({.billing_args = {"--period", "1h", "--dunning", "1s,1s,1s"}});
    s.stop_sim();
    auto down_since = steady::now();
    auto subs = subscribe_many(s, 5);
    ASSERT_FALSE(::testing::Test::HasFailure());
    while (steady::now() - down_since < 10s) {
        for (const auto& sub : subs) {
            auto i = s.invoice(sub + "-1");
            if (i.status == 404) continue;  // not opened yet
            ASSERT_EQ(i.status, 200) << i.describe();
            EXPECT_EQ(i.value.value("status", ""), "open") << i.describe();
            EXPECT_EQ(i.value.value("attempts", -1), 0) << "an attempt ended while the provider "
                                                           "was down: "
                                                        << i.describe();
        }
        std::this_thread::sleep_for(250ms);
    }
    for (const auto& sub : subs) {
        auto x = s.subscription(sub);
        EXPECT_EQ(x.value.value("status", ""), "active") << x.describe();
    }
    s.start_sim();
    ASSERT_NO_FATAL_FAILURE(expect_each_paid_once(s, subs, 40s));
}

// Two keel-billing workers on one Redis share --provider-rate 10: 60 charges made by both (each
// worker runs the invoices of the subscriptions created on it) reach the provider at 10 a
// second, not 10 a second each. The sim takes any rate here, so that it records what the
// workers send; a thread watches its charge list every 10 ms and notes when each charge
// appears. Granted permits come in bursts one window apart, and what the watcher sees is late
// by up to its poll and the calls' jitter, so the check is on half-second windows (at most 10
// in any: two workers limited apart would put 20 in one) and on the whole run's length (60
// at 10 a second take 5 s; at 20, 2.5 s).
TEST(billing_e2e, two_workers_on_one_redis_keep_the_provider_rate_between_them) {
#ifdef KEEL_SANITIZED
    GTEST_SKIP() << "a load test: too slow under ASan";
#endif
    constexpr int rate = 10, subscriptions = 60;
    billing_stack s({.billing_args = {"--period", "1h", "--dunning", "1s,1s,1s", "--provider-rate",
                                      std::to_string(rate)},
                     .sim_args = {"--rate", "1000"},
                     .workers = 2});
    std::map<std::string, steady::time_point> seen;  // charge id -> when first listed
    std::atomic<bool> stop{false};
    std::string watch_error;
    std::thread watcher([&] {
        billing_e2e::https_client c;
        auto url = s.sim_url() + "/charges";
        while (!stop && seen.size() < subscriptions) {
            auto a = c.get(url);
            auto now = steady::now();
            if (a.status != 200 || !a.value.contains("charges")) {
                watch_error = a.describe();
                break;
            }
            for (const auto& ch : a.value["charges"]) seen.emplace(ch.value("id", ""), now);
            std::this_thread::sleep_for(10ms);
        }
    });
    auto subs = subscribe_many(s, subscriptions, 2);
    bool created = !::testing::Test::HasFailure();
    if (created) expect_each_paid_once(s, subs, 60s);
    stop = true;
    watcher.join();
    ASSERT_TRUE(created);
    ASSERT_TRUE(watch_error.empty()) << watch_error;
    ASSERT_EQ(seen.size(), static_cast<std::size_t>(subscriptions));

    std::vector<steady::time_point> times;
    for (const auto& [id, at] : seen) times.push_back(at);
    std::sort(times.begin(), times.end());
    std::size_t busiest = 0;
    for (std::size_t i = 0, j = 0; i < times.size(); ++i) {
        while (j < times.size() && times[j] - times[i] < 500ms) ++j;
        busiest = std::max(busiest, j - i);
    }
    EXPECT_LE(busiest, static_cast<std::size_t>(rate)) << "charges in one half second";
    auto took = std::chrono::duration_cast<std::chrono::milliseconds>(times.back() - times.front());
    EXPECT_GE(took, 4s) << "60 charges at 10 a second took " << took.count() << " ms";
    EXPECT_EQ(s.charge_answers(429), 0);
    // Both took part: each ran invoices' steps.
    EXPECT_GT(s.invoice_steps(0), 0);
    EXPECT_GT(s.invoice_steps(1), 0);
}

}  // namespace
