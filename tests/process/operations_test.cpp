// Each durable operation on the engine with the in-memory store and a manual clock.

#include <gtest/gtest.h>

#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <keel/process/forwarding_store.hpp>

#include "harness.hpp"

namespace keel::process {
namespace {

using namespace std::chrono_literals;
using test::harness;

struct order {
    static constexpr std::string_view model_name = "order";
};

// A dependency: counts side effects, fails on demand.
struct gateway {
    int calls = 0;
    int fail_first = 0;
    bool terminal = false;
    int charge(int amount) {
        ++calls;
        if (calls <= fail_first) {
            if (terminal) throw terminal_error("card declined");
            throw std::runtime_error("gateway timeout");
        }
        return amount * 100;
    }
};

struct deps {
    gateway gw;
    template <class T>
    T& get() {
        static_assert(std::is_same_v<T, gateway>);
        return gw;
    }
};

// Another store, counted: how often the engine reads an instance back.
struct counting_store final : forwarding_store {
    using forwarding_store::forwarding_store;
    int loads = 0;
    asio::awaitable<std::optional<instance_snapshot>> load(std::string id, bool journal) override {
        ++loads;
        return forwarding_store::load(std::move(id), journal);
    }
};

// ---- run ----

durable<int> charge(context& ctx, ref<order> o, gateway& gw) {
    int cents = co_await ctx.run("charge", [&] { return gw.charge(7); });
    co_return cents + static_cast<int>(o.id().size());
}
inline constexpr auto charging = define<charge>("/order/:order/charge");

// A step that waits until the test opens the gate.
struct gate {
    explicit gate(asio::io_context& io) : timer(io, asio::steady_timer::time_point::max()) {}
    asio::steady_timer timer;
    // Waits until the test opens the gate (cancels or expires the timer), then answers 7.
    asio::awaitable<int> pass() {
        error_code ec;
        co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        co_return 7;
    }
    template <class T>
    T& get() {
        static_assert(std::is_same_v<T, gate>);
        return *this;
    }
};

durable<int> gated(context& ctx, ref<order>, gate& g) {
    co_return co_await ctx.run("charge", [&] { return g.pass(); });
}
inline constexpr auto gated_charge = define<gated>("/order/:order/gated");

TEST(operations, wait_takes_the_outcome_of_an_instance_that_settles_on_its_engine) {
    harness h;
    gate g(h.io);
    counting_store counted(h.store);
    engine eng(h.io.get_executor(), counted, h.clock, {.worker = "w2", .seed = 7});
    eng.add(gated_charge, g);
    eng.run();
    auto handle = h.sync(eng.start(gated_charge, ref<order>("o-1")));
    std::optional<expected<int, failure>> r;
    asio::co_spawn(
        h.io, [&]() -> asio::awaitable<void> { r = co_await handle.wait(); }, asio::detached);
    h.settle();
    EXPECT_FALSE(r);  // the step is still running on this engine
    g.timer.cancel();
    h.settle();
    ASSERT_TRUE(r && r->has_value());
    EXPECT_EQ(**r, 7);
    EXPECT_EQ(counted.loads, 0);  // handed over when it settled, not read back
    // Waiting for it afterwards reads the stored result.
    auto again = h.sync(eng.wait("order/o-1/gated"));
    ASSERT_TRUE(again.has_value());
    EXPECT_EQ(*again, 7);
    EXPECT_EQ(counted.loads, 1);
    eng.stop();
    h.settle();
}

TEST(operations, run_records_its_result_and_the_instance_id_is_the_filled_path) {
    harness h;
    deps d;
    h.eng->add(charging, d);
    auto handle = h.sync(h.eng->start(charging, ref<order>("o-1")));
    EXPECT_EQ(handle.id(), "order/o-1/charge");
    auto r = h.sync(handle.wait());
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(*r, 703);
    auto snap = h.snapshot("order/o-1/charge");
    ASSERT_EQ(snap.journal.size(), 1u);
    EXPECT_EQ(snap.journal[0].kind, op_kind::run);
    EXPECT_EQ(snap.journal[0].name, "charge");
    EXPECT_EQ(snap.journal[0].value, 700);
    EXPECT_EQ(snap.status, instance_status::completed);
    EXPECT_EQ(d.gw.calls, 1);
}

TEST(operations, starting_twice_returns_the_same_instance_and_runs_it_once) {
    harness h;
    deps d;
    h.eng->add(charging, d);
    auto a = h.sync(h.eng->start(charging, ref<order>("o-1")));
    auto b = h.sync(h.eng->start(charging, ref<order>("o-1")));
    EXPECT_EQ(a.id(), b.id());
    EXPECT_EQ(*h.sync(b.wait()), 703);
    EXPECT_EQ(d.gw.calls, 1);
    if (auto* m = h.memory()) {
        EXPECT_EQ(m->size(), 1u);
    }
}

TEST(operations, run_retries_with_backoff_on_the_clock) {
    harness h;
    deps d;
    d.gw.fail_first = 2;
    h.eng->add(charging, d);
    auto handle = h.sync(h.eng->start(charging, ref<order>("o-2")));
    EXPECT_EQ(d.gw.calls, 1);
    h.advance(50ms);  // the first backoff is 100ms +- 20%
    EXPECT_EQ(d.gw.calls, 1);
    h.advance(100ms);
    EXPECT_EQ(d.gw.calls, 2);
    h.advance(300ms);  // second backoff: 200ms +- 20%
    EXPECT_EQ(d.gw.calls, 3);
    EXPECT_EQ(*h.sync(handle.wait()), 703);
    auto journal = h.snapshot(handle.id()).journal;
    ASSERT_EQ(journal.size(), 1u);  // recorded once
    // With when its first attempt began and how many it took, for operators.
    EXPECT_EQ(journal[0].attempts, 3u);
    EXPECT_LE(journal[0].started + 250ms, journal[0].at);
}

durable<std::string> charge_or_report(context& ctx, ref<order>, gateway& gw) {
    try {
        co_await ctx.run("charge", [&] { return gw.charge(1); });
    } catch (const step_failed& e) {
        co_return std::string(e.what());
    }
    co_return std::string("charged");
}
inline constexpr auto reporting = define<charge_or_report>("/order/:order/report");

TEST(operations, a_terminal_error_is_recorded_and_thrown_into_the_handler) {
    harness h;
    deps d;
    d.gw.fail_first = 5;
    d.gw.terminal = true;
    h.eng->add(reporting, d);
    auto handle = h.sync(h.eng->start(reporting, ref<order>("o-3")));
    auto r = h.sync(handle.wait());
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(*r, "step \"charge\" failed: card declined");
    EXPECT_EQ(d.gw.calls, 1);
    auto snap = h.snapshot(handle.id());
    ASSERT_EQ(snap.journal.size(), 1u);
    EXPECT_TRUE(snap.journal[0].failed);
}

// ---- the definition's retry policy ----

retry_policy five_quick() {
    retry_policy p;
    p.max_attempts = 5;
    p.initial_backoff = 10ms;
    p.multiplier = 1.0;
    p.jitter = 0;
    return p;
}

durable<std::string> charge_twice(context& ctx, ref<order>, gateway& gw) {
    std::string out;
    try {
        co_await ctx.run("default policy", [&] { return gw.charge(1); });
    } catch (const step_failed&) {
        out += "default failed;";
    }
    try {
        co_await ctx.run(
            "own policy", [&] { return gw.charge(1); }, retry_policy::once());
    } catch (const step_failed&) {
        out += "own failed";
    }
    co_return out;
}
inline constexpr auto patient_charging =
    define<charge_twice>("/order/:order/patient").retry(five_quick);
inline constexpr auto impatient_charging = define<charge_twice>("/order/:order/impatient");

TEST(operations, a_step_without_a_policy_retries_with_the_definitions_and_a_given_one_wins) {
    harness h;
    deps d;
    d.gw.fail_first = 100;
    h.eng->add(patient_charging, d);
    auto handle = h.sync(h.eng->start(patient_charging, ref<order>("o-p")));
    for (int i = 0; i < 10; ++i) h.advance(10ms);
    EXPECT_EQ(*h.sync(handle.wait()), "default failed;own failed");
    EXPECT_EQ(d.gw.calls, 5 + 1);  // five_quick's 5 attempts, then once()'s 1
}

TEST(operations, without_a_definition_policy_a_step_retries_with_the_default_retry_policy) {
    harness h;
    deps d;
    d.gw.fail_first = 100;
    h.eng->add(impatient_charging, d);
    auto handle = h.sync(h.eng->start(impatient_charging, ref<order>("o-i")));
    for (int i = 0; i < 10; ++i) h.advance(100ms);
    EXPECT_EQ(*h.sync(handle.wait()), "default failed;own failed");
    EXPECT_EQ(d.gw.calls, retry_policy{}.max_attempts + 1);
}

durable<int> async_step(context& ctx, std::string) {
    int v = co_await ctx.run("async", []() -> asio::awaitable<int> {
        co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
        co_return 41;
    });
    co_return v + 1;
}
inline constexpr auto async_steps = define<async_step>("/async/:n");

TEST(operations, run_accepts_an_asio_awaitable) {
    harness h;
    h.eng->add(async_steps);
    auto handle = h.sync(h.eng->start(async_steps, std::string("1")));
    EXPECT_EQ(*h.sync(handle.wait()), 42);
}

durable<void> throws(context& ctx, std::string) {
    co_await ctx.sleep(1s);
    throw std::runtime_error("out of stock");
}
inline constexpr auto throwing = define<throws>("/throw/:n");

TEST(operations, an_exception_escaping_the_handler_fails_the_instance) {
    harness h;
    h.eng->add(throwing);
    auto handle = h.sync(h.eng->start(throwing, std::string("1")));
    h.advance(1s);
    auto r = h.sync(handle.wait());
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().status, instance_status::failed);
    EXPECT_EQ(r.error().message, "out of stock");
    EXPECT_EQ(h.status(handle.id()), instance_status::failed);
}

// ---- timers ----

durable<std::string> three_days(context& ctx, ref<order>) {
    co_await ctx.sleep(std::chrono::days{3});
    co_return std::string("woke");
}
inline constexpr auto sleeping = define<three_days>("/order/:order/sleep");

TEST(operations, a_three_day_timer_passes_in_virtual_time) {
    harness h;
    h.eng->add(sleeping);
    auto handle = h.sync(h.eng->start(sleeping, ref<order>("o-4")));
    EXPECT_EQ(h.status(handle.id()), instance_status::suspended);
    ASSERT_EQ(h.snapshot(handle.id()).timers.size(), 1u);
    h.advance(std::chrono::days{2});
    EXPECT_EQ(h.status(handle.id()), instance_status::suspended);
    h.advance(std::chrono::days{1});
    EXPECT_EQ(h.status(handle.id()), instance_status::completed);
    EXPECT_EQ(*h.sync(handle.wait()), "woke");
    EXPECT_TRUE(h.snapshot(handle.id()).timers.empty());
}

TEST(operations, a_timer_survives_eviction_and_keeps_its_due_time) {
    harness h({.max_hot = 0});
    h.eng->add(sleeping);
    auto handle = h.sync(h.eng->start(sleeping, ref<order>("o-5")));
    EXPECT_EQ(h.eng->hot_count(), 0u);
    h.advance(std::chrono::days{3} - 1s);
    EXPECT_EQ(h.status(handle.id()), instance_status::suspended);
    h.advance(1s);
    EXPECT_EQ(h.status(handle.id()), instance_status::completed);
}

// ---- signals ----

struct payment {
    std::string tx;
    double amount = 0;
    NLOHMANN_DEFINE_TYPE_INTRUSIVE(payment, tx, amount)
};

durable<std::string> await_payment(context& ctx, ref<order> o) {
    auto p = co_await ctx.wait<payment>("/payment/" + o.id() + "/received");
    auto second = co_await ctx.wait<payment>("/payment/" + o.id() + "/received");
    co_return p.tx + "+" + second.tx;
}
inline constexpr auto paying = define<await_payment>("/order/:order/pay");

TEST(operations, signals_wait_in_the_inbox_and_are_consumed_oldest_first_once) {
    harness h;
    h.eng->add(paying);
    auto handle = h.sync(h.eng->start(paying, ref<order>("o-6")));
    const std::string path = "/payment/o-6/received";
    // Delivered twice with one key: stored once.
    auto d1 = h.sync(h.eng->deliver(handle.id(), path, payment{"tx-1", 10}, "k1"));
    auto d2 = h.sync(h.eng->deliver(handle.id(), path, payment{"tx-1", 10}, "k1"));
    EXPECT_EQ(d1.result, delivery::outcome::stored);
    EXPECT_EQ(d2.result, delivery::outcome::duplicate);
    EXPECT_EQ(h.status(handle.id()), instance_status::suspended);
    h.sync(h.eng->deliver(handle.id(), path, payment{"tx-2", 5}, "k2"));
    EXPECT_EQ(*h.sync(handle.wait()), "tx-1+tx-2");
    if (auto* m = h.memory()) {
        auto consumed = m->consumed();
        ASSERT_EQ(consumed.size(), 2u);
        // Keys are remembered scoped to the signal's path.
        EXPECT_EQ(consumed[0].key, keel::signals::scoped_key(path, "k1"));
        EXPECT_EQ(consumed[1].key, keel::signals::scoped_key(path, "k2"));
    }
    EXPECT_TRUE(h.snapshot(handle.id()).inbox.empty());
}

TEST(operations, a_signal_sent_before_the_wait_is_delivered_from_the_inbox) {
    harness h({.max_hot = 0});
    h.eng->add(paying);
    auto handle = h.sync(h.eng->start(paying, ref<order>("o-7")));
    h.sync(h.eng->deliver(handle.id(), "/payment/o-7/received", payment{"a", 1}, "1"));
    h.sync(h.eng->deliver(handle.id(), "/payment/o-7/received", payment{"b", 1}, "2"));
    EXPECT_EQ(*h.sync(handle.wait()), "a+b");
}

TEST(operations, signals_to_unknown_or_finished_instances_are_refused) {
    harness h;
    h.eng->add(paying);
    auto d = h.sync(h.eng->deliver("order/nope/pay", "/x", nullptr, "k"));
    EXPECT_EQ(d.result, delivery::outcome::no_instance);
}

durable<std::string> bad_payload(context& ctx, std::string) {
    try {
        co_await ctx.wait<payment>("/p");
    } catch (const bad_signal_payload&) {
        co_return std::string("rejected");
    }
    co_return std::string("accepted");
}
inline constexpr auto bad_payloads = define<bad_payload>("/bad/:n");

TEST(operations, a_payload_of_the_wrong_type_is_thrown_into_the_handler) {
    harness h;
    h.eng->add(bad_payloads);
    auto handle = h.sync(h.eng->start(bad_payloads, std::string("1")));
    h.sync(h.eng->deliver(handle.id(), "/p", "not a payment"));
    EXPECT_EQ(*h.sync(handle.wait()), "rejected");
}

// ---- races ----

durable<std::string> pay_or_timeout(context& ctx, ref<order> o) {
    auto r = co_await ctx.race(ctx.wait<payment>("/payment/" + o.id() + "/received"),
                               ctx.timer(std::chrono::days{3}));
    if (!r.is<0>()) co_return std::string("payment_timeout");
    co_return "paid " + r.get<0>().tx;
}
inline constexpr auto pay_with_timeout = define<pay_or_timeout>("/order/:order/deadline");

TEST(operations, a_signal_wins_the_race_and_the_timer_is_cancelled) {
    harness h;
    h.eng->add(pay_with_timeout);
    auto handle = h.sync(h.eng->start(pay_with_timeout, ref<order>("o-8")));
    ASSERT_EQ(h.snapshot(handle.id()).timers.size(), 1u);
    h.advance(std::chrono::days{1});
    h.sync(h.eng->deliver(handle.id(), "/payment/o-8/received", payment{"tx", 3}));
    EXPECT_EQ(*h.sync(handle.wait()), "paid tx");
    auto snap = h.snapshot(handle.id());
    EXPECT_TRUE(snap.timers.empty());
    ASSERT_EQ(snap.journal.size(), 2u);
    EXPECT_EQ(snap.journal[0].kind, op_kind::signal);
    EXPECT_EQ(snap.journal[1].kind, op_kind::race);
    EXPECT_EQ(snap.journal[1].value, 0);
}

// ---- a resume is written with the step that follows it ----

// A store that counts commits, and fails every call once `dead` (a worker that died).
struct watched_store final : forwarding_store {
    using forwarding_store::forwarding_store;
    int commits = 0;
    bool dead = false;
    asio::awaitable<expected<commit_result, store_error>> commit(commit_request req) override {
        ++commits;
        return forwarding_store::commit(std::move(req));
    }
    asio::awaitable<void> before_call() override {
        if (dead) throw std::runtime_error("this worker died");
        co_return;
    }
};

durable<int> pay_then_charge(context& ctx, ref<order> o, gate& g) {
    auto r = co_await ctx.race(ctx.wait<payment>("/payment/" + o.id() + "/received"),
                               ctx.timer(std::chrono::days{3}));
    if (!r.is<0>()) co_return -1;
    co_return co_await ctx.run("charge", [&] { return g.pass(); });
}
inline constexpr auto paying_then_charging = define<pay_then_charge>("/order/:order/pay-charge");

// A resume writes nothing but the lease: while the step runs, the store still says
// "suspended" (so does the operators' index) and holds the signal and the timer; the step's
// commit consumes them with its own entries and says what the instance is now.
TEST(operations, a_resume_is_written_with_the_step_that_follows_it) {
    harness h;
    gate g(h.io);
    watched_store watched(h.store);
    engine eng(h.io.get_executor(), watched, h.clock, {.worker = "w2", .seed = 7});
    eng.add(paying_then_charging, g);
    eng.run();
    auto handle = h.sync(eng.start(paying_then_charging, ref<order>("o-r")));
    h.settle();
    EXPECT_EQ(watched.commits, 0);  // the start wrote the wait and the timer
    auto before = h.snapshot(handle.id());
    EXPECT_EQ(before.status, instance_status::suspended);
    EXPECT_FALSE(before.lease);
    EXPECT_EQ(before.waits.size(), 1u);
    EXPECT_EQ(before.timers.size(), 1u);
    h.sync(eng.deliver(handle.id(), "/payment/o-r/received", payment{"tx", 3}, "k"));
    h.settle();

    auto during = h.snapshot(handle.id());
    EXPECT_EQ(watched.commits, 0);  // the resume wrote nothing of its own
    EXPECT_EQ(during.status, instance_status::suspended);
    EXPECT_EQ(during.lease, (lease_token{"w2", 2}));
    EXPECT_TRUE(during.journal.empty());
    EXPECT_EQ(during.inbox.size(), 1u);
    EXPECT_EQ(during.timers.size(), 1u);
    auto counts = h.sync(h.store.counts());
    EXPECT_EQ(counts[std::string(paying_then_charging.name())]
                    [static_cast<std::size_t>(index_status::suspended)],
              1u);

    g.timer.cancel();
    EXPECT_EQ(*h.sync(handle.wait()), 7);
    EXPECT_EQ(watched.commits, 1);  // the final commit carries the signal, the race, the step
    auto after = h.snapshot(handle.id());
    ASSERT_EQ(after.journal.size(), 3u);
    EXPECT_EQ(after.journal[0].kind, op_kind::signal);
    EXPECT_EQ(after.journal[2].name, "charge");
    EXPECT_TRUE(after.inbox.empty());
    EXPECT_TRUE(after.timers.empty());
    eng.stop();
    h.settle();
}

// A worker that dies between the resume and its step's commit: the next one finds the signal
// still in the inbox, makes the same choice, and it is consumed once.
TEST(operations, a_worker_that_dies_after_a_resume_leaves_the_signal_to_the_next) {
    harness h;
    gate stuck(h.io);
    gate open(h.io);
    open.timer.expires_at(asio::steady_timer::time_point::min());
    watched_store first(h.store);
    engine a(h.io.get_executor(), first, h.clock, {.worker = "wa", .seed = 7});
    a.add(paying_then_charging, stuck);
    a.run();
    auto handle = h.sync(a.start(paying_then_charging, ref<order>("o-d")));
    h.sync(a.deliver(handle.id(), "/payment/o-d/received", payment{"tx", 3}, "k"));
    h.settle();
    ASSERT_EQ(h.status(handle.id()), instance_status::suspended);  // resumed: leased
    ASSERT_TRUE(h.snapshot(handle.id()).lease);
    ASSERT_EQ(h.snapshot(handle.id()).inbox.size(), 1u);  // not consumed yet
    first.dead = true;                                    // mid-step

    engine b(h.io.get_executor(), h.store, h.clock, {.worker = "wb", .seed = 8});
    b.add(paying_then_charging, open);
    b.run();
    h.advance(std::chrono::minutes(1));  // a's lease runs out
    EXPECT_EQ(*h.sync(b.wait(handle.id())), 7);
    auto after = h.snapshot(handle.id());
    ASSERT_EQ(after.journal.size(), 3u);
    EXPECT_EQ(after.journal[0].kind, op_kind::signal);
    EXPECT_EQ(after.journal[1].value, 0);  // the payment won the race again
    EXPECT_TRUE(after.inbox.empty());
    if (auto* m = h.memory()) {
        EXPECT_EQ(m->consumed().size(), 1u);
    }
    a.stop();
    b.stop();
    h.settle();
}

TEST(operations, the_timer_wins_when_no_signal_comes_and_a_late_signal_stays_unconsumed) {
    harness h;
    h.eng->add(pay_with_timeout);
    auto handle = h.sync(h.eng->start(pay_with_timeout, ref<order>("o-9")));
    h.advance(std::chrono::days{3});
    EXPECT_EQ(*h.sync(handle.wait()), "payment_timeout");
    auto d = h.sync(h.eng->deliver(handle.id(), "/payment/o-9/received", payment{"late", 1}));
    EXPECT_EQ(d.result, delivery::outcome::finished);
    if (auto* m = h.memory()) {
        EXPECT_TRUE(m->consumed().empty());
    }
}

TEST(operations, a_timer_and_a_signal_due_at_the_same_instant_have_one_winner_the_signal) {
    harness h({.max_hot = 0});
    h.eng->add(pay_with_timeout);
    auto handle = h.sync(h.eng->start(pay_with_timeout, ref<order>("o-10")));
    // The signal arrives exactly at the due time, while the worker is not looking: both are
    // due when it wakes. The signal was there by the due time, so it wins; only one entry.
    h.eng->stop();
    h.clock.advance(std::chrono::days{3});
    h.sync(h.store.deliver(handle.id(), inbox_entry{0, "k", "/payment/o-10/received",
                                                    payment{"on-time", 1}, h.clock.now()}));
    h.eng.emplace(h.io.get_executor(), h.store, h.clock, engine_options{.worker = "w2", .seed = 7});
    h.eng->add(pay_with_timeout);
    h.eng->run();
    h.settle();
    EXPECT_EQ(*h.sync(handle.wait()), "paid on-time");
    auto snap = h.snapshot(handle.id());
    ASSERT_EQ(snap.journal.size(), 2u);
    EXPECT_EQ(snap.journal[0].kind, op_kind::signal);
    EXPECT_TRUE(snap.timers.empty());
    if (auto* m = h.memory()) {
        EXPECT_EQ(m->consumed().size(), 1u);
    }
}

// ---- named arms, deadlines, timeouts ----

// A worker restarts: the engine is dropped and another one takes the store over.
template <class Def>
void restart(harness& h, const Def& def) {
    h.eng->stop();
    h.settle();
    h.eng.emplace(h.io.get_executor(), h.store, h.clock, engine_options{.worker = "w2", .seed = 7});
    h.eng->add(def);
    h.eng->run();
    h.settle();
}

durable<std::string> pay_or_expire(context& ctx, ref<order> o) {
    auto expiry = ctx.timer(std::chrono::days{3}, "payment timeout");
    auto paid = ctx.wait<payment>("/payment/" + o.id() + "/received");
    auto r = co_await ctx.race(paid, expiry);
    std::string out = "paid";
    if (r.is(expiry)) out = "expired";
    if (!r.is(paid) && !r.is(expiry)) out = "neither";
    co_await ctx.sleep(1h);  // replayed after this, the race included
    co_return out;
}
inline constexpr auto pay_or_expiring = define<pay_or_expire>("/order/:order/expiry");

TEST(operations, a_timer_passed_by_name_is_identified_in_the_race_result_also_on_replay) {
    harness h({.max_hot = 0});
    h.eng->add(pay_or_expiring);
    auto expired = h.sync(h.eng->start(pay_or_expiring, ref<order>("o-e")));
    auto paid = h.sync(h.eng->start(pay_or_expiring, ref<order>("o-p")));
    h.advance(std::chrono::days{1});
    h.sync(h.eng->deliver(paid.id(), "/payment/o-p/received", payment{"tx", 1}));
    h.advance(std::chrono::days{2});
    restart(h, pay_or_expiring);
    h.advance(1h);
    EXPECT_EQ(*h.sync(expired.wait()), "expired");
    EXPECT_EQ(*h.sync(paid.wait()), "paid");
    auto journal = h.snapshot(expired.id()).journal;
    ASSERT_EQ(journal.size(), 3u);
    EXPECT_EQ(journal[0].kind, op_kind::timer);
    EXPECT_EQ(journal[0].name, "payment timeout");
    EXPECT_EQ(journal[1].kind, op_kind::race);
    EXPECT_EQ(journal[1].value, 1);
}

durable<int> answer_later(context& ctx) {
    co_await ctx.sleep(2h);
    co_return 42;
}

durable<std::string> branch_or_timer(context& ctx, std::string) {
    auto answer = ctx.spawn(answer_later(ctx));
    auto r = co_await ctx.race(answer, ctx.timer(3h));
    co_return r.is(answer) ? std::string("branch") : std::string("timer");
}
inline constexpr auto branch_racing = define<branch_or_timer>("/branch-race/:n");

TEST(operations, a_branch_passed_by_reference_is_identified_in_the_race_result) {
    harness h;
    h.eng->add(branch_racing);
    auto handle = h.sync(h.eng->start(branch_racing, std::string("1")));
    h.advance(2h);
    EXPECT_EQ(*h.sync(handle.wait()), "branch");
}

// ---- a timer pokes the wake loop only when it is due before the loop looks again ----

durable<int> nap(context& ctx, std::string ms) {
    co_await ctx.sleep(std::chrono::milliseconds(std::stoi(ms)));
    co_return std::stoi(ms);
}
inline constexpr auto napping = define<nap>("/nap/:ms");

// Counts the wake loop's rounds: each asks the store for what is due.
struct round_counting_store final : forwarding_store {
    using forwarding_store::forwarding_store;
    int rounds = 0;
    asio::awaitable<std::vector<std::string>> due(time_point now, std::size_t limit,
                                                  version_refusals refused) override {
        ++rounds;
        return forwarding_store::due(now, limit, std::move(refused));
    }
};

TEST(operations, a_timer_due_after_the_wake_loop_looks_again_does_not_wake_the_loop) {
    harness h;
    h.eng.reset();  // the only worker: the one whose rounds are counted
    round_counting_store counted(h.store);
    engine eng(h.io.get_executor(), counted, h.clock,
               {.worker = "w2", .poll_interval = 1s, .seed = 7});
    eng.add(napping);
    eng.run();
    h.settle();
    int before = counted.rounds;
    auto late = h.sync(eng.start(napping, std::string("7200000")));  // 2 h: after the poll
    h.settle();
    EXPECT_EQ(counted.rounds, before);
    // One due before the loop's next look (1 s) wakes it, so that it fires on time.
    auto soon = h.sync(eng.start(napping, std::string("100")));
    h.settle();
    EXPECT_GT(counted.rounds, before);
    h.advance(100ms);
    EXPECT_EQ(h.status(soon.id()), instance_status::completed);
    EXPECT_EQ(h.status(late.id()), instance_status::suspended);
    h.advance(2h);
    EXPECT_EQ(h.status(late.id()), instance_status::completed);
    eng.stop();
    h.settle();  // its last calls (the worker's withdrawal) reach the store while it lives
}

// Counts ticks until an absolute deadline, computed once.
durable<int> ticks_until_deadline(context& ctx, std::string) {
    auto deadline = (co_await ctx.now()) + 10h;
    int ticks = 0;
    for (;;) {
        auto expiry = ctx.timer_at(deadline, "deadline");
        auto r = co_await ctx.race(ctx.wait("/tick"), expiry);
        if (r.is(expiry)) co_return ticks;
        ++ticks;
    }
}
inline constexpr auto ticking = define<ticks_until_deadline>("/ticks/:n");

TEST(operations, timer_at_fires_at_its_absolute_time_across_loops_and_restarts) {
    harness h({.max_hot = 0});
    h.eng->add(ticking);
    auto start = h.clock.now();
    auto handle = h.sync(h.eng->start(ticking, std::string("1")));
    h.advance(3h);
    h.sync(h.eng->deliver(handle.id(), "/tick", nullptr));
    h.advance(1h);
    h.sync(h.eng->deliver(handle.id(), "/tick", nullptr));
    auto timers = h.snapshot(handle.id()).timers;
    ASSERT_EQ(timers.size(), 1u);
    EXPECT_EQ(timers[0].due, start + 10h);  // not 10h after the last tick
    EXPECT_EQ(timers[0].name, "deadline");
    restart(h, ticking);
    h.advance(2h);
    h.sync(h.eng->deliver(handle.id(), "/tick", nullptr));
    h.advance(4h - 1s);
    EXPECT_EQ(h.status(handle.id()), instance_status::suspended);
    h.advance(1s);
    EXPECT_EQ(*h.sync(handle.wait()), 3);
}

durable<int> past_deadline(context& ctx, std::string) {
    auto now = co_await ctx.now();
    co_await ctx.timer_at(now - 1h);
    co_return 1;
}
inline constexpr auto past_deadlines = define<past_deadline>("/past/:n");

TEST(operations, a_timer_at_a_past_time_fires_at_once) {
    harness h;
    h.eng->add(past_deadlines);
    auto handle = h.sync(h.eng->start(past_deadlines, std::string("1")));
    h.advance(1ms);
    EXPECT_EQ(*h.sync(handle.wait()), 1);
}

durable<std::string> two_payments_or_timeout(context& ctx, ref<order> o) {
    const std::string path = "/payment/" + o.id() + "/received";
    std::optional<payment> first = co_await ctx.wait<payment>(path).or_timeout(1h);
    std::optional<payment> second = co_await ctx.wait<payment>(path).or_timeout(1h, "second");
    std::string out = first ? first->tx : std::string("none");
    out += second ? "+" + second->tx : std::string("+none");
    co_return out;
}
inline constexpr auto timing_out = define<two_payments_or_timeout>("/order/:order/timeout");

TEST(operations, or_timeout_gives_the_payload_or_nothing_and_replays_as_a_race) {
    harness h({.max_hot = 0});
    h.eng->add(timing_out);
    auto handle = h.sync(h.eng->start(timing_out, ref<order>("o-t")));
    h.advance(30min);
    h.sync(h.eng->deliver(handle.id(), "/payment/o-t/received", payment{"tx-1", 1}));
    restart(h, timing_out);
    h.advance(1h);
    EXPECT_EQ(*h.sync(handle.wait()), "tx-1+none");
    auto journal = h.snapshot(handle.id()).journal;
    ASSERT_EQ(journal.size(), 4u);
    EXPECT_EQ(journal[0].kind, op_kind::signal);
    EXPECT_EQ(journal[1].kind, op_kind::race);
    EXPECT_EQ(journal[1].value, 0);
    EXPECT_EQ(journal[2].kind, op_kind::timer);
    EXPECT_EQ(journal[2].name, "second");
    EXPECT_EQ(journal[3].value, 1);
}

durable<bool> void_signal_or_timeout(context& ctx, std::string) {
    bool came = co_await ctx.wait<void>("/ping").or_timeout(1h);
    co_return came;
}
inline constexpr auto pinging = define<void_signal_or_timeout>("/ping/:n");

TEST(operations, or_timeout_on_a_void_signal_says_whether_it_came) {
    harness h;
    h.eng->add(pinging);
    auto came = h.sync(h.eng->start(pinging, std::string("1")));
    auto late = h.sync(h.eng->start(pinging, std::string("2")));
    h.sync(h.eng->deliver(came.id(), "/ping", nullptr));
    h.advance(1h);
    EXPECT_TRUE(*h.sync(came.wait()));
    EXPECT_FALSE(*h.sync(late.wait()));
}

// ---- recorded values ----

struct recorded {
    std::int64_t now = 0;
    std::uint64_t random = 0;
    std::string uuid;
    NLOHMANN_DEFINE_TYPE_INTRUSIVE(recorded, now, random, uuid)
};

durable<recorded> record_values(context& ctx, std::string) {
    auto t = co_await ctx.now();
    auto r = co_await ctx.random();
    auto u = co_await ctx.uuid();
    co_await ctx.sleep(1h);  // evicted here, replayed after
    co_return recorded{t.time_since_epoch().count(), r, u};
}
inline constexpr auto recording = define<record_values>("/values/:n");

TEST(operations, now_random_and_uuid_are_recorded_and_replayed) {
    harness h({.max_hot = 0});
    h.eng->add(recording);
    auto start = h.clock.now();
    auto handle = h.sync(h.eng->start(recording, std::string("1")));
    auto journal = h.snapshot(handle.id()).journal;
    ASSERT_EQ(journal.size(), 3u);
    h.advance(1h);
    auto r = h.sync(handle.wait());
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->now, start.time_since_epoch().count());
    EXPECT_EQ(nlohmann::json(r->random), journal[1].value);
    EXPECT_EQ(nlohmann::json(r->uuid), journal[2].value);
    EXPECT_EQ(r->uuid.size(), 36u);
    EXPECT_EQ(r->uuid[14], '4');
}

