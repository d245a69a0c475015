// Rolling deploys: two workers share one store, one with the old code of a definition and
// one with the new (both compiled here, under one definition name). Instances in flight in
// every state cross the change while starts, signals and time go on; at the end every one
// has completed, none is parked or failed, and every side effect happened once.

#include <gtest/gtest.h>

#include <boost/asio/use_awaitable.hpp>
#include <keel/process/child.hpp>
#include <map>

#include "harness.hpp"

namespace keel::process {
namespace {

using namespace std::chrono_literals;
using test::harness;

// The side effects of all workers, by "<instance> <step>": which workers performed them.
using ledger = std::map<std::string, std::vector<std::string>>;

// One worker's dependencies. A step takes two seconds and has its effect only if its worker
// is still up when it ends: a stopped worker is a process that died mid-step.
struct shop {
    ledger* effects;
    manual_clock* clock;
    asio::any_io_executor ex;
    std::string worker;
    bool up = true;

    template <class T>
    T& get() {
        return *this;
    }
    auto effect(std::string what) {
        return [this, what]() -> asio::awaitable<bool> {
            co_await clock->async_wait_until(ex, clock->now() + 2s, asio::use_awaitable);
            if (!up) throw std::runtime_error("worker stopped");
            (*effects)[what].push_back(worker);
            co_return true;
        };
    }
};

durable<std::string> fulfil_v1(context& ctx, std::string order, shop& s) {
    co_await ctx.wait("/paid/" + order);
    co_await ctx.run("charge", s.effect(ctx.id() + " charge"));
    co_await ctx.sleep(30s, "cool-off");
    co_await ctx.run("dispatch", s.effect(ctx.id() + " dispatch"));
    co_await ctx.wait("/delivered/" + order);
    co_return "delivered";
}
inline constexpr auto fulfilment_v1 = define<fulfil_v1>("/fulfil/:order").version("1");

// Version 2 tells the customer after the dispatch: behind a patch, so instances that passed
// that point with version 1 replay without it.
durable<std::string> fulfil_v2(context& ctx, std::string order, shop& s) {
    co_await ctx.wait("/paid/" + order);
    co_await ctx.run("charge", s.effect(ctx.id() + " charge"));
    co_await ctx.sleep(30s, "cool-off");
    co_await ctx.run("dispatch", s.effect(ctx.id() + " dispatch"));
    if (ctx.patched("notify-customer")) co_await ctx.run("notify", s.effect(ctx.id() + " notify"));
    co_await ctx.wait("/delivered/" + order);
    co_return "delivered";
}
inline constexpr auto fulfilment_v2 = define<fulfil_v2>("/fulfil/:order").version("2");

std::string order(int i) {
    return "o" + std::to_string(i);
}

struct rolling_deploy : ::testing::Test {
    rolling_deploy() { h.eng->add(fulfilment_v1, old_deps); }

    engine& old_worker() { return *h.eng; }
    engine& new_worker() { return *fresh; }

    void start_new_worker() {
        fresh.emplace(h.io.get_executor(), h.store, h.clock,
                      engine_options{.worker = "new", .max_hot = 0, .seed = 7});
        fresh->add(fulfilment_v2, new_deps);
        fresh->run();
        h.settle();
    }
    void stop_old_worker() {
        old_deps.up = false;
        h.eng->stop();
        h.settle();
    }

    // Lets steps and wake-ups run a second at a time (no worker misses a lease renewal).
    void tick(int seconds) {
        for (int i = 0; i < seconds; ++i) h.advance(1s);
    }
    // Through the cool-off timers and the steps after them.
    void pass_cool_off() { tick(40); }

    std::string start(engine& via, int i) {
        if (via.worker() == "old") return h.sync(via.start(fulfilment_v1, order(i))).id();
        return h.sync(via.start(fulfilment_v2, order(i))).id();
    }
    void signal(engine& via, int i, std::string_view what) {
        auto id = fulfilment_v1.instance_id(order(i));
        auto path = "/" + std::string(what) + "/" + order(i);
        h.sync(via.deliver(id, path, nlohmann::json{{"order", order(i)}}, "webhook"));
    }

