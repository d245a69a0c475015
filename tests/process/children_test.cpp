// Child processes (ctx.start, ctx.join, ctx.call): a child started once, its outcome in its
// parent exactly once, failures as child_failed, races with timers, what an ending parent
// does to its children, and restarts of the worker in between.

#include <gtest/gtest.h>

#include <chrono>
#include <keel/process/child.hpp>

#include "harness.hpp"

namespace keel::process {
namespace {

using namespace std::chrono_literals;
using test::harness;

// What the children did, across replays: a run step counts only live executions.
struct ledger {
    std::map<std::string, int> runs;  // child name -> live executions of its work
};
struct ledger_deps {
    ledger book;
    template <class T>
    T& get() {
        return book;
    }
};

// ---- children ----

// Doubles n (once per instance: the step is journaled).
durable<int> double_it(context& ctx, std::string name, ledger& book) {
    co_await ctx.run("work", [&] { ++book.runs[name]; });
    co_return static_cast<int>(name.size()) * 2;
}
inline constexpr auto doubling = define<double_it>("/double/:name");

// Fails with the given name as its error.
durable<int> fail_with(context& ctx, std::string reason) {
    co_await ctx.now();
    throw std::runtime_error("refused: " + reason);
}
inline constexpr auto failing = define<fail_with>("/fail/:reason");

// Waits for /go, then answers its name.
durable<std::string> wait_for_go(context& ctx, std::string name) {
    co_await ctx.wait("/go");
    co_return "went " + name;
}
inline constexpr auto waiting = define<wait_for_go>("/wait/:name");

// ---- parents ----

durable<int> call_one(context& ctx, std::string name) {
    co_return co_await ctx.call(doubling, name);
}
inline constexpr auto calling = define<call_one>("/call/:name");

// Starts three children, then joins them in reverse order.
durable<int> fan_out_three(context& ctx, std::string name) {
    auto a = co_await ctx.start(doubling, name + "-a");
    auto b = co_await ctx.start(doubling, name + "-bb");
    auto c = co_await ctx.start(doubling, name + "-ccc");
    int sum = co_await ctx.join(c);
    sum += co_await ctx.join(b);
    sum += co_await ctx.join(a);
    co_return sum;
}
inline constexpr auto fanning = define<fan_out_three>("/fan/:name");

durable<std::string> catch_failure(context& ctx, std::string reason) {
    try {
        co_await ctx.call(failing, reason);
    } catch (const child_failed& e) {
        co_return e.child_id() + " " + std::string(to_string(e.status())) + ": " + e.error();
    }
    co_return "no failure";
}
inline constexpr auto catching = define<catch_failure>("/catch/:reason");

durable<int> let_failure_through(context& ctx, std::string reason) {
    co_return co_await ctx.call(failing, reason);
}
inline constexpr auto not_catching = define<let_failure_through>("/uncaught/:reason");

// Races its child with an hour: "timeout" when the hour wins.
durable<std::string> race_child(context& ctx, std::string name) {
    auto c = co_await ctx.start(waiting, name);
    auto r = co_await ctx.race(ctx.join(c), ctx.timer(1h, "patience"));
    co_return r.is<0>() ? r.get<0>() : std::string("timeout");
}
inline constexpr auto racing = define<race_child>("/race/:name");

// Starts a waiting child and ends without joining it; `close`: "abandon" or "cancel".
durable<void> start_and_leave(context& ctx, std::string name, std::string close) {
    child_options options{close == "abandon" ? parent_close::abandon : parent_close::cancel};
    co_await ctx.start(options, waiting, name);
}
inline constexpr auto leaving = define<start_and_leave>("/leave/:name/:close");

// Sleeps an hour before it joins: the child ends first, its outcome waits in the inbox.
durable<int> join_late(context& ctx, std::string name) {
    auto c = co_await ctx.start(doubling, name);
    co_await ctx.sleep(1h);
    co_return co_await ctx.join(c);
}
inline constexpr auto late = define<join_late>("/late/:name");

// A chain: /chain/2 starts /chain/1 starts /chain/0, which waits for /go.
durable<std::string> chain(context& ctx, int depth);
inline constexpr auto chained = define<chain>("/chain/:depth");
durable<std::string> chain(context& ctx, int depth) {
    if (depth == 0) {
        co_await ctx.wait("/go");
        co_return "bottom";
    }
    co_return co_await ctx.call(chained, depth - 1);
}

// Starts as its child an instance that its caller may have started on its own.
durable<std::string> adopt_waiting(context& ctx, std::string name) {
    co_return co_await ctx.call(waiting, name);
}
inline constexpr auto adopting = define<adopt_waiting>("/adopt/:name");

// A parameter of the wrong type does not compile.
template <class Def, class... P>
concept startable = requires(context& ctx, const Def& def, P... p) {
    ctx.start(def, p...);
};
static_assert(startable<decltype(doubling), std::string>);
static_assert(!startable<decltype(doubling), int>);
static_assert(!startable<decltype(doubling)>);
static_assert(!startable<decltype(doubling), std::string, std::string>);
static_assert(startable<decltype(chained), short>);

// Sends wait/<name> `times` notes (which it does not wait for): each call a delivery.
durable<int> tell_go(context& ctx, std::string name, int times) {
    int reached = 0;
    for (int i = 0; i < times; ++i) reached += co_await ctx.deliver("wait/" + name, "/note", i);
    co_return reached;
}
inline constexpr auto telling = define<tell_go>("/tell/:name/:times");

template <class... D>
void add_all(harness& h, ledger_deps& deps, const D&... defs) {
    (h.eng->add(defs, deps), ...);
}

struct children_test : ::testing::TestWithParam<std::size_t> {
    harness h{{.max_hot = GetParam()}};
    ledger_deps deps;
    void SetUp() override {
        add_all(h, deps, doubling, failing, waiting, calling, fanning, catching, not_catching,
                racing, leaving, late, chained, adopting, telling);
    }
};

TEST_P(children_test, a_call_returns_the_childs_result_and_starts_it_once) {
    auto parent = h.sync(h.eng->start(calling, std::string("abc")));
    auto r = h.sync(parent.wait());
    ASSERT_TRUE(r.has_value()) << r.error().message;
    EXPECT_EQ(*r, 6);
    EXPECT_EQ(deps.book.runs["abc"], 1);
    auto child = h.snapshot("double/abc");
    EXPECT_EQ(child.status, instance_status::completed);
    EXPECT_EQ(child.parent, parent.id());
    EXPECT_TRUE(h.snapshot(parent.id()).parent.empty());
}

TEST_P(children_test, children_joined_in_any_order_each_deliver_once) {
    auto parent = h.sync(h.eng->start(fanning, std::string("x")));
    auto r = h.sync(parent.wait());
    ASSERT_TRUE(r.has_value()) << r.error().message;
    EXPECT_EQ(*r, 2 * (3 + 4 + 5));
    for (auto name : {"x-a", "x-bb", "x-ccc"}) EXPECT_EQ(deps.book.runs[name], 1) << name;
    auto snap = h.snapshot(parent.id());
    EXPECT_TRUE(snap.inbox.empty()) << "every outcome consumed, none twice";
}

TEST_P(children_test, a_failed_child_is_a_child_failed_its_parent_can_catch) {
    auto parent = h.sync(h.eng->start(catching, std::string("no-funds")));
    auto r = h.sync(parent.wait());
    ASSERT_TRUE(r.has_value()) << r.error().message;
    EXPECT_EQ(*r, "fail/no-funds failed: refused: no-funds");
}

TEST_P(children_test, an_uncaught_child_failure_fails_the_parent_naming_the_child) {
    auto parent = h.sync(h.eng->start(not_catching, std::string("closed")));
    auto r = h.sync(parent.wait());
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().status, instance_status::failed);
    EXPECT_NE(r.error().message.find("child process fail/closed failed: refused: closed"),
              std::string::npos)
        << r.error().message;
}

TEST_P(children_test, a_child_races_with_a_timer_either_way) {
    auto quick = h.sync(h.eng->start(racing, std::string("quick")));
    auto slow = h.sync(h.eng->start(racing, std::string("slow")));
    h.advance(10min);
    h.sync(h.eng->deliver("wait/quick", "/go", nullptr));
    auto r = h.sync(quick.wait());
    ASSERT_TRUE(r.has_value()) << r.error().message;
    EXPECT_EQ(*r, "went quick");
    h.advance(1h);
    auto s = h.sync(slow.wait());
    ASSERT_TRUE(s.has_value()) << s.error().message;
    EXPECT_EQ(*s, "timeout");
    // The slow parent ended without its child: the child is cancelled with it.
    h.settle();
    EXPECT_EQ(h.status("wait/slow"), instance_status::cancelled);
    EXPECT_EQ(h.status("wait/quick"), instance_status::completed);
}

TEST_P(children_test, an_ending_parent_cancels_its_children_unless_abandoned) {
    auto cancelling =
        h.sync(h.eng->start(leaving, std::string("kept-short"), std::string("cancel")));
    auto abandoning =
        h.sync(h.eng->start(leaving, std::string("lives-on"), std::string("abandon")));
    ASSERT_TRUE(h.sync(cancelling.wait()).has_value());
    ASSERT_TRUE(h.sync(abandoning.wait()).has_value());
    h.settle();
    EXPECT_EQ(h.status("wait/kept-short"), instance_status::cancelled);
    EXPECT_EQ(h.status("wait/lives-on"), instance_status::suspended);
    // The abandoned child still ends normally; its parent, finished, is told nothing.
    h.sync(h.eng->deliver("wait/lives-on", "/go", nullptr));
    EXPECT_EQ(h.status("wait/lives-on"), instance_status::completed);
    EXPECT_EQ(h.status(abandoning.id()), instance_status::completed);
}

TEST_P(children_test, an_outcome_that_arrives_before_the_join_waits_in_the_inbox) {
    auto parent = h.sync(h.eng->start(late, std::string("early")));
    EXPECT_EQ(h.status("double/early"), instance_status::completed);
    auto inbox = h.snapshot(parent.id()).inbox;
    ASSERT_EQ(inbox.size(), 1u);
    EXPECT_EQ(inbox[0].path, child_path("double/early"));
    EXPECT_EQ(inbox[0].payload["status"], "completed");
    h.advance(1h);
    auto r = h.sync(parent.wait());
    ASSERT_TRUE(r.has_value()) << r.error().message;
    EXPECT_EQ(*r, 10);
}

TEST_P(children_test, cancelling_a_parent_cancels_its_descendants) {
    auto top = h.sync(h.eng->start(chained, 2));
    EXPECT_EQ(h.status("chain/0"), instance_status::suspended);
    ASSERT_TRUE(h.sync(h.eng->cancel(top.id())).has_value());
    h.settle();
    EXPECT_EQ(h.status("chain/2"), instance_status::cancelled);
    EXPECT_EQ(h.status("chain/1"), instance_status::cancelled);
    EXPECT_EQ(h.status("chain/0"), instance_status::cancelled);
}

TEST_P(children_test, a_cancelled_child_fails_its_parents_join) {
    auto top = h.sync(h.eng->start(chained, 1));
    auto cancelled = h.sync(h.eng->cancel("chain/0"));
    ASSERT_TRUE(cancelled.has_value()) << cancelled.error().message;
    auto r = h.sync(top.wait());
    ASSERT_FALSE(r.has_value());
    EXPECT_NE(r.error().message.find("child process chain/0 was cancelled"), std::string::npos)
        << r.error().message;
}

TEST_P(children_test, a_chain_survives_a_restart_of_its_worker) {
    auto top = h.sync(h.eng->start(chained, 2));
    EXPECT_EQ(h.status("chain/0"), instance_status::suspended);
    h.eng.reset();  // the worker goes away with everything in memory
    h.settle();
    h.eng.emplace(h.io.get_executor(), h.store, h.clock,
                  engine_options{.worker = "w2", .max_hot = GetParam(), .seed = 7});
    add_all(h, deps, doubling, failing, waiting, calling, fanning, catching, not_catching, racing,
            leaving, late, chained, adopting, telling);
    h.eng->run();
    h.settle();
    h.sync(h.eng->deliver("chain/0", "/go", nullptr));
    auto r = h.sync(handle<std::string>(*h.eng, top.id()).wait());
    ASSERT_TRUE(r.has_value()) << r.error().message;
    EXPECT_EQ(*r, "bottom");
}

TEST_P(children_test, a_running_instance_started_by_someone_else_is_not_taken_as_a_child) {
    h.sync(h.eng->start(waiting, std::string("mine")));
    auto parent = h.sync(h.eng->start(adopting, std::string("mine")));
    auto r = h.sync(parent.wait());
    ASSERT_FALSE(r.has_value());
    EXPECT_NE(r.error().message.find("process wait/mine is running already (started on its own)"),
              std::string::npos)
        << r.error().message;
    EXPECT_EQ(h.status("wait/mine"), instance_status::suspended);  // left alone
}

TEST_P(children_test, a_finished_instance_started_as_a_child_gives_its_outcome) {
    h.sync(h.eng->start(waiting, std::string("done")));
    h.sync(h.eng->deliver("wait/done", "/go", nullptr));
    ASSERT_EQ(h.status("wait/done"), instance_status::completed);
    auto parent = h.sync(h.eng->start(adopting, std::string("done")));
    auto r = h.sync(parent.wait());
    ASSERT_TRUE(r.has_value()) << r.error().message;
    EXPECT_EQ(*r, "went done");
}

TEST_P(children_test, a_parent_retried_from_its_start_joins_the_same_child_again) {
    auto parent = h.sync(h.eng->start(calling, std::string("again")));
    ASSERT_TRUE(h.sync(parent.wait()).has_value());
    auto retried = h.sync(h.eng->retry(parent.id(), 0));
    ASSERT_TRUE(retried.has_value()) << retried.error().message;
    auto r = h.sync(parent.wait());
    ASSERT_TRUE(r.has_value()) << r.error().message;
    EXPECT_EQ(*r, 10);
    EXPECT_EQ(deps.book.runs["again"], 1) << "the child ran once";
    EXPECT_TRUE(h.snapshot(parent.id()).inbox.empty());
}

TEST_P(children_test, a_cancelled_parent_retried_finds_its_cancelled_child_and_fails_again) {
    auto parent = h.sync(h.eng->start(adopting, std::string("stuck")));
    ASSERT_TRUE(h.sync(h.eng->cancel(parent.id())).has_value());
    h.settle();
    ASSERT_EQ(h.status("wait/stuck"), instance_status::cancelled);
    ASSERT_TRUE(h.sync(h.eng->retry(parent.id(), 0)).has_value());
    auto r = h.sync(parent.wait());
    ASSERT_FALSE(r.has_value()) << "joined a child that never answers";
    EXPECT_NE(r.error().message.find("child process wait/stuck was cancelled"), std::string::npos)
        << r.error().message;
}

TEST_P(children_test, a_handler_delivers_to_another_instance_once_per_call) {
    h.sync(h.eng->start(waiting, std::string("told")));
    auto teller = h.sync(h.eng->start(telling, std::string("told"), 2));
    auto r = h.sync(teller.wait());
    ASSERT_TRUE(r.has_value()) << r.error().message;
    EXPECT_EQ(*r, 2);
    auto inbox = h.snapshot("wait/told").inbox;
    ASSERT_EQ(inbox.size(), 2u);
    EXPECT_EQ(inbox[0].payload, 0);
    EXPECT_EQ(inbox[1].payload, 1);
    // Keyed by the sender and the step: a replay or a step run again is a duplicate.
    EXPECT_EQ(inbox[0].key, signals::scoped_key("/note", "tell/told/2#0"));
    EXPECT_EQ(inbox[1].key, signals::scoped_key("/note", "tell/told/2#1"));
    EXPECT_EQ(h.sync(h.eng->deliver("wait/told", "/note", 9, "tell/told/2#1")).result,
              delivery::outcome::duplicate);
}

TEST_P(children_test, a_delivery_to_no_instance_reaches_nobody) {
    auto teller = h.sync(h.eng->start(telling, std::string("nobody"), 1));
    auto r = h.sync(teller.wait());
    ASSERT_TRUE(r.has_value()) << r.error().message;
    EXPECT_EQ(*r, 0);
}

INSTANTIATE_TEST_SUITE_P(hot_and_evicted, children_test, ::testing::Values(100, 0));

}  // namespace
}  // namespace keel::process