// ---- spawn, all, any ----

durable<int> slow_double(context& ctx, int x, std::string timer) {
    co_await ctx.sleep(std::chrono::seconds(x), timer);
    co_return x * 2;
}

durable<int> fan_out(context& ctx, std::string) {
    auto a = ctx.spawn(slow_double(ctx, 3, "a"));
    auto b = ctx.spawn(slow_double(ctx, 1, "b"));
    auto [x, y] = co_await ctx.all(a, b);
    auto first = co_await ctx.any(slow_double(ctx, 5, "c"), slow_double(ctx, 2, "d"));
    int z = first.is<0>() ? first.get<0>() : first.get<1>() * 100;
    auto c = ctx.spawn(slow_double(ctx, 1, "e"));
    int w = co_await c;
    co_return x + y + z + w;
}
inline constexpr auto fanning = define<fan_out>("/fan/:n");

TEST(operations, spawned_branches_join_through_all_any_and_co_await) {
    for (std::size_t max_hot : {std::size_t{10}, std::size_t{0}}) {
        harness h({.max_hot = max_hot});
        h.eng->add(fanning);
        auto handle = h.sync(h.eng->start(fanning, std::string("1")));
        for (int i = 0; i < 12; ++i) h.advance(1s);
        auto r = h.sync(handle.wait());
        ASSERT_TRUE(r.has_value()) << r.error().message;
        EXPECT_EQ(*r, 6 + 2 + 400 + 2) << "max_hot " << max_hot;
        EXPECT_TRUE(h.snapshot(handle.id()).timers.empty());  // the loser "c" was cancelled
    }
}