    // Every instance completed, and every step of its journal had its effect exactly once.
    void expect_all_done(int instances) {
        std::size_t effects = 0;
        for (int i = 0; i < instances; ++i) {
            auto id = fulfilment_v1.instance_id(order(i));
            auto snap = h.snapshot(id);
            ASSERT_EQ(snap.status, instance_status::completed)
                << id << ": " << to_string(snap.status) << " " << snap.error.value_or("");
            for (const auto& e : snap.journal) {
                if (e.kind != op_kind::run) continue;
                auto done = effects_.find(id + " " + e.name);
                ASSERT_NE(done, effects_.end()) << id << " " << e.name << " had no effect";
                EXPECT_EQ(done->second.size(), 1u)
                    << id << " " << e.name << " happened " << done->second.size() << " times";
                ++effects;
                if (snap.version == "2") {
                    EXPECT_EQ(done->second.front(), "new") << id << ": version 2 ran on old code";
                }
            }
        }
        EXPECT_EQ(effects, effects_.size()) << "an effect without a journal entry";
    }
    int count(const std::function<bool(const instance_snapshot&)>& pred, int instances) {
        int n = 0;
        for (int i = 0; i < instances; ++i)
            n += pred(h.snapshot(fulfilment_v1.instance_id(order(i)))) ? 1 : 0;
        return n;
    }
    static bool notified(const instance_snapshot& s) {
        return std::ranges::any_of(s.journal, [](auto& e) { return e.name == "notify"; });
    }

