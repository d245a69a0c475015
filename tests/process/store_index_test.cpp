// The operators' index, on every store: counts per definition and status that follow every
// transition, listings that filter and page newest first and stay correct while instances
// change, and rewinding a failed instance to a journal position (an operator's retry).

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "store_fixture.hpp"

namespace {

using namespace keel::process;
using namespace keel::process::testing_support;

class store_index : public store_conformance {
  protected:
    start_result start_at(const std::string& id, const std::string& definition,
                          keel::time_point created) {
        return run(st().start({id, definition, nlohmann::json::array(), "w1", created, ttl}));
    }

    // Moves a just-started instance (lease from start) to `status`.
    void settle(const std::string& id, lease_token lease, index_status status) {
        auto c = commit_of(id, std::move(lease), 0);
        c.now = t0;
        switch (status) {
            case index_status::running:
                return;
            case index_status::suspended:
                c.status = instance_status::suspended;
                c.release = true;
                break;
            case index_status::parked:
                c.status = instance_status::failed;
                c.parked = true;
                c.error = "journal mismatch";
                c.release = true;
                break;
            case index_status::failed:
                c.status = instance_status::failed;
                c.error = "boom";
                c.release = true;
                break;
            case index_status::completed:
                c.status = instance_status::completed;
                c.result = 1;
                c.release = true;
                break;
            case index_status::cancelled:
                c.status = instance_status::cancelled;
                c.release = true;
                break;
            case index_status::queued:  // only a start queues (store_conformance covers it)
                ADD_FAILURE() << "a commit cannot make an instance queued";
                return;
        }
        ASSERT_TRUE(run(st().commit(c)));
    }

    // Every instance the query reaches, page after page (limit `page`), in order.
    std::vector<instance_summary> walk(list_query q, std::size_t page) {
        q.limit = page;
        std::vector<instance_summary> all;
        for (int pages = 0; pages < 10'000; ++pages) {
            auto p = run(st().list(q));
            EXPECT_LE(p.instances.size(), page);
            all.insert(all.end(), p.instances.begin(), p.instances.end());
            if (p.next.empty()) return all;
            q.cursor = p.next;
        }
        ADD_FAILURE() << "listing did not end";
        return all;
    }

    static std::vector<std::string> ids(const std::vector<instance_summary>& list) {
        std::vector<std::string> out;
        for (const auto& s : list) out.push_back(s.id);
        return out;
    }

    // Counts as a scan of every instance sees them.
    instance_counts scanned() {
        instance_counts out;
        for (const auto& s : walk({}, 1000))
            ++out[s.definition][static_cast<std::size_t>(s.status)];
        return out;
    }