// ---- cancellation ----

TEST(operations, cancelling_a_suspended_instance_abandons_it_and_its_timers) {
    harness h;
    h.eng->add(sleeping);
    auto handle = h.sync(h.eng->start(sleeping, ref<order>("o-11")));
    EXPECT_EQ(h.status(handle.id()), instance_status::suspended);
    EXPECT_TRUE(h.sync(handle.cancel()));
    auto r = h.sync(handle.wait());
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().status, instance_status::cancelled);
    EXPECT_TRUE(h.snapshot(handle.id()).timers.empty());
    h.advance(std::chrono::days{4});
    EXPECT_EQ(h.status(handle.id()), instance_status::cancelled);
    EXPECT_FALSE(h.sync(handle.cancel()));
}

TEST(operations, cancelling_an_evicted_instance_works_without_loading_it) {
    harness h({.max_hot = 0});
    h.eng->add(sleeping);
    auto handle = h.sync(h.eng->start(sleeping, ref<order>("o-12")));
    EXPECT_TRUE(h.sync(handle.cancel()));
    EXPECT_EQ(h.status(handle.id()), instance_status::cancelled);
}

// Found by fuzzing: nlohmann copies and prints values recursively, so a journaled value
// nested tens of thousands deep crashed the worker each time its instance loaded. A step
// cannot record one; an entry holding one does not decode.
durable<std::string> deep_result(context& ctx, ref<order>) {
    try {
        co_await ctx.run("deep", [] {
            nlohmann::json v = 1;
            for (std::size_t i = 0; i < max_value_depth + 1; ++i) v = nlohmann::json::array({v});
            return v;
        });
    } catch (const step_failed& e) {
        co_return std::string(e.what());
    }
    co_return std::string("recorded");
}
inline constexpr auto deep_step = define<deep_result>("/order/:order/deep");

