// Continue as new (context::continue_as_new): a handler that loops for ever keeps its journal
// bounded, loses and repeats no signal across its restarts, and does not start over while a
// worker of an earlier Keel build (store level below store_level_restart) is alive.

#include <gtest/gtest.h>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <keel/process/forwarding_store.hpp>

#include "harness.hpp"

namespace keel::process {
namespace {

using namespace std::chrono_literals;
using test::harness;

constexpr std::uint64_t bound = 6;

// Adds what each /add signal carries, for ever, continuing as new with the total so far.
durable<int> counter(context& ctx, int total) {
    for (;;) {
        if (ctx.journal_length() >= bound) {
            auto again = ctx.continue_as_new(nlohmann::json::array({total}));
            co_await std::move(again);
        }
        auto add = ctx.wait<int>("/add");
        total += co_await std::move(add);
        ctx.publish("total", total);
    }
}
inline constexpr auto counters = define<counter>("/counter/:from");

struct continue_as_new_test : ::testing::Test {
    harness h;
    const std::string id = "counter/0";
    continue_as_new_test() {
        h.eng->add(counters);
        h.sync(h.eng->start(counters, 0));
        h.settle();
    }
    int total() { return h.sync(h.eng->published(id, "total")).value_or(0).get<int>(); }
    // keel_process_continued_total of the counters, from /metrics' text.
    std::uint64_t continued() {
        auto text = h.sync(h.eng->render_metrics());
        std::string prefix = "keel_process_continued_total{definition=\"/counter/:from\"} ";
        auto at = text.find(prefix);
        if (at == std::string::npos) return 0;
        return std::stoull(text.substr(at + prefix.size()));
    }
    void add(int n) { h.sync(h.eng->deliver(id, "/add", n)); }
};

TEST_F(continue_as_new_test, the_journal_stays_bounded_and_every_signal_counts_once) {
    int expected = 0;
    for (int n = 1; n <= 20; ++n) {
        add(n);
        expected += n;
        h.settle();
        auto snap = h.snapshot(id);
        EXPECT_LE(snap.journal.size(), bound + 1) << "after signal " << n;
        EXPECT_EQ(total(), expected) << "after signal " << n;
    }
    // Signals that arrive together, some of them during a restart, wait in the inbox.
    for (int n = 1; n <= 10; ++n) add(100);
    expected += 1000;
    h.settle();
    EXPECT_EQ(total(), expected);
    auto snap = h.snapshot(id);
    EXPECT_EQ(snap.status, instance_status::suspended);
    EXPECT_TRUE(snap.inbox.empty());
    EXPECT_LE(snap.journal.size(), bound + 1);
    int this_run = 0;
    for (const auto& e : snap.journal)
        if (e.kind == op_kind::signal) this_run += e.value.at("payload").get<int>();
    EXPECT_EQ(snap.params.at(0).get<int>() + this_run, expected)
        << "the params carry the total of the runs before: " << snap.params.dump();
    EXPECT_TRUE(snap.retries.empty()) << "continuing is not an operator's retry";
    // 30 signals, each a wait and a publish: the journal passed its bound of 6 many times.
    EXPECT_GE(continued(), 5u) << "keel_process_continued_total";
}

TEST_F(continue_as_new_test, a_worker_of_an_earlier_build_keeps_the_journal_growing) {
    auto now = h.clock.now();
    h.sync(h.store.announce(worker_record{"old", {}, now, now + 1min, store_level_restart - 1}));
    h.advance(5s);  // the engine's next heartbeat sees it
    for (int n = 0; n < 10; ++n) {
        add(1);
        h.settle();
    }
    EXPECT_EQ(total(), 10);
    auto grown = h.snapshot(id).journal.size();
    EXPECT_GT(grown, 2 * bound) << "started over beside a worker that would not read it";
    EXPECT_EQ(continued(), 0u) << "keel_process_continued_total";

    h.advance(2min);  // the old worker's announcement lapses, then its last heartbeats
    add(1);
    h.settle();
    EXPECT_EQ(total(), 11);
    EXPECT_LE(h.snapshot(id).journal.size(), bound + 1);
    EXPECT_EQ(continued(), 1u) << "keel_process_continued_total";
}

// Holds the first commit that continues as new until release().
struct held_restart_store final : forwarding_store {
    held_restart_store(store& inner, asio::io_context& io) : forwarding_store(inner), gate_(io) {
        gate_.expires_at(asio::steady_timer::time_point::max());
    }
    bool holding = false;
    asio::awaitable<expected<commit_result, store_error>> commit(commit_request req) override {
        if (req.restart_params && !released_) {
            holding = true;
            boost::system::error_code ec;
            co_await gate_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        }
        co_return co_await forwarding_store::commit(std::move(req));
    }
    void release() {
        released_ = true;
        gate_.cancel();
    }

  private:
    asio::steady_timer gate_;
    bool released_ = false;
};

// An operator's cancel that arrives while the commit that continues as new is in flight is
// owed to a run that ends: it is carried out on the new one, not lost.
TEST(continue_as_new_cancel, a_cancel_during_the_restart_cancels_the_new_run) {
    harness h;
    h.eng.reset();
    held_restart_store view(h.store, h.io);
    engine worker(h.io.get_executor(), view, h.clock, engine_options{.worker = "w1"});
    worker.add(counters);
    worker.run();
    h.sync(worker.start(counters, 0));
    h.settle();
    for (int n = 0; n < static_cast<int>(bound); ++n) {
        h.sync(worker.deliver("counter/0", "/add", 1));
        h.settle();
    }
    ASSERT_TRUE(view.holding) << "no restart in flight";
    EXPECT_TRUE(h.sync(worker.cancel("counter/0")).has_value());
    view.release();
    h.settle();
    auto snap = h.snapshot("counter/0");
    EXPECT_EQ(snap.status, instance_status::cancelled);
    EXPECT_TRUE(snap.journal.empty());
    EXPECT_EQ(snap.params, nlohmann::json::array({6}));
    worker.stop();
    h.settle();
}

}  // namespace
}  // namespace keel::process