    static std::uint64_t at(const instance_counts& c, const std::string& def, index_status s) {
        auto it = c.find(def);
        return it == c.end() ? 0 : it->second[static_cast<std::size_t>(s)];
    }
};

constexpr std::array all_statuses = {index_status::running,   index_status::suspended,
                                     index_status::parked,    index_status::failed,
                                     index_status::completed, index_status::cancelled};

TEST_P(store_index, counts_follow_every_transition_and_match_a_scan) {
    int n = 0;
    for (auto status : all_statuses) {
        for (int copy = 0; copy <= static_cast<int>(status); ++copy) {
            auto id = "i-" + std::to_string(n++);
            auto lease = start_at(id, copy % 2 ? "billing" : "fulfil", t0).lease;
            settle(id, lease, status);
        }
    }
    auto counts = run(st().counts());
    EXPECT_EQ(at(counts, "fulfil", index_status::running), 1u);
    EXPECT_EQ(at(counts, "fulfil", index_status::suspended), 1u);
    EXPECT_EQ(at(counts, "billing", index_status::suspended), 1u);
    EXPECT_EQ(at(counts, "fulfil", index_status::cancelled), 3u);
    EXPECT_EQ(at(counts, "billing", index_status::cancelled), 3u);
    for (const auto& [def, row] : scanned())
        for (auto status : all_statuses)
            EXPECT_EQ(at(counts, def, status), row[static_cast<std::size_t>(status)])
                << def << " " << to_string(status);

    // A parked instance (i-3, of fulfil) resumed: parked -> running.
    EXPECT_EQ(at(counts, "fulfil", index_status::parked), 2u);
    auto grant = run(st().acquire("i-3", "w1", t0, ttl));
    ASSERT_TRUE(grant);
    auto resume = commit_of("i-3", grant->lease, 0);
    resume.status = instance_status::running;
    ASSERT_TRUE(run(st().commit(resume)));
    counts = run(st().counts());
    EXPECT_EQ(at(counts, "fulfil", index_status::parked), 1u);
    EXPECT_EQ(at(counts, "fulfil", index_status::running), 2u);
}

TEST_P(store_index, lists_newest_first_with_every_filter) {
    // Created a millisecond apart, the last two in the same millisecond.
    for (int i = 0; i < 10; ++i) {
        auto id = (i % 2 ? "order/" : "user/") + std::to_string(i);
        auto lease = start_at(id, i % 2 ? "fulfil" : "verify",
                              t0 + std::chrono::milliseconds(std::min(i, 8)))
                         .lease;
        settle(id, lease, i % 3 == 0 ? index_status::suspended : index_status::running);
    }
    EXPECT_EQ(ids(walk({}, 50)),
              (std::vector<std::string>{"user/8", "order/9", "order/7", "user/6", "order/5",
                                        "user/4", "order/3", "user/2", "order/1", "user/0"}));
    list_query by_def;
    by_def.definition = "fulfil";
    EXPECT_EQ(ids(walk(by_def, 2)),
              (std::vector<std::string>{"order/9", "order/7", "order/5", "order/3", "order/1"}));
    list_query by_status;
    by_status.status = index_status::suspended;
    EXPECT_EQ(ids(walk(by_status, 3)),
              (std::vector<std::string>{"order/9", "user/6", "order/3", "user/0"}));
    list_query both;
    both.status = index_status::suspended;
    both.definition = "verify";
    EXPECT_EQ(ids(walk(both, 1)), (std::vector<std::string>{"user/6", "user/0"}));
    list_query prefix;
    prefix.prefix = "user/";
    EXPECT_EQ(ids(walk(prefix, 4)),
              (std::vector<std::string>{"user/8", "user/6", "user/4", "user/2", "user/0"}));
    list_query window;
    window.since = t0 + std::chrono::milliseconds(3);
    window.until = t0 + std::chrono::milliseconds(6);
    EXPECT_EQ(ids(walk(window, 2)), (std::vector<std::string>{"order/5", "user/4", "order/3"}));
    list_query none;
    none.definition = "nobody";
    auto empty = run(st().list(none));
    EXPECT_TRUE(empty.instances.empty());
    EXPECT_TRUE(empty.next.empty());

    auto first = run(st().list({}));
    ASSERT_FALSE(first.instances.empty());
    EXPECT_EQ(first.instances[0].definition, "verify");
    EXPECT_EQ(first.instances[0].status, index_status::running);
    EXPECT_EQ(first.instances[0].created, t0 + std::chrono::milliseconds(8));
    EXPECT_EQ(first.instances[0].changed, t0 + std::chrono::milliseconds(8));  // started, no commit
}

TEST_P(store_index, paging_returns_each_instance_once_while_instances_change) {
    std::map<std::string, lease_token> leases;
    for (int i = 0; i < 60; ++i) {
        auto id = "o-" + std::to_string(100 + i);
        leases[id] = start_at(id, "fulfil", t0 + std::chrono::milliseconds(i / 3)).lease;
    }
    list_query q;
    q.limit = 7;
    std::multiset<std::string> seen;
    int round = 0;
    for (;;) {
        auto page = run(st().list(q));
        for (const auto& s : page.instances) seen.insert(s.id);
        // Between pages: new instances start (newer than the walk), and instances on both
        // sides of the cursor change status.
        auto fresh = "new-" + std::to_string(round);
        start_at(fresh, "fulfil", t0 + std::chrono::hours(1));
        auto changed = "o-" + std::to_string(100 + (round * 13) % 60);
        if (leases.count(changed)) {
            settle(changed, leases[changed], index_status::completed);
            leases.erase(changed);
        }
        ++round;
        if (page.next.empty()) break;
        q.cursor = page.next;
    }
    EXPECT_EQ(seen.size(), 60u);
    for (int i = 0; i < 60; ++i) EXPECT_EQ(seen.count("o-" + std::to_string(100 + i)), 1u) << i;
    EXPECT_EQ(
        run(st().counts()).at("fulfil")[static_cast<std::size_t>(index_status::running)] +
            run(st().counts()).at("fulfil")[static_cast<std::size_t>(index_status::completed)],
        60u + static_cast<std::uint64_t>(round));
}

TEST_P(store_index, changed_is_the_last_transition_or_the_newest_step) {
    auto lease = start_at("i", "fulfil", t0).lease;
    auto step = commit_of("i", lease, 0);
    step.now = t0 + 5s;
    step.entries.push_back(journal_entry{0, op_kind::run, "reserve", 1, false, t0 + 5s});
    ASSERT_TRUE(run(st().commit(step)));
    auto changed_in_list = [&] { return run(st().list({})).instances.at(0).changed; };
    EXPECT_EQ(changed_in_list(), t0 + 5s);
    EXPECT_EQ(run(st().load("i", false))->changed, t0 + 5s);
    EXPECT_TRUE(run(st().load("i", false))->journal.empty());
    EXPECT_EQ(run(st().load("i", true))->changed, t0 + 5s);

    auto suspend = commit_of("i", lease, 1);
    suspend.now = t0 + 9s;
    suspend.status = instance_status::suspended;
    suspend.release = true;
    ASSERT_TRUE(run(st().commit(suspend)));
    EXPECT_EQ(changed_in_list(), t0 + 9s);
    EXPECT_EQ(run(st().load("i", false))->changed, t0 + 9s);
}

TEST_P(store_index, a_bad_cursor_is_refused) {
    list_query q;
    q.cursor = "not a cursor";
    EXPECT_THROW(run(st().list(q)), std::invalid_argument);
}

TEST_P(store_index, the_journal_reads_a_page_at_a_time) {
    auto lease = start_at("i", "fulfil", t0).lease;
    auto c = commit_of("i", lease, 0);
    for (std::uint64_t i = 0; i < 5; ++i)
        c.entries.push_back(journal_entry{i, op_kind::run, "step " + std::to_string(i), i, false,
                                          t0 + std::chrono::seconds(i)});
    ASSERT_TRUE(run(st().commit(c)));
    auto page = run(st().read_journal("i", 0, 1, 3));
    ASSERT_TRUE(page);
    EXPECT_EQ(page->total, 5u);
    ASSERT_EQ(page->entries.size(), 3u);
    EXPECT_EQ(page->entries[0].name, "step 1");
    EXPECT_EQ(page->entries[2].name, "step 3");
    EXPECT_EQ(page->entries[2].at, t0 + std::chrono::seconds(3));
    auto tail = run(st().read_journal("i", 0, 4, 100));
    EXPECT_EQ(tail->entries.size(), 1u);
    EXPECT_TRUE(run(st().read_journal("i", 0, 9, 100))->entries.empty());
    EXPECT_FALSE(run(st().read_journal("nope", 0, 0, 10)));
    EXPECT_FALSE(run(st().read_journal("i", 1, 0, 10)));  // never retried
}

TEST_P(store_index, rewind_keeps_the_old_journal_and_gives_consumed_signals_back) {
    auto lease = start_at("i", "fulfil", t0).lease;
    inbox_entry paid;
    paid.key = "tx-1";
    paid.path = "/paid";
    paid.payload = {{"amount", 10}};
    paid.at = t0;
    auto d = run(st().deliver("i", paid));
    ASSERT_EQ(d.result, delivery::outcome::stored);
    auto c = commit_of("i", lease, 0);
    c.entries = {journal_entry{0, op_kind::run, "reserve", 1, false, t0},
                 journal_entry{1, op_kind::signal, "/paid",
                               nlohmann::json{{"id", d.id}, {"payload", paid.payload}}, false, t0},
                 journal_entry{2, op_kind::run, "charge", {{"message", "declined"}}, true, t0}};
    c.consume = {d.id};
    c.status = instance_status::failed;
    c.error = "step \"charge\" failed: declined";
    c.release = true;
    ASSERT_TRUE(run(st().commit(c)));

    rewind_request r;
    r.instance = "i";
    r.expected_length = 3;
    r.keep = 1;
    r.now = t0 + std::chrono::minutes(5);
    inbox_entry back = paid;
    back.id = d.id;
    back.key.clear();
    r.restore = {back};

    auto wrong = r;
    wrong.expected_length = 2;
    EXPECT_EQ(run(st().rewind(wrong)).error(), store_error::conflict);
    auto far = r;
    far.keep = 4;
    EXPECT_EQ(run(st().rewind(far)).error(), store_error::out_of_range);
    auto missing = r;
    missing.instance = "nope";
    EXPECT_EQ(run(st().rewind(missing)).error(), store_error::not_found);

    ASSERT_TRUE(run(st().rewind(r)));
    auto snap = run(st().load("i", true));
    ASSERT_TRUE(snap);
    EXPECT_EQ(snap->status, instance_status::running);
    EXPECT_FALSE(snap->lease);
    EXPECT_FALSE(snap->error);
    ASSERT_EQ(snap->journal.size(), 1u);
    EXPECT_EQ(snap->journal[0].name, "reserve");
    ASSERT_EQ(snap->inbox.size(), 1u);
    EXPECT_EQ(snap->inbox[0].id, d.id);
    EXPECT_EQ(snap->inbox[0].payload, paid.payload);
    EXPECT_EQ(snap->retries, (std::vector<retry_record>{{1, r.now, 3}}));
    EXPECT_EQ(snap->changed, r.now);
    auto old = run(st().read_journal("i", 1, 0, 10));
    ASSERT_TRUE(old);
    EXPECT_EQ(old->total, 3u);
    EXPECT_EQ(old->entries[2].name, "charge");
    // Due at once, for a worker to replay it; the key still answers duplicate.
    EXPECT_EQ(run(st().due(r.now, 10)), (std::vector<std::string>{"i"}));
    EXPECT_EQ(run(st().deliver("i", paid)).result, delivery::outcome::duplicate);
    auto counts = run(st().counts());
    EXPECT_EQ(counts.at("fulfil")[static_cast<std::size_t>(index_status::running)], 1u);
    EXPECT_EQ(counts.at("fulfil")[static_cast<std::size_t>(index_status::failed)], 0u);
    // Running now: a second rewind is refused.
    r.expected_length = 1;
    EXPECT_EQ(run(st().rewind(r)).error(), store_error::wrong_state);
}

INSTANTIATE_TEST_SUITE_P(stores, store_index, ::testing::ValuesIn(store_kinds()),
                         [](const auto& info) { return info.param; });

// Redis only: the index forgets what Redis expires, and the page budget.
class redis_index : public ::testing::Test {
  protected:
    template <class T>
    T run(asio::awaitable<T> task) {
        return keel::test::run(io, std::move(task));
    }
    asio::io_context io;
};

TEST_F(redis_index, instances_leave_the_index_when_their_retention_ends) {
    redis_fixture f(io, {.shards = 2, .retention = 100ms});
    auto& st = f.get();
    auto lease = run(st.start({"i", "fulfil", nlohmann::json::array(), "w1", t0, ttl})).lease;
    commit_request c;
    c.instance = "i";
    c.lease = lease;
    c.status = instance_status::completed;
    c.result = 1;
    c.release = true;
    c.now = t0;
    ASSERT_TRUE(run(st.commit(c)));
    EXPECT_EQ(run(st.list({})).instances.size(), 1u);
    std::this_thread::sleep_for(300ms);  // Redis expires the keys on its own clock
    run(st.due(t0 + 1s, 10));            // the sweep runs with due()
    EXPECT_TRUE(run(st.list({})).instances.empty());
    EXPECT_EQ(run(st.counts()).at("fulfil")[static_cast<std::size_t>(index_status::completed)], 0u);
}

// A store written before the index kept its definitions in idx:defs knew them only as the
// fields of its counters hash (idx:counts), whose values are no longer kept: such a
// definition is still listed and counted, and counted by its sets, not by a stale counter.
TEST_F(redis_index, definitions_known_only_to_the_old_counters_are_listed_and_counted_exactly) {
    redis_fixture f(io, {.shards = 1});
    auto& st = f.get();
    run(st.start({"old", "legacy", nlohmann::json::array(), "w1", t0, ttl}));
    f.server.cli({"SREM", "keel:{0}:idx:defs", "legacy"});
    f.server.cli({"HSET", "keel:{0}:idx:counts", "running legacy", "7"});
    auto counts = run(st.counts());
    ASSERT_TRUE(counts.contains("legacy"));
    EXPECT_EQ(counts.at("legacy")[static_cast<std::size_t>(index_status::running)], 1u);
    auto page = run(st.list({}));
    ASSERT_EQ(page.instances.size(), 1u);
    EXPECT_EQ(page.instances[0].id, "old");
    // Without either, the definition is unknown to the index.
    f.server.cli({"DEL", "keel:{0}:idx:counts"});
    EXPECT_FALSE(run(st.counts()).contains("legacy"));
}

TEST_F(redis_index, a_prefix_that_matches_few_gives_short_pages_that_cover_everything) {
    redis_fixture f(io, {.shards = 3, .list_budget = 8});
    auto& st = f.get();
    std::vector<std::string> want;
    for (int i = 0; i < 200; ++i) {
        auto id = (i % 17 == 0 ? "rare/" : "common/") + std::to_string(1000 + i);
        run(st.start({id, i % 2 ? "a" : "b", nlohmann::json::array(), "w1",
                      t0 + std::chrono::milliseconds(i / 4), ttl}));
        if (id.starts_with("rare/")) want.push_back(id);
    }
    list_query q;
    q.prefix = "rare/";
    q.limit = 5;
    std::vector<std::string> got;
    int pages = 0;
    for (;; ++pages) {
        ASSERT_LT(pages, 1000);
        auto page = run(st.list(q));
        for (const auto& s : page.instances) got.push_back(s.id);
        if (page.next.empty()) break;
        q.cursor = page.next;
    }
    EXPECT_GT(pages, 3);  // the budget made it page more than the limit alone would
    std::sort(want.begin(), want.end());
    auto sorted = got;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, want);
    EXPECT_EQ(got.size(), want.size());
}

}  // namespace