    harness h{{.worker = "old", .max_hot = 0}};
    ledger effects_;
    shop old_deps{&effects_, &h.clock, h.io.get_executor(), "old"};
    shop new_deps{&effects_, &h.clock, h.io.get_executor(), "new"};
    std::optional<engine> fresh;
};

constexpr int in_flight = 200;
constexpr int started_after = 40;  // started during and after the change

// The old code runs 200 instances: a quarter shipped and waiting for delivery, a quarter
// mid-step, half waiting for payment.
void run_up_to_the_change(rolling_deploy& t) {
    for (int i = 0; i < in_flight; ++i) t.start(t.old_worker(), i);
    for (int i = 0; i < in_flight; i += 4) t.signal(t.old_worker(), i, "paid");
    t.tick(2);
    t.pass_cool_off();
    for (int i = 1; i < in_flight; i += 4) t.signal(t.old_worker(), i, "paid");
    t.tick(1);  // charging now
}

// Everything not yet paid gets paid, everything gets delivered, through `via`.
void finish_through(rolling_deploy& t, engine& via, int instances) {
    for (int i = 0; i < instances; ++i) t.signal(via, i, "paid");  // duplicates are no-ops
    t.tick(10);
    t.pass_cool_off();
    for (int i = 0; i < instances; ++i) t.signal(via, i, "delivered");
    t.tick(10);
}

TEST_F(rolling_deploy, the_old_worker_stops_and_the_new_one_takes_over) {
    run_up_to_the_change(*this);
    stop_old_worker();  // mid-step: a quarter of the instances are charging
    tick(5);
    start_new_worker();
    tick(60);  // the old worker's leases expire: the new one runs their steps again
    for (int i = in_flight; i < in_flight + started_after; ++i) start(new_worker(), i);
    for (int i = 2; i < in_flight; i += 4) signal(new_worker(), i, "paid");
    tick(10);
    pass_cool_off();
    finish_through(*this, new_worker(), in_flight + started_after);

    expect_all_done(in_flight + started_after);
    // Those shipped before the change replayed past the patch; the others took it.
    EXPECT_EQ(count(notified, in_flight + started_after), in_flight + started_after - 50);
}

TEST_F(rolling_deploy, the_new_worker_starts_beside_the_old_one_which_then_stops) {
    run_up_to_the_change(*this);
    start_new_worker();
    tick(6);  // one heartbeat: each worker knows the other
    // Both serve requests: starts, payments and deliveries arrive at either.
    for (int i = in_flight; i < in_flight + started_after; ++i)
        start(i % 2 ? old_worker() : new_worker(), i);
    for (int i = 2; i < in_flight + started_after; i += 4)
        signal(i % 3 ? new_worker() : old_worker(), i, "paid");
    tick(10);
    pass_cool_off();
    for (int i = 0; i < in_flight; i += 2)
        signal(i % 3 ? old_worker() : new_worker(), i, "delivered");
    tick(10);
    for (int i = 3; i < in_flight; i += 4) signal(old_worker(), i, "paid");
    tick(1);
    stop_old_worker();  // mid-step again
    tick(60);
    finish_through(*this, new_worker(), in_flight + started_after);

    expect_all_done(in_flight + started_after);
    // The old worker met instances the new code had moved past the patch, and gave them back.
    int given_back = count([](const instance_snapshot& s) { return s.left.has_value(); },
                           in_flight + started_after);
    EXPECT_GT(given_back, 0);
    int newer = count([](const instance_snapshot& s) { return s.version == "2"; },
                      in_flight + started_after);
    int upgraded = count([](const instance_snapshot& s) { return s.version == "1" && notified(s); },
                         in_flight + started_after);
    EXPECT_GT(newer, 0);
    EXPECT_GT(upgraded, 0);
    std::cout << "[ rolling  ] started by version 2: " << newer
              << "; version 1 instances that took the patch: " << upgraded
              << "; given back by the old worker: " << given_back << "\n";
    for (int i = 0; i < in_flight + started_after; ++i) {
        auto snap = h.snapshot(fulfilment_v1.instance_id(order(i)));
        if (!snap.left) continue;
        EXPECT_EQ(snap.left->worker, "old");
        EXPECT_EQ(snap.left->version, "1");
        EXPECT_NE(snap.left->reason.find("journal mismatch"), std::string::npos)
            << snap.left->reason;
        EXPECT_NE(snap.left->reason.find("worker new runs version \"2\""), std::string::npos)
            << snap.left->reason;
    }
}

// A rollback: while the worker with the newer code is up, the old one leaves it what that
// code started; once none is, the old one takes those instances, runs what it can replay,
// and parks only what it cannot.
TEST_F(rolling_deploy,
       without_a_worker_for_the_newer_code_the_old_one_parks_what_it_cannot_replay) {
    start_new_worker();
    tick(6);
    for (int i = 1; i <= 3; ++i) start(new_worker(), i);
    signal(new_worker(), 1, "paid");
    signal(new_worker(), 3, "paid");
    tick(2);
    pass_cool_off();  // o1 and o3 have passed the patch; o2 waits for payment
    signal(old_worker(), 1, "delivered");
    tick(10);
    EXPECT_EQ(h.status(fulfilment_v1.instance_id(order(1))), instance_status::completed);
    for (const auto& [effect, workers] : effects_)
        EXPECT_EQ(workers, std::vector<std::string>{"new"}) << effect;

    fresh.reset();  // the new worker stops and withdraws
    h.settle();
    signal(old_worker(), 2, "paid");
    tick(2);
    pass_cool_off();
    signal(old_worker(), 2, "delivered");
    signal(old_worker(), 3, "delivered");
    tick(5);
    auto ran = h.snapshot(fulfilment_v1.instance_id(order(2)));
    EXPECT_EQ(ran.status, instance_status::completed);
    EXPECT_FALSE(notified(ran));  // the old code has no notification
    auto parked = h.snapshot(fulfilment_v1.instance_id(order(3)));
    EXPECT_TRUE(parked.parked);
    EXPECT_NE(parked.error.value_or("").find("journal mismatch"), std::string::npos);
}

// ---- Upgrading Keel itself: a worker of a build before child processes ----
//
// Such a worker announces no store level (level 0). It runs a child's definition like any
// other and, not knowing `parent`, never tells the parent how the child ended: so a parent
// starts no child while one is alive, and does once it has left.

durable<std::string> grown(context&, std::string name) {
    co_return name + "!";
}
inline constexpr auto grown_flow = define<grown>("/grown/:name");

durable<std::string> elder(context& ctx, std::string name) {
    auto kid = co_await ctx.start(grown_flow, name);
    co_return co_await ctx.join(kid);
}
inline constexpr auto elder_flow = define<elder>("/elder/:name");

TEST(keel_upgrade, a_parent_starts_its_child_once_no_worker_of_a_build_before_children_is_alive) {
    harness h;  // heartbeat 5 s
    h.eng->add(grown_flow);
    h.eng->add(elder_flow);
    auto now = h.clock.now();
    h.sync(h.store.announce(worker_record{"old", {{"/grown/:name", ""}}, now, now + 1h, 0}));
    h.sync(h.store.announce(worker_record{"peer", {{"/grown/:name", ""}}, now, now + 1h}));
    auto live = h.sync(h.store.workers(now));
    ASSERT_EQ(live.size(), 3u);  // sorted by name: old, peer, w1 (this one)
    EXPECT_EQ(live[0].worker, "old");
    EXPECT_EQ(live[0].level, 0u);  // on Redis: an announcement without the member
    EXPECT_EQ(live[1].level, store_level);

    h.advance(5s);  // a heartbeat reads who is live
    h.sync(h.eng->start(elder_flow, std::string("a")));
    for (int i = 0; i < 6; ++i) h.advance(5s);
    EXPECT_FALSE(h.sync(h.store.load("grown/a", false))) << "a child started beside level 0";
    EXPECT_FALSE(is_final(h.status("elder/a")));

    h.sync(h.store.withdraw("old"));
    for (int i = 0; i < 3; ++i) h.advance(5s);
    auto done = h.snapshot("elder/a");
    ASSERT_EQ(done.status, instance_status::completed) << done.error.value_or("");
    EXPECT_EQ(done.result, nlohmann::json("a!"));
}

}  // namespace
}  // namespace keel::process
