// The store contract, on the in-memory store: every call validates first and writes last,
// so a rejected call changes nothing. Written against keel::process::store so another
// implementation can run the same cases.

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <keel/di/container.hpp>
#include <keel/process/memory_store.hpp>

#include "harness.hpp"

namespace keel::process {
namespace {

using namespace std::chrono_literals;

TEST(code_versions, compare_digit_runs_as_numbers_and_the_rest_as_text) {
    EXPECT_LT(compare_versions("9", "10"), 0);
    EXPECT_LT(compare_versions("2026-11.2", "2026-11.10"), 0);
    EXPECT_LT(compare_versions("1.2", "1.2.1"), 0);
    EXPECT_LT(compare_versions("", "0"), 0);  // no version is the oldest
    EXPECT_LT(compare_versions("v1", "v2"), 0);
    EXPECT_LT(compare_versions("1a", "1b"), 0);
    EXPECT_GT(compare_versions("10", "9"), 0);
    EXPECT_EQ(compare_versions("2026-11.2", "2026-11.2"), 0);
    EXPECT_NE(compare_versions("09", "9"), 0);  // equal as numbers, still two versions
    EXPECT_EQ(compare_versions("09", "9"), -compare_versions("9", "09"));
}

struct store_contract : ::testing::Test {
    template <class T>
    T sync(asio::awaitable<T> task) {
        return loop.run(std::move(task));
    }

    lease_token start(const std::string& id) {
        auto r = sync(s.start(start_request{id, "/def", nlohmann::json::array(), "w1", now, 30s}));
        EXPECT_TRUE(r.created);
        return r.lease;
    }
    commit_request step(const std::string& id, lease_token lease, std::uint64_t length) {
        commit_request req;
        req.instance = id;
        req.lease = std::move(lease);
        req.expected_length = length;
        req.entries.push_back(journal_entry{length, op_kind::run, "step", length, false});
        return req;
    }

