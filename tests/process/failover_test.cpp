// An acknowledged commit lost by a Redis failover: the primary acknowledged the write and
// failed before its replica had it, so the journal is shorter than the worker believes. The
// engine must notice, replay from what the store has and go on: no entry recorded twice, the
// instance completes, and a step whose record was lost runs again (at least once).
// In-memory store only: memory_store::save/restore play the failover.

#include <gtest/gtest.h>

#include <keel/process/forwarding_store.hpp>

#include "harness.hpp"

namespace keel::process {
namespace {

using namespace std::chrono_literals;
using test::harness;

// Loses the first commit for which `lose` says so, right after acknowledging it.
struct failover_store final : forwarding_store {
    failover_store(memory_store& inner, std::function<bool(const commit_request&)> lose)
        : forwarding_store(inner), memory_(inner), lose_(std::move(lose)) {}

    asio::awaitable<expected<commit_result, store_error>> commit(commit_request req) override {
        bool lose = !lost && lose_(req);
        auto before = lose ? memory_.save(req.instance) : nullptr;
        auto r = co_await forwarding_store::commit(req);
        if (r && before) {
            memory_.restore(*before);
            lost = true;
        }
        co_return r;
    }

    bool lost = false;

  private:
    memory_store& memory_;
    std::function<bool(const commit_request&)> lose_;
};

struct counter {
    int charges = 0;
    template <class T>
    T& get() {
        return *this;
    }
};

durable<std::string> pay_and_ship(context& ctx, std::string order, counter& c) {
    auto paid = co_await ctx.race(ctx.wait<int>("/payment/" + order), ctx.timer(72h, "deadline"));
    if (!paid.is<0>()) co_return std::string("timeout");
    int amount = paid.get<0>();
    auto receipt = co_await ctx.run("charge", [&] {
        ++c.charges;
        return "r" + std::to_string(amount);
    });
    co_await ctx.wait("/shipped/" + order);
    co_return receipt + " shipped";
}
inline constexpr auto shop = define<pay_and_ship>("/shop/:order");

bool records(const commit_request& req, std::string_view name) {
    return std::any_of(req.entries.begin(), req.entries.end(),
                       [&](const journal_entry& e) { return e.name == name; });
}

struct failover : ::testing::Test {
    void start_engine(std::function<bool(const commit_request&)> lose) {
        h.eng.reset();  // this test's engine works through the failing view
        view.emplace(*h.memory(), std::move(lose));
        // Polls the due index as on Redis, where other workers' instances come due unseen.
        eng.emplace(h.io.get_executor(), *view, h.clock,
                    engine_options{.worker = "w1", .poll_interval = 1s, .seed = 3});
        eng->add(shop, deps);
        eng->run();
    }
    void TearDown() override {
        if (eng) eng->stop();
        h.settle();
    }
    std::size_t count(const std::vector<journal_entry>& journal, std::string_view name) {
        return std::count_if(journal.begin(), journal.end(),
                             [&](const journal_entry& e) { return e.name == name; });
    }

    harness h;
    counter deps;
    std::optional<failover_store> view;
    std::optional<engine> eng;
};

TEST_F(failover, a_lost_step_record_runs_the_step_again_and_records_it_once) {
    start_engine([](const commit_request& req) { return records(req, "charge"); });
    auto handle = h.sync(eng->start(shop, std::string("o1")));
    h.sync(eng->deliver(handle.id(), "/payment/o1", 40));
    ASSERT_TRUE(view->lost);
    EXPECT_EQ(deps.charges, 1);
    // The worker's next commit finds the journal shorter than it expects and is refused; the
    // instance comes back when its lease expires, and the charge runs again.
    h.advance(31s);
    h.advance(1s);
    EXPECT_EQ(deps.charges, 2);
    h.sync(eng->deliver(handle.id(), "/shipped/o1", nullptr));
    EXPECT_EQ(*h.sync(handle.wait()), "r40 shipped");
    auto snap = h.snapshot(handle.id());
    EXPECT_EQ(count(snap.journal, "charge"), 1u);
    EXPECT_EQ(count(snap.journal, "/payment/o1"), 1u);
    EXPECT_EQ(snap.status, instance_status::completed);
}

TEST_F(failover, a_lost_signal_consumption_gives_the_signal_back_once) {
    start_engine([](const commit_request& req) { return !req.consume.empty(); });
    auto handle = h.sync(eng->start(shop, std::string("o3")));
    h.sync(eng->deliver(handle.id(), "/payment/o3", 25, "pay-o3"));
    ASSERT_TRUE(view->lost);
    h.advance(31s);
    h.advance(1s);
    // A retried webhook with the same key is still a duplicate: the delivery was not lost.
    h.sync(eng->deliver(handle.id(), "/payment/o3", 25, "pay-o3"));
    h.sync(eng->deliver(handle.id(), "/shipped/o3", nullptr));
    EXPECT_EQ(*h.sync(handle.wait()), "r25 shipped");
    auto snap = h.snapshot(handle.id());
    EXPECT_EQ(count(snap.journal, "/payment/o3"), 1u);
    EXPECT_EQ(count(snap.journal, "charge"), 1u);
    EXPECT_TRUE(snap.inbox.empty());
}

}  // namespace
}  // namespace keel::process
