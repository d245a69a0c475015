// keel::process::testing::replay: a journal recorded by a real run (and exported as JSON, as
// `keel journal ID --json` prints it) replays clean against the same code, reports the first
// difference against incompatible code, and replays clean again once the change is patched.

#include <gtest/gtest.h>

#include <keel/process/queue.hpp>
#include <keel/process/testing/replay.hpp>

#include "harness.hpp"

namespace keel::process {
namespace {

using namespace std::chrono_literals;
using test::harness;

int code_version = 1;

struct warehouse {
    int dispatched = 0;
    template <class T>
    T& get() {
        return *this;
    }
};

durable<std::string> fulfil(context& ctx, std::string order, warehouse& w) {
    auto paid = co_await ctx.race(ctx.wait<double>("/paid/" + order), ctx.timer(72h, "deadline"));
    if (!paid.is<0>()) co_return std::string("expired");
    if (code_version == 2) co_await ctx.run("fraud check", [] { return true; });
    if (code_version == 3 && ctx.patched("fraud-check"))
        co_await ctx.run("fraud check", [] { return true; });
    co_await ctx.run("dispatch", [&] { return ++w.dispatched; });
    co_await ctx.wait("/delivered/" + order);
    co_return std::string("delivered");
}
inline constexpr auto fulfilment = define<fulfil>("/fulfil/:order");

struct replay : ::testing::Test {
    ~replay() override { code_version = 1; }

    // A journal recorded by the engine: paid, dispatched, suspended until delivery.
    nlohmann::json recorded(const std::string& order) {
        harness h;
        h.eng->add(fulfilment, deps);
        auto handle = h.sync(h.eng->start(fulfilment, order));
        h.sync(h.eng->deliver(handle.id(), "/paid/" + order, 42.5));
        return {{"entries", h.snapshot(handle.id()).journal}, {"total", 3}};
    }

    warehouse deps;
};

TEST_F(replay, the_same_code_replays_a_recorded_journal_without_running_a_step) {
    auto journal = recorded("o1");
    ASSERT_EQ(journal["entries"].size(), 3u);
    auto dispatched = deps.dispatched;
    auto report =
        testing::replay(fulfilment, deps, nlohmann::json::parse(journal.dump()), std::string("o1"));
    EXPECT_TRUE(report.ok()) << *report.mismatch;
    EXPECT_FALSE(report.finished);  // it waits for the delivery, as recorded
    EXPECT_EQ(deps.dispatched, dispatched);
}

TEST_F(replay, an_incompatible_change_reports_the_first_difference) {
    auto journal = recorded("o1");
    code_version = 2;
    auto report = testing::replay(fulfilment, deps, journal, std::string("o1"));
    ASSERT_FALSE(report.ok());
    EXPECT_NE(report.mismatch->find("run \"dispatch\""), std::string::npos) << *report.mismatch;
    EXPECT_NE(report.mismatch->find("run \"fraud check\""), std::string::npos) << *report.mismatch;
}

TEST_F(replay, the_change_behind_a_patch_replays_clean) {
    auto journal = recorded("o1");
    code_version = 3;
    auto report = testing::replay(fulfilment, deps, journal, std::string("o1"));
    EXPECT_TRUE(report.ok()) << *report.mismatch;
}

TEST_F(replay, a_journal_longer_than_the_handler_and_bad_exports_are_reported) {
    auto journal = recorded("o1");
    journal["entries"].push_back(journal["entries"][2]);
    journal["entries"][3]["seq"] = 9u;
    auto longer = testing::replay(fulfilment, deps, journal, std::string("o1"));
    EXPECT_FALSE(longer.ok());
    EXPECT_THROW(testing::journal_of(nlohmann::json{{"total", 1}}), std::invalid_argument);
    EXPECT_THROW(testing::journal_of(nlohmann::json::array({{{"kind", "run"}}})), std::exception);
}

// An instance started on a queue runs behind the queue's marker (and, when it waited, its
// admission): its journal replays against the plain handler, as the engine runs it.
TEST_F(replay, a_journal_of_an_instance_started_on_a_queue_replays_behind_its_marker) {
    const queue one{.name = "one", .concurrency = 1};
    harness h;
    h.eng->add(fulfilment, deps);
    h.eng->add_queue(one);
    auto first = h.sync(h.eng->enqueue(one, fulfilment, std::string("q1")));   // admitted at once
    auto second = h.sync(h.eng->enqueue(one, fulfilment, std::string("q2")));  // waits its turn
    h.sync(h.eng->deliver(first.id(), "/paid/q1", 42.5));
    h.sync(h.eng->deliver(first.id(), "/delivered/q1", nullptr));
    h.settle();
    h.sync(h.eng->deliver(second.id(), "/paid/q2", 10.0));
    h.settle();
    for (const auto& [id, order] : {std::pair{first.id(), "q1"}, std::pair{second.id(), "q2"}}) {
        auto journal = h.snapshot(id).journal;
        ASSERT_TRUE(queue_of(journal)) << id;
        nlohmann::json exported{{"entries", journal}};
        auto report = testing::replay(fulfilment, deps, exported, std::string(order));
        EXPECT_TRUE(report.ok()) << id << ": " << report.mismatch.value_or("");
    }
    EXPECT_FALSE(admitted_at_enqueue(h.snapshot(second.id()).journal));
}

}  // namespace
}  // namespace keel::process