    testing::loop loop;
    memory_store backing;
    store& s = backing;
    time_point now = time_point{} + std::chrono::hours(1000);
};

TEST_F(store_contract, start_is_idempotent_and_grants_the_first_lease) {
    auto lease = start("a");
    EXPECT_EQ(lease, (lease_token{"w1", 1}));
    auto again = sync(s.start(start_request{"a", "/def", nullptr, "w2", now, 30s}));
    EXPECT_FALSE(again.created);
    EXPECT_EQ(again.status, instance_status::running);
    EXPECT_EQ(sync(s.load("a", true))->lease, lease);
}

TEST_F(store_contract, a_commit_checks_length_and_lease_before_writing_anything) {
    auto lease = start("a");
    ASSERT_TRUE(sync(s.commit(step("a", lease, 0))));
    auto conflict = sync(s.commit(step("a", lease, 0)));  // a stale length
    ASSERT_FALSE(conflict);
    EXPECT_EQ(conflict.error(), store_error::conflict);
    auto stale = sync(s.commit(step("a", lease_token{"w1", 7}, 1)));
    ASSERT_FALSE(stale);
    EXPECT_EQ(stale.error(), store_error::fenced);
    auto missing = step("a", lease, 1);
    missing.consume.push_back(99);
    missing.add_timers.push_back(timer_record{5, now + 1h, "t"});
    ASSERT_FALSE(sync(s.commit(missing)));
    auto snap = *sync(s.load("a", true));
    EXPECT_EQ(snap.journal.size(), 1u);  // nothing of the rejected commits
    EXPECT_TRUE(snap.timers.empty());
    EXPECT_EQ(sync(s.commit(step("nope", lease, 0))).error(), store_error::not_found);
}

TEST_F(store_contract, a_commit_consumes_appends_arms_and_releases_in_one_step) {
    auto lease = start("a");
    auto d = sync(s.deliver("a", inbox_entry{0, "k", "/sig", 42, now}));
    EXPECT_EQ(d.result, delivery::outcome::stored);
    auto req = step("a", lease, 0);
    req.entries[0] =
        journal_entry{0, op_kind::signal, "/sig", {{"id", d.id}, {"payload", 42}}, false};
    req.consume.push_back(d.id);
    req.add_timers.push_back(timer_record{1, now + 1h, "t"});
    req.waits = std::vector<signal_wait>{{2, "/other"}};
    req.status = instance_status::suspended;
    req.release = true;
    ASSERT_TRUE(sync(s.commit(req)));
    EXPECT_FALSE(sync(s.commit(step("a", lease, 99))));  // released: fenced
    auto snap = *sync(s.load("a", true));
    EXPECT_TRUE(snap.inbox.empty());
    EXPECT_EQ(snap.journal.size(), 1u);
    ASSERT_EQ(snap.timers.size(), 1u);
    EXPECT_EQ(snap.timers[0].name, "t");
    EXPECT_EQ(snap.status, instance_status::suspended);
    EXPECT_FALSE(snap.lease);
    // The consumed signal cannot be consumed again, even with a valid lease.
    auto grant = sync(s.acquire("a", "w2", now, 30s));
    ASSERT_TRUE(grant);
    auto again = step("a", grant->lease, 1);
    again.consume.push_back(d.id);
    EXPECT_EQ(sync(s.commit(again)).error(), store_error::inbox_missing);
}

TEST_F(store_contract, a_commit_reports_a_signal_that_arrived_for_the_new_wait_set) {
    auto lease = start("a");
    sync(s.deliver("a", inbox_entry{0, "k", "/go", 1, now}));  // while the writer runs it
    commit_request req;
    req.instance = "a";
    req.lease = lease;
    req.waits = std::vector<signal_wait>{{0, "/go"}};
    req.status = instance_status::suspended;
    req.release = true;
    auto r = sync(s.commit(req));
    ASSERT_TRUE(r);
    EXPECT_TRUE(r->signal_waiting);
    EXPECT_EQ(sync(s.due(now, 10)), std::vector<std::string>{"a"});
}

TEST_F(store_contract, deliveries_are_idempotent_by_key_and_refused_when_final) {
    auto lease = start("a");
    auto first = sync(s.deliver("a", inbox_entry{0, "k", "/sig", 1, now}));
    auto dup = sync(s.deliver("a", inbox_entry{0, "k", "/sig", 2, now}));
    EXPECT_EQ(dup.result, delivery::outcome::duplicate);
    EXPECT_EQ(dup.id, first.id);
    EXPECT_EQ(sync(s.load("a", false))->inbox.size(), 1u);
    commit_request done;
    done.instance = "a";
    done.lease = lease;
    done.status = instance_status::completed;
    done.result = "ok";
    ASSERT_TRUE(sync(s.commit(done)));
    EXPECT_EQ(sync(s.deliver("a", inbox_entry{0, "k2", "/sig", 1, now})).result,
              delivery::outcome::finished);
    EXPECT_EQ(sync(s.deliver("zz", inbox_entry{0, "k", "/sig", 1, now})).result,
              delivery::outcome::no_instance);
    EXPECT_EQ(sync(s.commit(step("a", lease, 0))).error(), store_error::finished);
}

TEST_F(store_contract, leases_fence_by_epoch) {
    auto lease = start("a");
    auto busy = sync(s.acquire("a", "w2", now + 10s, 30s));
    ASSERT_FALSE(busy);
    EXPECT_EQ(busy.error(), store_error::busy);
    auto same = sync(s.acquire("a", "w1", now + 10s, 30s));  // the holder renews: same epoch
    ASSERT_TRUE(same);
    EXPECT_EQ(same->lease, lease);
    auto taken = sync(s.acquire("a", "w2", now + 41s, 30s));  // expired: a new epoch
    ASSERT_TRUE(taken);
    EXPECT_EQ(taken->lease, (lease_token{"w2", 2}));
    EXPECT_FALSE(sync(s.renew("a", lease, now + 42s, 30s)));
    EXPECT_EQ(sync(s.commit(step("a", lease, 0))).error(), store_error::fenced);
    EXPECT_TRUE(sync(s.commit(step("a", taken->lease, 0))));
}

TEST_F(store_contract, due_lists_timers_matching_signals_and_expired_leases) {
    auto a = start("a");
    auto b = start("b");
    start("c");
    commit_request sleep;
    sleep.instance = "a";
    sleep.lease = a;
    sleep.add_timers.push_back(timer_record{0, now + 1h, "t"});
    sleep.status = instance_status::suspended;
    sleep.release = true;
    ASSERT_TRUE(sync(s.commit(sleep)));
    commit_request wait;
    wait.instance = "b";
    wait.lease = b;
    wait.waits = std::vector<signal_wait>{{0, "/go"}};
    wait.status = instance_status::suspended;
    wait.release = true;
    ASSERT_TRUE(sync(s.commit(wait)));
    // "c" is running with a lease until now + 30s.
    EXPECT_TRUE(sync(s.due(now, 10)).empty());
    EXPECT_EQ(*sync(s.next_due()), now + 30s);
    EXPECT_EQ(sync(s.due(now + 31s, 10)), std::vector<std::string>{"c"});
    sync(s.deliver("b", inbox_entry{0, "x", "/other", 1, now + 40s}));
    EXPECT_EQ(sync(s.due(now + 45s, 10)), std::vector<std::string>{"c"});
    auto d = sync(s.deliver("b", inbox_entry{0, "y", "/go", 1, now + 50s}));
    EXPECT_TRUE(d.waiting);
    EXPECT_EQ(sync(s.due(now + 50s, 10)), (std::vector<std::string>{"c", "b"}));
    EXPECT_EQ(sync(s.due(now + 2h, 10)), (std::vector<std::string>{"c", "b", "a"}));
}

// ---- dependencies from keel::di ----

struct order {
    static constexpr std::string_view model_name = "order";
};
struct tax_table {
    int rate = 20;
};
struct pricing {
    using inject = keel::di::inject<tax_table&>;
    explicit pricing(tax_table& t) : tax(t) {}
    int gross(int net) const { return net * (100 + tax.rate) / 100; }
    tax_table& tax;
};

durable<int> price(context& ctx, ref<order>, int net, pricing& p) {
    co_return co_await ctx.run("price", [&] { return p.gross(net); });
}
inline constexpr auto pricing_flow = define<price>("/order/:order/price/:net");

TEST(dependencies, are_resolved_from_a_keel_di_container) {
    test::harness h;
    keel::di::registry r;
    r.singleton<tax_table>().singleton<pricing>();
    auto c = r.build();
    h.eng->add(pricing_flow, c);
    auto handle = h.sync(h.eng->start(pricing_flow, ref<order>("o-1"), 100));
    EXPECT_EQ(handle.id(), "order/o-1/price/100");
    EXPECT_EQ(*h.sync(handle.wait()), 120);
}

TEST(definitions, reject_parameters_that_are_not_path_segments) {
    EXPECT_THROW(pricing_flow.instance_id(ref<order>("a/b"), 1), std::invalid_argument);
    EXPECT_THROW(pricing_flow.instance_id(ref<order>(""), 1), std::invalid_argument);
    EXPECT_EQ(pricing_flow.instance_id(ref<order>("x"), 5), "order/x/price/5");
}

}  // namespace
}  // namespace keel::process
