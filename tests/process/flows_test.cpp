// Whole flows: e-mail verification with resends, payment with a deadline, journal mismatch
// and recovery, many suspended instances, long journals.

#include <gtest/gtest.h>

#include <chrono>

#include "harness.hpp"

namespace keel::process {
namespace {

using namespace std::chrono_literals;
using test::harness;

// ---- e-mail verification: send a code, race submitted code / resend / 24h timeout ----

struct mailer {
    std::vector<std::pair<std::string, std::string>> sent;  // user, code
    void send(const std::string& user, const std::string& code) { sent.emplace_back(user, code); }
};

struct mail_deps {
    mailer mail;
    template <class T>
    T& get() {
        return mail;
    }
};

struct verification {
    bool verified = false;
    int resends = 0;
    NLOHMANN_DEFINE_TYPE_INTRUSIVE(verification, verified, resends)
};

durable<std::string> send_code(context& ctx, const std::string& user, mailer& mail) {
    auto n = co_await ctx.random();
    std::string code = std::to_string(n % 1000000);
    co_await ctx.run("send-code", [&] { mail.send(user, code); });
    co_return code;
}

durable<verification> verify_email(context& ctx, std::string user, mailer& mail) {
    std::string code = co_await send_code(ctx, user, mail);
    int resends = 0;
    for (;;) {
        auto r = co_await ctx.race(ctx.wait<std::string>("/user/" + user + "/code"),
                                   ctx.wait("/user/" + user + "/resend"),
                                   ctx.timer(std::chrono::hours(24), "expiry"));
        if (r.is<0>()) {
            if (r.get<0>() == code) co_return verification{true, resends};
            continue;  // a wrong code: keep waiting
        }
        if (r.is<1>()) {
            if (resends < 3) {
                ++resends;
                code = co_await send_code(ctx, user, mail);
            }
            continue;
        }
        co_return verification{false, resends};
    }
}
inline constexpr auto email_verification = define<verify_email>("/user/:user/verify");

struct verification_test : ::testing::TestWithParam<std::size_t> {};

TEST_P(verification_test, resends_at_most_three_codes_and_accepts_the_latest) {
    harness h({.max_hot = GetParam()});
    mail_deps deps;
    h.eng->add(email_verification, deps);
    auto handle = h.sync(h.eng->start(email_verification, std::string("ann")));
    ASSERT_EQ(deps.mail.sent.size(), 1u);
    for (int i = 0; i < 5; ++i) {
        h.advance(1h);
        h.sync(h.eng->deliver(handle.id(), "/user/ann/resend", nullptr));
    }
    EXPECT_EQ(deps.mail.sent.size(), 4u);  // the first and three resends
    h.sync(h.eng->deliver(handle.id(), "/user/ann/code", "wrong"));
    h.sync(h.eng->deliver(handle.id(), "/user/ann/code", deps.mail.sent.back().second));
    auto r = h.sync(handle.wait());
    ASSERT_TRUE(r.has_value()) << r.error().message;
    EXPECT_TRUE(r->verified);
    EXPECT_EQ(r->resends, 3);
    EXPECT_EQ(deps.mail.sent.size(), 4u);  // replays never resend
    EXPECT_TRUE(h.snapshot(handle.id()).timers.empty());
}

TEST_P(verification_test, expires_after_a_day_without_the_code) {
    harness h({.max_hot = GetParam()});
    mail_deps deps;
    h.eng->add(email_verification, deps);
    auto handle = h.sync(h.eng->start(email_verification, std::string("bob")));
    h.advance(23h);
    h.sync(h.eng->deliver(handle.id(), "/user/bob/resend", nullptr));  // restarts the 24h
    h.advance(23h);
    EXPECT_EQ(h.status(handle.id()), instance_status::suspended);
    h.advance(1h);
    auto r = h.sync(handle.wait());
    ASSERT_TRUE(r.has_value());
    EXPECT_FALSE(r->verified);
    EXPECT_EQ(r->resends, 1);
}

INSTANTIATE_TEST_SUITE_P(hot_and_evicted, verification_test, ::testing::Values(100, 0));

// ---- payment with a deadline, early return, try/catch around suspension ----

struct order {
    static constexpr std::string_view model_name = "order";
};

struct warehouse {
    int dispatched = 0;
    int fail_next = 0;
    std::string dispatch(const std::string& order_id) {
        if (fail_next > 0) {
            --fail_next;
            throw terminal_error("no stock");
        }
        ++dispatched;
        return "parcel-" + order_id;
    }
};
struct shop_deps {
    warehouse wh;
    template <class T>
    T& get() {
        return wh;
    }
};

durable<std::string> fulfil(context& ctx, ref<order> o, warehouse& wh) {
    auto paid = co_await ctx.race(ctx.wait("/payment/" + o.id() + "/received"),
                                  ctx.timer(std::chrono::days{3}));
    if (!paid.is<0>()) co_return std::string("payment_timeout");
    std::string parcel;
    for (int attempt = 0;; ++attempt) {
        try {
            parcel = co_await ctx.run(
                "dispatch", [&] { return wh.dispatch(o.id()); }, retry_policy::once());
            break;
        } catch (const step_failed&) {
            if (attempt == 2) co_return std::string("dispatch_failed");
        }
        co_await ctx.sleep(1h, "restock");  // suspends inside the retry loop
    }
    co_await ctx.wait("/shipping/" + parcel + "/delivered");
    co_return std::string("completed");
}
inline constexpr auto fulfilment = define<fulfil>("/order/:order/fulfillment");

TEST(flows, payment_dispatch_with_restock_retries_and_delivery) {
    harness h({.max_hot = 0});
    shop_deps deps;
    deps.wh.fail_next = 2;
    h.eng->add(fulfilment, deps);
    auto handle = h.sync(h.eng->start(fulfilment, ref<order>("order-123")));
    EXPECT_EQ(handle.id(), "order/order-123/fulfillment");
    h.advance(std::chrono::days{2});
    h.sync(h.eng->deliver(handle.id(), "/payment/order-123/received", {{"amount", 10}}));
    h.advance(1h);
    h.advance(1h);
    EXPECT_EQ(deps.wh.dispatched, 1);
    h.sync(h.eng->deliver(handle.id(), "/shipping/parcel-order-123/delivered", nullptr));
    EXPECT_EQ(*h.sync(handle.wait()), "completed");
}

TEST(flows, payment_times_out_after_three_days) {
    harness h;
    shop_deps deps;
    h.eng->add(fulfilment, deps);
    auto handle = h.sync(h.eng->start(fulfilment, ref<order>("order-9")));
    h.advance(std::chrono::days{3});
    EXPECT_EQ(*h.sync(handle.wait()), "payment_timeout");
    EXPECT_EQ(deps.wh.dispatched, 0);
}

// ---- journal mismatch and recovery ----

int code_version = 1;

durable<std::string> versioned(context& ctx, std::string) {
    co_await ctx.run("reserve", [] { return 1; });
    if (code_version == 2) co_await ctx.run("audit", [] { return 2; });  // a code change
    co_await ctx.sleep(1h);
    co_return std::string("done");
}
inline constexpr auto versioned_flow = define<versioned>("/versioned/:n");

TEST(flows, a_journal_mismatch_parks_the_instance_and_a_resume_after_the_fix_continues) {
    code_version = 1;
    harness h({.max_hot = 0});
    h.eng->add(versioned_flow);
    auto handle = h.sync(h.eng->start(versioned_flow, std::string("1")));
    auto before = h.snapshot(handle.id()).journal;
    ASSERT_EQ(before.size(), 1u);

    code_version = 2;  // deployed a change that is not replay-compatible
    h.advance(1h);
    auto parked = h.snapshot(handle.id());
    EXPECT_EQ(parked.status, instance_status::failed);
    EXPECT_TRUE(parked.parked);
    ASSERT_TRUE(parked.error);
    EXPECT_NE(parked.error->find("journal mismatch"), std::string::npos) << *parked.error;
    EXPECT_NE(parked.error->find("timer \"sleep\""), std::string::npos) << *parked.error;
    EXPECT_NE(parked.error->find("run \"audit\""), std::string::npos) << *parked.error;
    EXPECT_EQ(parked.journal, before);  // nothing overwritten
    EXPECT_EQ(parked.timers.size(), 1u);
    auto failed = h.sync(handle.wait());
    ASSERT_FALSE(failed.has_value());

    code_version = 1;  // the fix
    EXPECT_TRUE(h.sync(h.eng->resume(handle.id())));
    EXPECT_EQ(*h.sync(handle.wait()), "done");
    EXPECT_EQ(h.snapshot(handle.id()).journal.size(), 2u);
}

// ---- operators' actions ----

bool card_declined = true;
int charges = 0;

durable<int> pay(context& ctx, std::string) {
    co_await ctx.run("reserve", [] { return 1; });
    auto amount = co_await ctx.wait<int>("/pay");
    co_await ctx.run("charge", [&] {
        ++charges;
        if (card_declined) throw terminal_error("card declined");
        return amount;
    });
    co_return amount;
}
inline constexpr auto pay_flow = define<pay>("/pay/:n");

TEST(flows, a_failed_instance_retried_from_a_position_replays_before_it_and_runs_after_it) {
    card_declined = true;
    charges = 0;
    harness h;
    h.eng->add(pay_flow);
    auto handle = h.sync(h.eng->start(pay_flow, std::string("1")));
    h.sync(h.eng->deliver(handle.id(), "/pay", 7, "tx-1"));
    ASSERT_FALSE(h.sync(handle.wait()).has_value());
    auto failed = h.snapshot(handle.id());
    ASSERT_EQ(failed.journal.size(), 3u);  // reserve, the signal, the failed charge
    EXPECT_NE(failed.journal[2].at, keel::time_point{});

    // Refusals say why.
    auto running = h.sync(h.eng->retry("nope", 0));
    ASSERT_FALSE(running);
    EXPECT_EQ(running.error().why, refusal::reason::not_found);
    auto far = h.sync(h.eng->retry(handle.id(), 4));
    ASSERT_FALSE(far);
    EXPECT_EQ(far.error().why, refusal::reason::out_of_range);
    EXPECT_NE(far.error().message.find("3 journal entries"), std::string::npos);
    EXPECT_EQ(h.sync(h.eng->resume(handle.id())).error().why, refusal::reason::wrong_state);
    EXPECT_EQ(h.sync(h.eng->cancel(handle.id())).error().why, refusal::reason::final);

    card_declined = false;                              // the card was fixed
    ASSERT_TRUE(h.sync(h.eng->retry(handle.id(), 1)));  // keep "reserve", take the signal again
    h.settle();
    EXPECT_EQ(*h.sync(handle.wait()), 7);
    EXPECT_EQ(charges, 2);
    auto done = h.snapshot(handle.id());
    EXPECT_EQ(done.status, instance_status::completed);
    ASSERT_EQ(done.journal.size(), 3u);
    EXPECT_FALSE(done.journal[2].failed);
    ASSERT_EQ(done.retries.size(), 1u);
    EXPECT_EQ(done.retries[0].from, 1u);
    EXPECT_EQ(done.retries[0].journal_length, 3u);
    auto old = h.sync(h.store.read_journal(handle.id(), 1, 0, 10));
    ASSERT_TRUE(old);
    EXPECT_TRUE(old->entries[2].failed);  // the first run's journal, kept for audit
    // A completed instance can be retried too; a running one cannot.
    ASSERT_TRUE(h.sync(h.eng->retry(handle.id(), 2)));
    EXPECT_EQ(*h.sync(handle.wait()), 7);
    EXPECT_EQ(charges, 3);
}

// A payload the handler cannot take fails the instance; a retry that gives it back would fail
// again. Left out of the retry, the flow waits anew and completes on a good one; a signal
// waiting in the inbox is taken out while the instance is suspended.
TEST(flows, an_operator_retries_without_a_poisoned_signal_and_removes_a_waiting_one) {
    card_declined = false;
    charges = 0;
    harness h;
    h.eng->add(pay_flow);
    auto handle = h.sync(h.eng->start(pay_flow, std::string("2")));
    auto bad = h.sync(h.eng->deliver(handle.id(), "/pay", "seven", "tx-bad"));
    ASSERT_FALSE(h.sync(handle.wait()).has_value());  // "seven" is no int
    ASSERT_EQ(h.snapshot(handle.id()).status, instance_status::failed);

    std::vector<std::uint64_t> not_consumed{bad.id + 100};
    auto unknown = h.sync(h.eng->retry(handle.id(), 1, not_consumed));
    ASSERT_FALSE(unknown);
    EXPECT_EQ(unknown.error().why, refusal::reason::unknown_signal);
    std::vector<std::uint64_t> poisoned{bad.id};
    ASSERT_TRUE(h.sync(h.eng->retry(handle.id(), 1, poisoned)));
    h.settle();
    auto waiting = h.snapshot(handle.id());
    EXPECT_EQ(waiting.status, instance_status::suspended);
    EXPECT_TRUE(waiting.inbox.empty());
    ASSERT_EQ(waiting.retries.size(), 1u);
    EXPECT_EQ(waiting.retries[0].left_out, poisoned);

    auto stray = h.sync(h.eng->deliver(handle.id(), "/stray", 1, "s-1"));
    auto removed = h.sync(h.eng->remove_signal(handle.id(), stray.id));
    ASSERT_TRUE(removed);
    EXPECT_EQ(removed->path, "/stray");
    auto again = h.sync(h.eng->remove_signal(handle.id(), stray.id));
    ASSERT_FALSE(again);
    EXPECT_EQ(again.error().why, refusal::reason::unknown_signal);
    EXPECT_EQ(h.sync(h.eng->remove_signal("nope", 1)).error().why, refusal::reason::not_found);
    EXPECT_EQ(h.snapshot(handle.id()).removed.size(), 1u);

    h.sync(h.eng->deliver(handle.id(), "/pay", 7, "tx-2"));
    EXPECT_EQ(*h.sync(handle.wait()), 7);
    EXPECT_EQ(charges, 1);
}

// ---- metrics ----

int flaky_failures = 0;

durable<int> metered(context& ctx, std::string) {
    co_await ctx.run("flaky", [] {
        if (flaky_failures-- > 0) throw std::runtime_error("try again");
        return 1;
    });
    co_await ctx.sleep(1min);
    co_return co_await ctx.wait<int>("/go");
}
inline constexpr auto metered_flow = define<metered>("/metered/:n");

bool has_line(const std::string& text, const std::string& line) {
    return text.find(line + "\n") != std::string::npos;
}

TEST(flows, the_engine_counts_what_its_processes_do) {
    flaky_failures = 1;
    harness h;
    h.eng->add(metered_flow);
    auto handle = h.sync(h.eng->start(metered_flow, std::string("1")));
    for (int i = 0; i < 10 && h.status(handle.id()) == instance_status::running; ++i)
        h.advance(10s);  // the retry's backoff
    h.advance(1min);     // the sleep fires
    h.sync(h.eng->deliver(handle.id(), "/go", 3));
    EXPECT_EQ(*h.sync(handle.wait()), 3);

    auto text = h.sync(h.eng->render_metrics());
    const std::string def = "definition=\"/metered/:n\"";
    EXPECT_TRUE(has_line(text, "keel_process_instances_started_total{" + def + "} 1")) << text;
    EXPECT_TRUE(has_line(
        text, "keel_process_instances_finished_total{" + def + ",outcome=\"completed\"} 1"))
        << text;
    EXPECT_TRUE(has_line(text, "keel_process_step_attempts_total{" + def + "} 2")) << text;
    EXPECT_TRUE(has_line(text, "keel_process_step_retries_total{" + def + "} 1")) << text;
    EXPECT_TRUE(has_line(text, "keel_process_step_duration_seconds_count{" + def + "} 1")) << text;
    EXPECT_TRUE(has_line(text, "keel_process_signal_resume_seconds_count{" + def + "} 1")) << text;
    EXPECT_TRUE(has_line(text, "keel_process_timer_lateness_seconds_count{" + def + "} 1")) << text;
    EXPECT_TRUE(has_line(text, "keel_process_instances{" + def + ",status=\"completed\"} 1"))
        << text;
    EXPECT_TRUE(has_line(text, "keel_process_instances{" + def + ",status=\"suspended\"} 0"))
        << text;
    EXPECT_EQ(text.find("metered/1"), std::string::npos);  // no instance ids as labels
}

TEST(flows, an_operator_sees_the_attempt_and_last_error_of_a_step_in_flight) {
    flaky_failures = 2;
    harness h;
    h.eng->add(metered_flow);
    auto handle = h.sync(h.eng->start(metered_flow, std::string("2")));
    auto steps = h.sync(h.eng->steps_in_flight(handle.id()));
    ASSERT_EQ(steps.size(), 1u);  // the first attempt failed; the retry waits for its backoff
    EXPECT_EQ(steps[0].name, "flaky");
    EXPECT_EQ(steps[0].attempt, 1);
    EXPECT_EQ(steps[0].last_error, "try again");
    // Any other process reads the failed attempt from the store.
    auto stored = h.snapshot(handle.id()).attempts;
    ASSERT_EQ(stored.size(), 1u);
    EXPECT_EQ(stored[0].seq, steps[0].seq);
    EXPECT_EQ(stored[0].name, "flaky");
    EXPECT_EQ(stored[0].attempt, 1);
    EXPECT_EQ(stored[0].error, "try again");
    EXPECT_EQ(stored[0].worker, "w1");
    for (int i = 0; i < 10 && h.status(handle.id()) == instance_status::running; ++i)
        h.advance(10s);
    EXPECT_TRUE(h.sync(h.eng->steps_in_flight(handle.id())).empty());
    EXPECT_TRUE(h.snapshot(handle.id()).attempts.empty());
    EXPECT_TRUE(h.sync(h.eng->steps_in_flight("nope")).empty());
}

durable<int> typed_step(context& ctx, std::string) {
    if (code_version == 1) {
        co_await ctx.run("value", [] { return std::string("text"); });
    } else {
        co_await ctx.run("value", [] { return 5; });  // same op, new result type
    }
    co_await ctx.sleep(1h);
    co_return 1;
}
inline constexpr auto typed_flow = define<typed_step>("/typed/:n");

TEST(flows, a_recorded_value_that_no_longer_decodes_is_a_mismatch_not_a_crash) {
    code_version = 1;
    harness h({.max_hot = 0});
    h.eng->add(typed_flow);
    auto handle = h.sync(h.eng->start(typed_flow, std::string("1")));
    code_version = 2;
    h.advance(1h);
    auto snap = h.snapshot(handle.id());
    EXPECT_EQ(snap.status, instance_status::failed);
    ASSERT_TRUE(snap.error);
    EXPECT_NE(snap.error->find("does not decode"), std::string::npos) << *snap.error;
    code_version = 1;
}

// ---- many suspended instances ----

durable<int> waiter(context& ctx, std::string n) {
    auto v = co_await ctx.wait<int>("/go");
    co_return v + std::stoi(n);
}
inline constexpr auto waiting = define<waiter>("/wait/:n");

TEST(flows, ten_thousand_suspended_instances_with_eviction) {
    harness h({.max_hot = 500});
    h.eng->add(waiting);
    constexpr int count = 10'000;
    h.sync([](engine& e) -> asio::awaitable<void> {
        for (int i = 0; i < count; ++i) co_await e.start(waiting, std::to_string(i));
    }(*h.eng));
    EXPECT_LE(h.eng->hot_count(), 500u);
    if (auto* m = h.memory()) {
        EXPECT_EQ(m->size(), static_cast<std::size_t>(count));
    }
    for (int i = 0; i < count; i += 997)
        EXPECT_EQ(h.status("wait/" + std::to_string(i)), instance_status::suspended);
    // Wake every tenth, most of them evicted long ago: they resume by replay.
    h.sync([](engine& e) -> asio::awaitable<void> {
        for (int i = 0; i < count; i += 10)
            co_await e.deliver("wait/" + std::to_string(i), "/go", 1);
    }(*h.eng));
    EXPECT_LE(h.eng->hot_count(), 500u);
    for (int i = 0; i < count; i += 10) {
        auto id = "wait/" + std::to_string(i);
        ASSERT_EQ(h.status(id), instance_status::completed) << id;
        ASSERT_EQ(h.snapshot(id).result, i + 1);
        ASSERT_EQ(h.status("wait/" + std::to_string(i + 1)), instance_status::suspended);
    }
}

// ---- a long journal replays in constant stack ----

std::uintptr_t lowest_frame = UINTPTR_MAX;
std::uintptr_t highest_frame = 0;

durable<std::uint64_t> one_step(context& ctx) {
    auto here = reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
    lowest_frame = std::min(lowest_frame, here);
    highest_frame = std::max(highest_frame, here);
    co_return co_await ctx.random() % 2;
}

durable<std::uint64_t> long_journal(context& ctx, std::string n) {
    std::uint64_t sum = 0;
    int count = std::stoi(n);
    for (int i = 0; i < count; ++i) sum += co_await one_step(ctx);
    co_await ctx.wait("/continue");
    co_return sum;
}
inline constexpr auto long_flow = define<long_journal>("/long/:n");

TEST(flows, replaying_100k_entries_through_helpers_keeps_the_stack_flat) {
    harness h({.max_hot = 0});
    h.eng->add(long_flow);
    auto handle = h.sync(h.eng->start(long_flow, std::string("100000")));
    ASSERT_EQ(h.snapshot(handle.id()).journal.size(), 100'000u);
    lowest_frame = UINTPTR_MAX;
    highest_frame = 0;
    h.sync(h.eng->deliver(handle.id(), "/continue", nullptr));  // evicted: a full replay
    auto r = h.sync(handle.wait());
    ASSERT_TRUE(r.has_value()) << r.error().message;
    EXPECT_LT(highest_frame - lowest_frame, 4096u);  // every helper ran at the same depth
    EXPECT_EQ(h.snapshot(handle.id()).journal.size(), 100'001u);
}

}  // namespace
}  // namespace keel::process