TEST(operations, a_step_result_nested_too_deep_fails_the_step) {
    harness h;
    h.eng->add(deep_step);
    auto handle = h.sync(h.eng->start(deep_step, ref<order>("o-deep")));
    auto r = h.sync(handle.wait());
    ASSERT_TRUE(r.has_value());
    EXPECT_NE(r->find("nests deeper than 256"), std::string::npos) << *r;
}

TEST(journal, a_steps_start_and_attempts_are_written_only_when_they_say_something) {
    auto at = time_point(std::chrono::milliseconds(1'700'000'000'123));
    journal_entry quick{0, op_kind::run, "charge", 1, false, at};
    quick.started = at;
    auto plain = nlohmann::json(quick);
    EXPECT_FALSE(plain.contains("started"));
    EXPECT_FALSE(plain.contains("attempts"));
    auto back = plain.get<journal_entry>();
    EXPECT_EQ(back.started, at);  // an entry without it started when it was committed
    EXPECT_EQ(back.attempts, 1u);

    journal_entry slow = quick;
    slow.started = at - 2s;
    slow.attempts = 4;
    auto j = nlohmann::json(slow);
    EXPECT_EQ(j["attempts"], 4);
    auto again = j.get<journal_entry>();
    EXPECT_EQ(again.started, at - 2s);
    EXPECT_EQ(again.attempts, 4u);
    EXPECT_EQ(again, quick);  // the same operation and outcome: replay compares no times
}

TEST(journal, entries_that_are_not_entries_do_not_decode) {
    auto entry = [](std::string text) { return nlohmann::json::parse(text).get<journal_entry>(); };
    EXPECT_EQ(entry(R"({"seq": 3, "kind": "run", "name": "charge", "value": 700})").seq, 3u);
    EXPECT_THROW(entry(R"({"seq": 1e20, "kind": "run", "name": "charge"})"), std::invalid_argument);
    EXPECT_THROW(entry(R"({"seq": -1, "kind": "run", "name": "charge"})"), std::invalid_argument);
    std::string deep = std::string(20'000, '[') + std::string(20'000, ']');
    EXPECT_THROW(entry(R"({"seq": 0, "kind": "run", "name": "x", "value": )" + deep + "}"),
                 std::invalid_argument);
}

}  // namespace
}  // namespace keel::process
