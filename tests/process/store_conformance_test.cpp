// The store contract, checked call by call against every implementation: the in-memory
// store and the Redis store (on a real redis-server started for the test).

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <keel/process/memory_store.hpp>
#include <keel/process/redis_store.hpp>
#include <keel/test/redis_server.hpp>
#include <keel/test/run.hpp>
#include <memory>
#include <set>

#include "store_fixture.hpp"

namespace {

using namespace std::chrono_literals;
namespace asio = boost::asio;
using namespace keel::process;
using namespace keel::process::testing_support;

journal_entry entry(std::uint64_t seq, std::string name, nlohmann::json value) {
    return journal_entry{seq, op_kind::run, std::move(name), std::move(value), false};
}

TEST_P(store_conformance, start_is_idempotent) {
    auto first = start("order/o-1/fulfillment");
    EXPECT_TRUE(first.created);
    EXPECT_EQ(first.lease, (lease_token{"w1", 1}));
    auto second = start("order/o-1/fulfillment", "w2");
    EXPECT_FALSE(second.created);
    EXPECT_EQ(second.status, instance_status::running);
    auto snap = run(st().load("order/o-1/fulfillment", true));
    ASSERT_TRUE(snap);
    EXPECT_EQ(snap->definition, "def");
    EXPECT_EQ(snap->params, (nlohmann::json{{"order", "o-1"}}));
    EXPECT_EQ(snap->lease, (lease_token{"w1", 1}));
    EXPECT_FALSE(run(st().load("nope", true)));
}

// A store without a configured count takes the store's: a new one gets one shard on one
// server and 16 on a cluster (redis_shards_test.cpp has the rest).
TEST_P(store_conformance, an_unconfigured_redis_store_gets_the_shards_of_its_topology) {
    keel::redis::connection* conn = nullptr;
    std::size_t expected = 0;
    if (auto* f = dynamic_cast<redis_fixture*>(fixture.get())) conn = &f->conn, expected = 1;
    if (auto* f = dynamic_cast<cluster_fixture*>(fixture.get())) conn = &f->conn, expected = 16;
    if (!conn) GTEST_SKIP() << "the memory store has no shards";
    redis_store unconfigured(*conn, {.prefix = "new"});  // the fixture's store is open already
    EXPECT_EQ(run(unconfigured.open()), expected);
}

// A handler that waits before its first step: the start writes the suspension too.
TEST_P(store_conformance, a_start_can_write_the_first_wait) {
    start_request req{"i", "def", nlohmann::json{{"order", "o-1"}}, "w1", t0, ttl};
    journal_entry noted{0, op_kind::now, "", 42, false};
    noted.at = t0;
    req.suspended = start_request::first_wait{
        {noted}, {timer_record{1, t0 + 72h, "expiry"}}, {signal_wait{2, "/pay"}}};
    auto r = run(st().start(req));
    ASSERT_TRUE(r.created);
    EXPECT_EQ(r.status, instance_status::suspended);
    auto snap = run(st().load("i", true));
    EXPECT_EQ(snap->status, instance_status::suspended);
    EXPECT_FALSE(snap->lease);
    ASSERT_EQ(snap->journal.size(), 1u);
    EXPECT_EQ(snap->journal[0], noted);
    ASSERT_EQ(snap->timers.size(), 1u);
    EXPECT_EQ(snap->timers[0].due, t0 + 72h);
    EXPECT_EQ(snap->waits, (std::vector<signal_wait>{{2, "/pay"}}));
    auto counts = run(st().counts());
    EXPECT_EQ(counts["def"][static_cast<std::size_t>(index_status::suspended)], 1u);
    EXPECT_EQ(counts["def"][static_cast<std::size_t>(index_status::running)], 0u);
    EXPECT_EQ(run(st().next_due()), t0 + 72h);
    EXPECT_FALSE(run(st().start(req)).created);
    EXPECT_TRUE(run(st().deliver("i", inbox_entry{0, "", "/pay", {}, t0 + 1s})).waiting);
    auto taken = run(st().take("i", "w2", t0 + 2s, ttl, {}, std::nullopt));
    ASSERT_TRUE(taken);
    EXPECT_EQ(taken->grant.lease, (lease_token{"w2", 2}));
    EXPECT_TRUE(taken->resumed);
}

// A handler that recorded entries before its first step (a queue's marker): the start writes
// them, running and leased, and the first commit follows them.
TEST_P(store_conformance, a_running_start_writes_the_entries_before_its_first_step) {
    start_request req{"i", "def", nlohmann::json{{"order", "o-1"}}, "w1", t0, ttl};
    journal_entry marker{0, op_kind::patch, "keel.queue.admitted:jobs", true, false};
    marker.at = t0;
    req.entries = {marker};
    auto r = run(st().start(req));
    ASSERT_TRUE(r.created);
    EXPECT_EQ(r.status, instance_status::running);
    EXPECT_EQ(r.lease, (lease_token{"w1", 1}));
    auto snap = run(st().load("i", true));
    EXPECT_EQ(snap->status, instance_status::running);
    ASSERT_EQ(snap->journal.size(), 1u);
    EXPECT_EQ(snap->journal[0], marker);
    auto c = commit_of("i", r.lease, 0);
    c.entries = {entry(1, "work", "j1")};
    EXPECT_FALSE(run(st().commit(c)));  // the journal has one entry already
    c.expected_length = 1;
    ASSERT_TRUE(run(st().commit(c)));
    EXPECT_EQ(run(st().load("i", true))->journal.size(), 2u);
}

TEST_P(store_conformance, an_instance_keeps_the_code_version_that_started_it) {
    start_request req{
        "order/o-1/fulfillment", "def", nlohmann::json{{"order", "o-1"}}, "w1", t0, ttl};
    req.version = "2026-11.2";
    ASSERT_TRUE(run(st().start(req)).created);
    start("order/o-2/fulfillment");
    EXPECT_EQ(run(st().load("order/o-1/fulfillment", false))->version, "2026-11.2");
    EXPECT_EQ(run(st().load("order/o-2/fulfillment", false))->version, "");
}

TEST_P(store_conformance, commit_appends_and_validates_everything_first) {
    auto lease = start("i").lease;
    auto c = commit_of("i", lease, 0);
    c.entries = {entry(0, "charge", {{"tx", "t-1"}}), entry(1, "dispatch", 42)};
    ASSERT_TRUE(run(st().commit(c)));

    // Wrong expected length: conflict, nothing written.
    auto stale = commit_of("i", lease, 0);
    stale.entries = {entry(2, "x", 1)};
    EXPECT_EQ(run(st().commit(stale)).error(), store_error::conflict);
    // Wrong lease: fenced.
    auto fenced = commit_of("i", lease_token{"w2", 1}, 2);
    fenced.entries = {entry(2, "x", 1)};
    EXPECT_EQ(run(st().commit(fenced)).error(), store_error::fenced);
    // A consumed inbox entry that does not exist: rejected, and the entries with it.
    auto missing = commit_of("i", lease, 2);
    missing.entries = {entry(2, "x", 1)};
    missing.consume = {99};
    EXPECT_EQ(run(st().commit(missing)).error(), store_error::inbox_missing);
    EXPECT_EQ(run(st().commit(commit_of("nope", lease, 0))).error(), store_error::not_found);

    auto snap = run(st().load("i", true));
    ASSERT_EQ(snap->journal.size(), 2u);
    EXPECT_EQ(snap->journal[0], entry(0, "charge", {{"tx", "t-1"}}));
    EXPECT_EQ(snap->journal[1].value, 42);
    auto without = run(st().load("i", false));
    EXPECT_TRUE(without->journal.empty());
}

// An inbox id listed twice in one commit is there when the commit is checked: accepted, and the
// signal is consumed once.
TEST_P(store_conformance, a_commit_that_lists_an_inbox_id_twice_consumes_the_signal_once) {
    auto lease = start("i").lease;
    auto first = run(st().deliver("i", inbox_entry{0, "k1", "/go", {{"n", 1}}, t0}));
    auto second = run(st().deliver("i", inbox_entry{0, "k2", "/go", {{"n", 2}}, t0 + 1s}));
    ASSERT_EQ(first.result, delivery::outcome::stored);
    ASSERT_EQ(second.result, delivery::outcome::stored);
    auto c = commit_of("i", lease, 0);
    c.entries = {journal_entry{0, op_kind::signal, "/go", {{"id", first.id}}, false}};
    c.consume = {first.id, first.id};
    ASSERT_TRUE(run(st().commit(c)));
    auto snap = run(st().load("i", true));
    ASSERT_EQ(snap->inbox.size(), 1u);
    EXPECT_EQ(snap->inbox[0].id, second.id);
    EXPECT_EQ(snap->journal.size(), 1u);
    // Consumed: listed again, alone or twice, it is missing.
    auto gone = commit_of("i", lease, 1);
    gone.consume = {first.id, first.id};
    EXPECT_EQ(run(st().commit(gone)).error(), store_error::inbox_missing);
    EXPECT_EQ(run(st().load("i", false))->inbox.size(), 1u);
    // The key stays delivered: a repeat is a duplicate, not a new signal.
    EXPECT_EQ(run(st().deliver("i", inbox_entry{0, "k1", "/go", {}, t0 + 2s})).result,
              delivery::outcome::duplicate);
}

TEST_P(store_conformance, signals_wait_in_the_inbox_and_duplicates_are_no_ops) {
    auto lease = start("i").lease;
    auto first = run(
        st().deliver("i", inbox_entry{0, "tx-1", "/payment/o-1/received", {{"amount", 10}}, t0}));
    EXPECT_EQ(first.result, delivery::outcome::stored);
    EXPECT_FALSE(first.waiting);
    auto again = run(
        st().deliver("i", inbox_entry{0, "tx-1", "/payment/o-1/received", {{"amount", 99}}, t0}));
    EXPECT_EQ(again.result, delivery::outcome::duplicate);
    EXPECT_EQ(again.id, first.id);
    auto other =
        run(st().deliver("i", inbox_entry{0, "", "/payment/o-1/received", {{"amount", 5}}, t0}));
    EXPECT_EQ(other.result, delivery::outcome::stored);
    EXPECT_GT(other.id, first.id);
    EXPECT_EQ(run(st().deliver("nope", inbox_entry{0, "", "/x", {}, t0})).result,
              delivery::outcome::no_instance);

    auto snap = run(st().load("i", true));
    ASSERT_EQ(snap->inbox.size(), 2u);
    EXPECT_EQ(snap->inbox[0].id, first.id);  // oldest first
    EXPECT_EQ(snap->inbox[0].payload, (nlohmann::json{{"amount", 10}}));
    EXPECT_EQ(snap->inbox[0].key, "tx-1");

    // Consuming a signal and journaling it are one step.
    auto c = commit_of("i", lease, 0);
    c.entries = {
        journal_entry{0, op_kind::signal, "/payment/o-1/received", {{"id", first.id}}, false}};
    c.consume = {first.id};
    ASSERT_TRUE(run(st().commit(c)));
    snap = run(st().load("i", true));
    ASSERT_EQ(snap->inbox.size(), 1u);
    EXPECT_EQ(snap->inbox[0].id, other.id);
    // The key stays used after consumption: a retried webhook still delivers nothing.
    EXPECT_EQ(
        run(st().deliver("i", inbox_entry{0, "tx-1", "/payment/o-1/received", {}, t0})).result,
        delivery::outcome::duplicate);
}

TEST_P(store_conformance, suspended_instance_is_due_at_its_timer_or_awaited_signal) {
    auto lease = start("i").lease;
    auto c = commit_of("i", lease, 0);
    c.add_timers = {timer_record{3, t0 + 72h, "payment-timeout"}};
    c.waits = std::vector<signal_wait>{{4, "/payment/o-1/received"}};
    c.status = instance_status::suspended;
    c.release = true;
    ASSERT_TRUE(run(st().commit(c)));
    EXPECT_EQ(run(st().next_due()), t0 + 72h);
    EXPECT_TRUE(run(st().due(t0 + 1h, 10)).empty());

    // A signal it does not wait for changes nothing; an awaited one makes it due now.
    auto ignored = run(st().deliver("i", inbox_entry{0, "", "/other", {}, t0 + 1h}));
    EXPECT_FALSE(ignored.waiting);
    EXPECT_TRUE(run(st().due(t0 + 1h, 10)).empty());
    auto awaited = run(st().deliver("i", inbox_entry{0, "", "/payment/o-1/received", {}, t0 + 2h}));
    EXPECT_TRUE(awaited.waiting);
    EXPECT_EQ(run(st().next_due()), t0 + 2h);
    EXPECT_EQ(run(st().due(t0 + 2h, 10)), std::vector<std::string>{"i"});

    auto snap = run(st().load("i", true));
    EXPECT_EQ(snap->status, instance_status::suspended);
    EXPECT_FALSE(snap->lease);
    ASSERT_EQ(snap->timers.size(), 1u);
    EXPECT_EQ(snap->timers[0].due, t0 + 72h);
    EXPECT_EQ(snap->timers[0].name, "payment-timeout");
    EXPECT_EQ(snap->waits, (std::vector<signal_wait>{{4, "/payment/o-1/received"}}));
}

// A suspended instance whose worker still holds its lease (it suspended without giving the
// lease up) is due for an awaited signal only when that lease ends, whether the signal comes
// by deliver() or by a fan-out; a signal after the lease's end makes it due at its arrival.
TEST_P(store_conformance,
       an_awaited_signal_makes_a_leased_suspended_instance_due_at_the_lease_end) {
    for (bool by_fan_out : {false, true}) {
        SCOPED_TRACE(by_fan_out ? "fan_out" : "deliver");
        std::string id = by_fan_out ? "f" : "d";
        start_request req{id, "def", {}, "w1", t0, ttl};
        req.subscriptions = {"/go/" + id};
        auto lease = run(st().start(std::move(req))).lease;
        auto c = commit_of(id, lease, 0);
        c.add_timers = {timer_record{1, t0 + 72h, "expiry"}};
        c.waits = std::vector<signal_wait>{{2, "/go/" + id}};
        c.status = instance_status::suspended;
        ASSERT_TRUE(run(st().commit(c)));  // no release: the lease runs until t0 + ttl
        auto signal = [&](keel::time_point at) {
            inbox_entry e{0, "", "/go/" + id, {}, at};
            if (!by_fan_out) return run(st().deliver(id, e)).waiting;
            fan_out_request emit;
            emit.subscriptions = {"/go/" + id};
            emit.signal = e;
            auto out = run(st().fan_out(emit));
            return out.delivered.size() == 1 && out.delivered[0].second.waiting;
        };
        EXPECT_TRUE(signal(t0 + ttl / 4));
        EXPECT_EQ(run(st().next_due()), t0 + ttl);
        EXPECT_TRUE(run(st().due(t0 + ttl / 2, 10)).empty());
        EXPECT_EQ(run(st().due(t0 + ttl, 10)), std::vector<std::string>{id});
        auto done = commit_of(id, lease, 0);  // out of the wake index for the next round
        done.status = instance_status::completed;
        done.release = true;
        ASSERT_TRUE(run(st().commit(done)));
    }
}

// Whether a wait set waits for a path is decided on whole paths, whatever they hold: one
// path a prefix of another, quotes, backslashes and control characters (JSON escapes them).
TEST_P(store_conformance, a_wait_set_waits_for_exactly_its_paths) {
    // Each check on an instance of its own, suspended waiting for <id>/a/b and <id>/<odd>
    // (its own paths, so that a fan-out reaches only it): whether a signal on <id><signal>
    // is awaited, as deliver(), fan_out() and a commit that states the wait set say.
    const std::string odd = "/q\"uote\\d\n/\xc3\xbc";
    int n = 0;
    for (std::string how : {"deliver", "fan_out", "commit"}) {
        for (auto [signal, awaited] : {std::pair<std::string, bool>{"/a", false},
                                       {"/a/b/c", false},
                                       {"/a/b", true},
                                       {odd, true}}) {
            SCOPED_TRACE(how + " " + signal);
            std::string id = "w" + std::to_string(++n);
            start_request req{id, "def", {}, "w1", t0, ttl};
            req.subscriptions = {id + signal};
            auto lease = run(st().start(std::move(req))).lease;
            const std::vector<signal_wait> wait_set{{1, id + "/a/b"}, {2, id + odd}};
            auto c = commit_of(id, lease, 0);
            c.waits = wait_set;
            c.status = instance_status::suspended;
            c.release = how != "commit";
            ASSERT_TRUE(run(st().commit(c)));
            inbox_entry e{0, "", id + signal, {}, t0};
            bool waiting = false;
            if (how == "deliver") {
                waiting = run(st().deliver(id, e)).waiting;
            } else if (how == "fan_out") {
                fan_out_request emit;
                emit.subscriptions = {id + signal};
                emit.signal = e;
                auto out = run(st().fan_out(emit));
                ASSERT_EQ(out.delivered.size(), 1u);
                waiting = out.delivered[0].second.waiting;
            } else {
                run(st().deliver(id, e));
                auto again = commit_of(id, lease, 0);
                again.waits = wait_set;
                auto r = run(st().commit(again));
                ASSERT_TRUE(r);
                waiting = r->signal_waiting;
            }
            EXPECT_EQ(waiting, awaited);
        }
    }
}

TEST_P(store_conformance, a_commit_reports_a_signal_that_arrived_for_a_wait_set_it_sets) {
    auto lease = start("i").lease;
    // Delivered while the worker holds the instance and before it commits its wait set.
    run(st().deliver("i", inbox_entry{0, "", "/go", {}, t0}));
    auto c = commit_of("i", lease, 0);
    c.waits = std::vector<signal_wait>{{1, "/go"}};
    auto r = run(st().commit(c));
    ASSERT_TRUE(r);
    EXPECT_TRUE(r->signal_waiting);
    // Entries alone keep the wait set: the delivery already said the instance waits for it.
    auto step = commit_of("i", lease, 0);
    step.entries = {entry(0, "charge", 1)};
    auto kept = run(st().commit(step));
    ASSERT_TRUE(kept);
    EXPECT_FALSE(kept->signal_waiting);
    auto other = commit_of("i", lease, 1);
    other.waits = std::vector<signal_wait>{{2, "/elsewhere"}};
    auto r2 = run(st().commit(other));
    ASSERT_TRUE(r2);
    EXPECT_FALSE(r2->signal_waiting);
}

// A final instance is never run again, parked or not: a commit that leaves it so reports no
// signal waiting, even with a wait set that a signal in its inbox matches, and it is not due.
TEST_P(store_conformance, a_commit_that_leaves_the_instance_final_reports_no_signal_waiting) {
    auto lease = start("i").lease;
    run(st().deliver("i", inbox_entry{0, "", "/go", {}, t0}));
    auto park = commit_of("i", lease, 0);
    park.status = instance_status::failed;
    park.parked = true;
    park.error = "journal mismatch";
    park.waits = std::vector<signal_wait>{{1, "/go"}};
    auto parked = run(st().commit(park));
    ASSERT_TRUE(parked);
    EXPECT_FALSE(parked->signal_waiting);
    // Still parked, without a new status: the same.
    auto again = commit_of("i", lease, 0);
    again.parked = true;
    again.waits = std::vector<signal_wait>{{2, "/go"}};
    auto still = run(st().commit(again));
    ASSERT_TRUE(still);
    EXPECT_FALSE(still->signal_waiting);
    auto snap = run(st().load("i", false));
    EXPECT_EQ(snap->status, instance_status::failed);
    EXPECT_TRUE(snap->parked);
    EXPECT_EQ(snap->waits, (std::vector<signal_wait>{{2, "/go"}}));  // a parked one keeps it
    EXPECT_FALSE(run(st().next_due()));
    EXPECT_TRUE(run(st().due(t0 + 1h, 10)).empty());
}

TEST_P(store_conformance, entries_alone_leave_status_wait_set_and_timers_as_they_are) {
    auto lease = start("i").lease;
    auto suspend = commit_of("i", lease, 0);
    suspend.status = instance_status::suspended;
    suspend.waits = std::vector<signal_wait>{{2, "/go"}};
    suspend.add_timers = {timer_record{1, t0 + 1h, "deadline"}};
    ASSERT_TRUE(run(st().commit(suspend)));
    auto step = commit_of("i", lease, 0);
    step.entries = {entry(0, "charge", 1)};
    ASSERT_TRUE(run(st().commit(step)));
    auto snap = run(st().load("i", true));
    EXPECT_EQ(snap->status, instance_status::suspended);
    EXPECT_EQ(snap->waits, (std::vector<signal_wait>{{2, "/go"}}));
    ASSERT_EQ(snap->journal.size(), 1u);
    ASSERT_EQ(snap->timers.size(), 1u);
    EXPECT_EQ(snap->lease, lease);
    // Due at its timer, as before the step.
    EXPECT_TRUE(run(st().due(t0 + 29s, 10)).empty());
    EXPECT_EQ(run(st().due(t0 + 1h, 10)), std::vector<std::string>{"i"});

    auto running = commit_of("i", lease, 1);
    running.status = instance_status::running;
    ASSERT_TRUE(run(st().commit(running)));
    for (std::uint64_t n = 1; n <= 3; ++n) {
        auto more = commit_of("i", lease, n);
        more.entries = {entry(n, "step", n)};
        ASSERT_TRUE(run(st().commit(more)));
    }
    snap = run(st().load("i", true));
    EXPECT_EQ(snap->status, instance_status::running);
    ASSERT_EQ(snap->journal.size(), 4u);
    EXPECT_EQ(snap->journal[3].value, 3);
}

TEST_P(store_conformance, leases_fence_with_growing_epochs) {
    auto lease = start("i").lease;  // w1, epoch 1, expires t0 + 30s
    EXPECT_EQ(run(st().acquire("i", "w2", t0 + 10s, ttl)).error(), store_error::busy);
    auto same = run(st().acquire("i", "w1", t0 + 10s, ttl));
    ASSERT_TRUE(same);
    EXPECT_EQ(same->lease.epoch, 1u);  // renewed, same epoch
    // Expired: another worker takes over with a new epoch, and the old one is fenced.
    auto taken = run(st().acquire("i", "w2", t0 + 41s, ttl));
    ASSERT_TRUE(taken);
    EXPECT_EQ(taken->lease, (lease_token{"w2", 2}));
    EXPECT_FALSE(run(st().renew("i", lease, t0 + 42s, ttl)));
    EXPECT_EQ(run(st().commit(commit_of("i", lease, 0))).error(), store_error::fenced);
    EXPECT_TRUE(run(st().commit(commit_of("i", taken->lease, 0))));
    EXPECT_TRUE(run(st().renew("i", taken->lease, t0 + 50s, ttl)));
    run(st().release("i", taken->lease));
    auto snap = run(st().load("i", true));
    EXPECT_FALSE(snap->lease);
    // The same worker coming back after a release gets a fresh epoch.
    auto back = run(st().acquire("i", "w2", t0 + 51s, ttl));
    EXPECT_EQ(back->lease.epoch, 3u);
}

TEST_P(store_conformance, a_running_instance_whose_lease_expired_is_due) {
    start("i");
    EXPECT_TRUE(run(st().due(t0 + 29s, 10)).empty());
    EXPECT_EQ(run(st().due(t0 + 30s, 10)), std::vector<std::string>{"i"});
}

TEST_P(store_conformance, final_instances_refuse_writes_and_signals) {
    auto lease = start("i").lease;
    auto c = commit_of("i", lease, 0);
    c.add_timers = {timer_record{1, t0 + 1h}};
    ASSERT_TRUE(run(st().commit(c)));
    auto done = commit_of("i", lease, 0);
    done.status = instance_status::completed;
    done.result = nlohmann::json{{"status", "completed"}};
    done.release = true;
    ASSERT_TRUE(run(st().commit(done)));
    auto snap = run(st().load("i", true));
    EXPECT_EQ(snap->status, instance_status::completed);
    EXPECT_EQ(snap->result, (nlohmann::json{{"status", "completed"}}));
    EXPECT_TRUE(snap->timers.empty());
    EXPECT_FALSE(run(st().next_due()));
    EXPECT_EQ(run(st().deliver("i", inbox_entry{0, "", "/x", {}, t0})).result,
              delivery::outcome::finished);
    EXPECT_EQ(run(st().acquire("i", "w1", t0, ttl)).error(), store_error::finished);
    EXPECT_EQ(run(st().commit(commit_of("i", lease, 0))).error(), store_error::finished);
    EXPECT_FALSE(start("i").created);  // still there: starting again is a no-op
}

TEST_P(store_conformance, a_parked_instance_can_be_resumed) {
    auto lease = start("i").lease;
    auto park = commit_of("i", lease, 0);
    park.status = instance_status::failed;
    park.parked = true;
    park.error = "journal mismatch";
    ASSERT_TRUE(run(st().commit(park)));
    auto snap = run(st().load("i", true));
    EXPECT_EQ(snap->status, instance_status::failed);
    EXPECT_TRUE(snap->parked);
    EXPECT_EQ(snap->error, "journal mismatch");
    auto again = run(st().acquire("i", "w1", t0, ttl));
    ASSERT_TRUE(again);
    auto resume = commit_of("i", again->lease, 0);
    resume.status = instance_status::running;
    ASSERT_TRUE(run(st().commit(resume)));
    snap = run(st().load("i", true));
    EXPECT_EQ(snap->status, instance_status::running);
    EXPECT_FALSE(snap->parked);
    EXPECT_FALSE(snap->error);
}

TEST_P(store_conformance, failed_attempts_of_steps_in_flight_show_until_the_step_is_journaled) {
    auto lease = start("i").lease;
    step_attempt first{0, "charge", 1, "gateway timeout", "w1", t0 + 1s};
    step_attempt second{0, "charge", 2, "gateway down", "w1", t0 + 3s};
    step_attempt other{1, "reserve", 1, "no stock", "w1", t0 + 3s};
    EXPECT_TRUE(run(st().note_attempt("i", lease, first)));
    EXPECT_TRUE(run(st().note_attempt("i", lease, second)));  // replaces the first
    EXPECT_TRUE(run(st().note_attempt("i", lease, other)));
    EXPECT_EQ(run(st().load("i", false))->attempts, (std::vector<step_attempt>{second, other}));
    // Only the current holder writes one.
    EXPECT_FALSE(run(st().note_attempt("i", lease_token{"w2", 1}, first)));
    EXPECT_FALSE(run(st().note_attempt("i", lease_token{"w1", 2}, first)));
    EXPECT_FALSE(run(st().note_attempt("nobody", lease, first)));

    // Journaled, the step is no longer in flight; the other one still is.
    auto step = commit_of("i", lease, 0);
    step.entries.push_back(journal_entry{0, op_kind::run, "charge", 42, false});
    ASSERT_TRUE(run(st().commit(step)));
    EXPECT_EQ(run(st().load("i", true))->attempts, std::vector<step_attempt>{other});

    // A final instance has nothing in flight and takes no record.
    auto done = commit_of("i", lease, 1);
    done.status = instance_status::cancelled;
    done.release = true;
    ASSERT_TRUE(run(st().commit(done)));
    EXPECT_TRUE(run(st().load("i", true))->attempts.empty());
    EXPECT_FALSE(run(st().note_attempt("i", lease, other)));
    // An operator's retry from the start: the old records do not come back.
    ASSERT_TRUE(run(st().rewind(rewind_request{"i", 1, 0, {}, t0 + 5s})));
    auto retried = run(st().load("i", true));
    EXPECT_EQ(retried->status, instance_status::running);
    EXPECT_TRUE(retried->attempts.empty());
}

// Continue as new: the journal, the timers, the wait set and the attempt records start over
// and the params are replaced; what the last run consumed stays consumed (its key a
// duplicate), and the rest of the inbox and the published values stay.
TEST_P(store_conformance, a_restart_starts_the_journal_over_with_new_params) {
    auto lease = start("i").lease;
    auto c = commit_of("i", lease, 0);
    c.entries = {entry(0, "charge", 1), entry(1, "reserve", 2)};
    c.add_timers = {timer_record{2, t0 + 72h, "timeout"}};
    c.waits = std::vector<signal_wait>{{3, "/go"}};
    c.published = {{"progress", 1}};
    ASSERT_TRUE(run(st().commit(c)));
    step_attempt failed{4, "book", 1, "carrier down", "w1", t0 + 1s};
    ASSERT_TRUE(run(st().note_attempt("i", lease, failed)));
    auto taken = run(st().deliver("i", inbox_entry{0, "k-1", "/go", 1, t0 + 1s}));
    run(st().deliver("i", inbox_entry{0, "k-2", "/later", 2, t0 + 2s}));

    auto restart = commit_of("i", lease, 2);
    restart.entries = {entry(2, "continue as new", true)};  // not appended
    restart.consume = {taken.id};
    restart.published = {{"state", 7}};
    restart.status = instance_status::running;
    restart.waits = std::vector<signal_wait>{};
    restart.release = true;
    restart.restart_params = nlohmann::json{{"order", "o-2"}};
    auto stale = restart;
    stale.expected_length = 1;
    EXPECT_EQ(run(st().commit(stale)).error(), store_error::conflict);
    auto foreign = restart;
    foreign.lease = lease_token{"w2", 1};
    EXPECT_EQ(run(st().commit(foreign)).error(), store_error::fenced);
    ASSERT_EQ(run(st().load("i", true))->journal.size(), 2u) << "a refused restart wrote";
    ASSERT_TRUE(run(st().commit(restart)));

    auto snap = run(st().load("i", true));
    EXPECT_TRUE(snap->journal.empty());
    EXPECT_EQ(snap->params, (nlohmann::json{{"order", "o-2"}}));
    EXPECT_EQ(snap->status, instance_status::running);
    EXPECT_FALSE(snap->lease);
    EXPECT_TRUE(snap->timers.empty());
    EXPECT_TRUE(snap->waits.empty());
    EXPECT_TRUE(snap->attempts.empty());
    ASSERT_EQ(snap->inbox.size(), 1u);
    EXPECT_EQ(snap->inbox[0].path, "/later");
    EXPECT_EQ(snap->published.at("progress"), 1);
    EXPECT_EQ(snap->published.at("state"), 7);
    EXPECT_EQ(run(st().deliver("i", inbox_entry{0, "k-1", "/go", 1, t0 + 3s})).result,
              delivery::outcome::duplicate);
    // Released and running: due at once, and its new run's journal starts at 0.
    EXPECT_EQ(run(st().due(t0 + 3s, 10)), std::vector<std::string>{"i"});
    auto again = run(st().acquire("i", "w2", t0 + 3s, ttl));
    ASSERT_TRUE(again);
    EXPECT_EQ(again->journal_length, 0u);
    auto first = commit_of("i", again->lease, 0);
    first.entries = {entry(0, "charge", 3)};
    ASSERT_TRUE(run(st().commit(first)));
    EXPECT_EQ(run(st().load("i", true))->journal,
              std::vector<journal_entry>{entry(0, "charge", 3)});
}

// Rolling deploys: what a worker refuses it is neither given by due() nor granted.
TEST_P(store_conformance, refused_versions_are_neither_due_nor_granted) {
    start_request req{"new", "def", nlohmann::json{{"order", "o-1"}}, "w2", t0, ttl};
    req.version = "2";
    ASSERT_TRUE(run(st().start(req)).created);
    start("old");  // no version
    version_refusals refused{{"def", "2"}, {"other", ""}};
    EXPECT_EQ(run(st().due(t0 + 1h, 10, refused)), std::vector<std::string>{"old"});
    // Not claimed for the refusing worker: another poller still sees it.
    auto others = run(st().due(t0 + 1h, 10));
    EXPECT_NE(std::ranges::find(others, "new"), others.end());
    EXPECT_EQ(run(st().acquire("new", "w1", t0 + 1h, ttl, refused)).error(), store_error::declined);
    EXPECT_EQ(run(st().load("new", false))->lease, (lease_token{"w2", 1}));
    EXPECT_TRUE(run(st().acquire("old", "w1", t0 + 1h, ttl, refused)));
    EXPECT_TRUE(run(st().acquire("new", "w3", t0 + 1h, ttl, {{"def", ""}})));
}

// take(): the lease and the instance at once; the journal only when the caller's is stale.
TEST_P(store_conformance, take_grants_the_lease_and_reads_the_instance_in_one_step) {
    auto lease = start("i").lease;
    auto c = commit_of("i", lease, 0);
    c.entries = {entry(0, "charge", 1), entry(1, "dispatch", 2)};
    ASSERT_TRUE(run(st().commit(c)));
    run(st().release("i", lease));

    auto fresh = run(st().take("i", "w2", t0 + 1s, ttl, {}, std::nullopt));
    ASSERT_TRUE(fresh);
    EXPECT_EQ(fresh->grant.lease, (lease_token{"w2", 2}));
    EXPECT_EQ(fresh->grant.journal_length, 2u);
    EXPECT_TRUE(fresh->with_journal);
    EXPECT_EQ(fresh->snapshot.journal.size(), 2u);
    EXPECT_EQ(fresh->snapshot.lease, fresh->grant.lease);  // read after the grant
    EXPECT_EQ(fresh->snapshot.definition, "def");

    auto current = run(st().take("i", "w2", t0 + 2s, ttl, {}, 2));
    ASSERT_TRUE(current);
    EXPECT_FALSE(current->with_journal);
    EXPECT_TRUE(current->snapshot.journal.empty());
    EXPECT_EQ(current->grant.lease.epoch, 2u);  // renewed

    auto stale = run(st().take("i", "w2", t0 + 3s, ttl, {}, 1));
    ASSERT_TRUE(stale);
    EXPECT_TRUE(stale->with_journal);
    EXPECT_EQ(stale->snapshot.journal.size(), 2u);

    EXPECT_EQ(run(st().take("i", "w3", t0 + 4s, ttl, {}, std::nullopt)).error(), store_error::busy);
    EXPECT_EQ(run(st().take("i", "w3", t0 + 4s, ttl, {{"def", ""}}, std::nullopt)).error(),
              store_error::declined);
    EXPECT_EQ(run(st().take("nope", "w3", t0 + 4s, ttl, {}, std::nullopt)).error(),
              store_error::not_found);
}

// A worker takes a suspended instance to run it: the lease is all the take writes. The store
// says "suspended" (the operators' index too), and the signal that woke it, its wait set and
// its timers stay, until the worker commits what it resumed to.
TEST_P(store_conformance, take_leases_a_suspended_instance_and_keeps_what_woke_it) {
    auto lease = start("i").lease;
    auto suspend = commit_of("i", lease, 0);
    suspend.status = instance_status::suspended;
    suspend.waits = std::vector<signal_wait>{{1, "/pay"}};
    suspend.add_timers = {timer_record{0, t0 + 72h, "expiry"}};
    suspend.release = true;
    ASSERT_TRUE(run(st().commit(suspend)));
    auto paid = run(st().deliver("i", inbox_entry{0, "tx-1", "/pay", {{"amount", 5}}, t0 + 1s}));
    ASSERT_TRUE(paid.waiting);
    auto suspended_at = run(st().load("i", false))->changed;

    auto got = run(st().take("i", "w2", t0 + 2s, ttl, {}, std::nullopt));
    ASSERT_TRUE(got);
    EXPECT_TRUE(got->resumed);
    EXPECT_EQ(got->snapshot.status, instance_status::suspended);  // as it was
    EXPECT_EQ(got->grant.status, instance_status::suspended);

    auto now = run(st().load("i", true));
    EXPECT_EQ(now->status, instance_status::suspended);
    EXPECT_EQ(now->changed, suspended_at);
    ASSERT_TRUE(now->lease);
    EXPECT_EQ(*now->lease, got->grant.lease);
    EXPECT_EQ(now->waits, (std::vector<signal_wait>{{1, "/pay"}}));
    ASSERT_EQ(now->inbox.size(), 1u);
    EXPECT_EQ(now->inbox[0].id, paid.id);
    ASSERT_EQ(now->timers.size(), 1u);
    auto counts = run(st().counts());
    EXPECT_EQ(counts["def"][static_cast<std::size_t>(index_status::suspended)], 1u);
    EXPECT_EQ(counts["def"][static_cast<std::size_t>(index_status::running)], 0u);
    // Due again only when its lease runs out (a worker that fails meanwhile is replaced).
    EXPECT_TRUE(run(st().due(t0 + 3s, 10)).empty());
    EXPECT_EQ(run(st().due(t0 + 2s + ttl, 10)), std::vector<std::string>{"i"});

    // The step's commit carries the consumed signal and says it runs; a running instance is
    // not "resumed".
    auto step = commit_of("i", got->grant.lease, 0);
    step.entries = {journal_entry{1, op_kind::signal, "/pay", {{"id", paid.id}}, false},
                    entry(2, "charge", 1)};
    step.consume = {paid.id};
    step.cancel_timers = {0};
    step.status = instance_status::running;
    step.now = t0 + 3s;
    ASSERT_TRUE(run(st().commit(step)));
    auto after = run(st().load("i", true));
    EXPECT_EQ(after->status, instance_status::running);
    EXPECT_EQ(after->changed, t0 + 3s);
    EXPECT_TRUE(after->inbox.empty());
    EXPECT_TRUE(after->timers.empty());
    EXPECT_EQ(after->journal.size(), 2u);
    counts = run(st().counts());
    EXPECT_EQ(counts["def"][static_cast<std::size_t>(index_status::running)], 1u);
    EXPECT_EQ(counts["def"][static_cast<std::size_t>(index_status::suspended)], 0u);
    auto again = run(st().take("i", "w2", t0 + 4s, ttl, {}, 2));
    ASSERT_TRUE(again);
    EXPECT_FALSE(again->resumed);
}

// A resumed instance whose step outlasts half a lease (its worker renews the lease) or fails
// an attempt is marked running there, status and index, so that a long or failing step shows.
TEST_P(store_conformance, a_resumed_step_that_renews_or_fails_marks_the_instance_running) {
    for (std::string id : {"slow", "failing"}) {
        auto lease = start(id).lease;
        auto suspend = commit_of(id, lease, 0);
        suspend.status = instance_status::suspended;
        suspend.waits = std::vector<signal_wait>{{1, "/pay"}};
        suspend.release = true;
        ASSERT_TRUE(run(st().commit(suspend)));
        ASSERT_TRUE(run(st().deliver(id, inbox_entry{0, "", "/pay", {}, t0 + 1s})).waiting);
        auto got = run(st().take(id, "w2", t0 + 2s, ttl, {}, std::nullopt));
        ASSERT_TRUE(got);
        ASSERT_TRUE(got->resumed);
        ASSERT_EQ(run(st().load(id, false))->status, instance_status::suspended);
        if (id == "slow") {
            ASSERT_TRUE(run(st().renew(id, got->grant.lease, t0 + 7s, ttl)));
        } else {
            step_attempt failed{2, "charge", 1, "declined", "w2", t0 + 7s};
            ASSERT_TRUE(run(st().note_attempt(id, got->grant.lease, failed)));
        }
        auto now = run(st().load(id, false));
        EXPECT_EQ(now->status, instance_status::running) << id;
        EXPECT_EQ(now->changed, t0 + 7s) << id;
        ASSERT_EQ(now->inbox.size(), 1u) << id;  // still to be consumed by the step's commit
        list_query running;
        running.status = index_status::running;
        running.prefix = id;
        EXPECT_EQ(run(st().list(running)).instances.size(), 1u) << id;
    }
    auto counts = run(st().counts());
    EXPECT_EQ(counts["def"][static_cast<std::size_t>(index_status::running)], 2u);
    EXPECT_EQ(counts["def"][static_cast<std::size_t>(index_status::suspended)], 0u);
    // Due when the lease (renewed or not) ends, as any running instance.
    EXPECT_TRUE(run(st().due(t0 + 3s, 10)).empty());
}

// An instance started waiting for its queue (first_wait::queued) is listed as queued, apart
// from the suspended ones, until its next commit (admitted, cancelled or still suspended) or
// until it is marked running (a renewal): then the index lists what its status says.
TEST_P(store_conformance, a_queued_start_is_listed_as_queued_until_it_next_changes) {
    auto begin = [&](const std::string& id, bool queued) {
        start_request req{id, "def", nlohmann::json{{"order", id}}, "w1", t0, ttl};
        journal_entry marker{0, op_kind::run, "queue:jobs", nullptr, false};
        marker.at = t0;
        req.suspended = start_request::first_wait{{marker}, {}, {signal_wait{1, "/admit"}}, queued};
        ASSERT_TRUE(run(st().start(req)).created) << id;
    };
    auto counts = [&](index_status s) {
        return run(st().counts())["def"][static_cast<std::size_t>(s)];
    };
    auto listed = [&](index_status s) {
        list_query q;
        q.status = s;
        std::set<std::string> ids;
        for (const auto& i : run(st().list(q)).instances) {
            EXPECT_EQ(i.status, s) << i.id;
            ids.insert(i.id);
        }
        return ids;
    };
    // Delivers its admission and takes it to resume: the lease and the admission's inbox id.
    auto admit_and_take = [&](const std::string& id) {
        auto admission = run(st().deliver(id, inbox_entry{0, "", "/admit", {}, t0 + 1s}));
        EXPECT_TRUE(admission.waiting) << id;
        auto got = run(st().take(id, "w2", t0 + 2s, ttl, {}, std::nullopt));
        EXPECT_TRUE(got && got->resumed) << id;
        return std::pair{got ? got->grant.lease : lease_token{}, admission.id};
    };
    for (const char* id : {"admitted", "renewed", "cancelled", "still"}) begin(id, true);
    begin("plain", false);
    EXPECT_EQ(listed(index_status::queued),
              (std::set<std::string>{"admitted", "cancelled", "renewed", "still"}));
    EXPECT_EQ(listed(index_status::suspended), std::set<std::string>{"plain"});
    EXPECT_EQ(counts(index_status::queued), 4u);
    EXPECT_EQ(counts(index_status::suspended), 1u);

    // Taken to resume, it stays as it was listed until it commits.
    auto [lease, admission] = admit_and_take("admitted");
    EXPECT_EQ(counts(index_status::queued), 4u);
    auto step = commit_of("admitted", lease, 1);
    step.entries = {journal_entry{1, op_kind::signal, "/admit", nullptr, false}};
    step.consume = {admission};
    step.status = instance_status::running;
    ASSERT_TRUE(run(st().commit(step)));

    auto renewed = admit_and_take("renewed").first;
    ASSERT_TRUE(run(st().renew("renewed", renewed, t0 + 7s, ttl)));

    auto cancel = commit_of("cancelled", admit_and_take("cancelled").first, 1);
    cancel.status = instance_status::cancelled;
    cancel.release = true;
    ASSERT_TRUE(run(st().commit(cancel)));

    std::tie(lease, admission) = admit_and_take("still");
    auto wait_on = commit_of("still", lease, 1);
    wait_on.entries = {journal_entry{1, op_kind::signal, "/admit", nullptr, false}};
    wait_on.consume = {admission};
    wait_on.waits = std::vector<signal_wait>{{2, "/done"}};
    wait_on.release = true;
    ASSERT_TRUE(run(st().commit(wait_on)));

    EXPECT_TRUE(listed(index_status::queued).empty());
    EXPECT_EQ(counts(index_status::queued), 0u);
    EXPECT_EQ(listed(index_status::running), (std::set<std::string>{"admitted", "renewed"}));
    EXPECT_EQ(listed(index_status::suspended), (std::set<std::string>{"plain", "still"}));
    EXPECT_EQ(listed(index_status::cancelled), std::set<std::string>{"cancelled"});
    EXPECT_EQ(counts(index_status::running), 2u);
    EXPECT_EQ(counts(index_status::suspended), 2u);
    EXPECT_EQ(counts(index_status::cancelled), 1u);
    // The renewed one's commit finds it running: it moves from running, not from queued.
    auto after = commit_of("renewed", renewed, 1);
    after.status = instance_status::completed;
    ASSERT_TRUE(run(st().commit(after)));
    EXPECT_EQ(counts(index_status::running), 1u);
    EXPECT_EQ(counts(index_status::completed), 1u);
    EXPECT_EQ(counts(index_status::queued), 0u);
}

// A worker that takes a suspended instance and fails before it commits leaves it due when the
// lease ends, even with nothing in the inbox or the timers to resume it with: whoever takes
// it then finds out.
TEST_P(store_conformance, a_leased_suspended_instance_is_due_when_its_lease_ends) {
    auto lease = start("i").lease;
    auto suspend = commit_of("i", lease, 0);
    suspend.status = instance_status::suspended;
    suspend.waits = std::vector<signal_wait>{{1, "/pay"}};
    suspend.release = true;
    ASSERT_TRUE(run(st().commit(suspend)));
    EXPECT_FALSE(run(st().next_due()));  // waits for a signal only
    auto got = run(st().take("i", "w2", t0 + 2s, ttl, {}, std::nullopt));
    ASSERT_TRUE(got);
    EXPECT_TRUE(run(st().due(t0 + 3s, 10)).empty());
    EXPECT_EQ(run(st().due(t0 + 2s + ttl, 10)), std::vector<std::string>{"i"});
    run(st().release("i", got->grant.lease));
    EXPECT_FALSE(run(st().next_due()));  // released: waits for its signal again

    // Suspended by a commit that keeps the lease: the same.
    auto kept = start("k").lease;
    auto keep = commit_of("k", kept, 0);
    keep.status = instance_status::suspended;
    keep.waits = std::vector<signal_wait>{{1, "/pay"}};
    ASSERT_TRUE(run(st().commit(keep)));
    EXPECT_EQ(run(st().next_due()), t0 + ttl);
}

// An emit's fan-out may take what it makes ready to run for the emitting worker: the same
// grant, move to running and snapshot as take() (without the journal), the signal in it.
TEST_P(store_conformance, a_fan_out_takes_for_its_worker_what_the_signal_makes_ready) {
    // "ready": suspended, waiting for /pay, no lease. The others are left as they are:
    // "other": waits for something else; "busy": suspended but still leased by w1;
    // "old": started by a version the worker refuses; "running": not suspended.
    for (std::string id : {"ready", "other", "busy", "old", "running"}) {
        start_request req{id, "def", {}, "w1", t0, ttl};
        req.subscriptions = {"/pay"};
        if (id == "old") req.version = "1";
        if (id == "ready") req.version = "2";
        auto lease = run(st().start(std::move(req))).lease;
        if (id == "running") continue;
        auto suspend = commit_of(id, lease, 0);
        suspend.status = instance_status::suspended;
        suspend.waits = std::vector<signal_wait>{{1, id == "other" ? "/ship" : "/pay"}};
        suspend.add_timers = {timer_record{0, t0 + 72h, "expiry"}};
        suspend.release = id != "busy";
        ASSERT_TRUE(run(st().commit(suspend))) << id;
    }
    fan_out_request emit;
    emit.subscriptions = {"/pay"};
    emit.signal = inbox_entry{0, "tx-1", "/pay", {{"amount", 5}}, t0 + 1s};
    emit.take = fan_out_request::taker{"w2", t0 + 2s, ttl, {{"def", "1"}}};
    auto out = run(st().fan_out(emit));
    EXPECT_EQ(out.reached, 5u);
    EXPECT_EQ(out.delivered.size(), 5u);
    ASSERT_EQ(out.taken.size(), 1u);
    const auto& [id, got] = out.taken[0];
    EXPECT_EQ(id, "ready");
    EXPECT_EQ(got.grant.lease.worker, "w2");
    EXPECT_GT(got.grant.lease.epoch, 1u);  // a new holder: a higher epoch than w1's
    EXPECT_EQ(got.grant.expires, t0 + 2s + ttl);
    EXPECT_EQ(got.grant.status, instance_status::suspended);
    EXPECT_EQ(got.grant.journal_length, 0u);
    EXPECT_FALSE(got.with_journal);
    EXPECT_TRUE(got.resumed);
    // What a worker holding the instance in memory checks before it resumes it:
    EXPECT_EQ(got.snapshot.id, "ready");
    EXPECT_EQ(got.snapshot.definition, "def");
    EXPECT_EQ(got.snapshot.version, "2");
    EXPECT_FALSE(got.snapshot.parked);
    EXPECT_EQ(got.snapshot.status, instance_status::suspended);  // as it was
    EXPECT_EQ(got.snapshot.lease, got.grant.lease);              // with the grant
    EXPECT_EQ(got.snapshot.lease_expires, got.grant.expires);
    ASSERT_EQ(got.snapshot.inbox.size(), 1u);
    EXPECT_EQ(got.snapshot.inbox[0].path, "/pay");
    EXPECT_EQ(got.snapshot.waits, (std::vector<signal_wait>{{1, "/pay"}}));
    EXPECT_EQ(got.snapshot.timers.size(), 1u);

    auto now = run(st().load("ready", true));
    EXPECT_EQ(now->status, instance_status::suspended);  // leased: resumed (as after take())
    ASSERT_TRUE(now->lease);
    EXPECT_EQ(*now->lease, got.grant.lease);
    // The taken one is due when its lease runs out, as after take(); the refused one at once,
    // for a worker that has its code; the busy one at its lease's end.
    EXPECT_EQ(run(st().due(t0 + 3s, 10)), std::vector<std::string>{"old"});
    auto due = run(st().due(t0 + 2s + ttl, 10));
    EXPECT_EQ(std::set<std::string>(due.begin(), due.end()),
              (std::set<std::string>{"ready", "busy", "old", "running"}));
    // The grant fences like take()'s: w2 commits the step with the signal consumed.
    auto step = commit_of("ready", got.grant.lease, 0);
    step.entries = {
        journal_entry{1, op_kind::signal, "/pay", {{"id", got.snapshot.inbox[0].id}}, false}};
    step.consume = {got.snapshot.inbox[0].id};
    EXPECT_TRUE(run(st().commit(step)));
    for (std::string left : {"other", "old"}) {
        auto snap = run(st().load(left, false));
        EXPECT_EQ(snap->status, instance_status::suspended) << left;
        EXPECT_FALSE(snap->lease) << left;
        EXPECT_EQ(snap->inbox.size(), 1u) << left;
    }
    EXPECT_EQ(run(st().load("busy", false))->lease->worker, "w1");

    // Without `take`, a fan-out takes nothing.
    emit.take.reset();
    emit.signal.key = "tx-2";
    auto plain = run(st().fan_out(emit));
    EXPECT_TRUE(plain.taken.empty());
    EXPECT_EQ(plain.delivered.size(), 5u);
    auto ready = run(st().load("ready", false));
    ASSERT_EQ(ready->inbox.size(), 1u);
    EXPECT_GT(ready->inbox[0].id, got.snapshot.inbox[0].id);  // the take moved the ids on
}

// A suspended instance whose holder notes a failed attempt runs (as after a renewal): due when
// its lease ends, even when its timer comes later, and after a step's plain commit too.
TEST_P(store_conformance,
       a_failed_attempt_that_marks_an_instance_running_makes_it_due_at_its_lease_end) {
    auto lease = start("i").lease;  // until t0 + ttl
    auto suspend = commit_of("i", lease, 0);
    suspend.status = instance_status::suspended;
    suspend.waits = std::vector<signal_wait>{{1, "/pay"}};
    suspend.add_timers = {timer_record{2, t0 + 1h, "expiry"}};
    ASSERT_TRUE(run(st().commit(suspend)));    // the lease kept
    EXPECT_EQ(run(st().next_due()), t0 + 1h);  // its timer, after the lease's end
    step_attempt failed{0, "charge", 1, "declined", "w1", t0 + 5s};
    ASSERT_TRUE(run(st().note_attempt("i", lease, failed)));
    EXPECT_EQ(run(st().load("i", false))->status, instance_status::running);
    EXPECT_EQ(run(st().next_due()), t0 + ttl);
    // A step's commit of entries alone leaves it so.
    auto step = commit_of("i", lease, 0);
    step.entries = {entry(0, "charge", 1)};
    ASSERT_TRUE(run(st().commit(step)));
    EXPECT_EQ(run(st().next_due()), t0 + ttl);
    EXPECT_TRUE(run(st().due(t0 + ttl - 1s, 10)).empty());
    EXPECT_EQ(run(st().due(t0 + ttl, 10)), std::vector<std::string>{"i"});
}

// An operator's retry of an instance that had journaled nothing: the retry is listed, and the
// journal it had reads as an empty page, not as a retry that is not there.
TEST_P(store_conformance, the_journal_before_a_retry_reads_as_empty_when_it_was_empty) {
    auto lease = start("i").lease;
    auto fail = commit_of("i", lease, 0);
    fail.status = instance_status::failed;
    fail.error = "boom";
    fail.release = true;
    ASSERT_TRUE(run(st().commit(fail)));
    ASSERT_TRUE(run(st().rewind(rewind_request{"i", 0, 0, {}, t0 + 5s})));
    EXPECT_EQ(run(st().load("i", false))->retries, (std::vector<retry_record>{{0, t0 + 5s, 0}}));
    auto empty = run(st().read_journal("i", 1, 0, 10));
    ASSERT_TRUE(empty);
    EXPECT_EQ(empty->total, 0u);
    EXPECT_TRUE(empty->entries.empty());
    EXPECT_FALSE(run(st().read_journal("i", 2, 0, 10)));  // no such retry
    EXPECT_FALSE(run(st().read_journal("nope", 1, 0, 10)));

    // A second retry, of a journal of one entry: both earlier journals read back.
    auto again = run(st().acquire("i", "w1", t0 + 6s, ttl));
    ASSERT_TRUE(again);
    auto fail_again = commit_of("i", again->lease, 0);
    fail_again.entries = {entry(0, "charge", 1)};
    fail_again.status = instance_status::failed;
    fail_again.error = "boom";
    fail_again.release = true;
    ASSERT_TRUE(run(st().commit(fail_again)));
    ASSERT_TRUE(run(st().rewind(rewind_request{"i", 1, 0, {}, t0 + 8s})));
    EXPECT_EQ(run(st().load("i", false))->retries.size(), 2u);
    auto first = run(st().read_journal("i", 1, 0, 10));
    ASSERT_TRUE(first);
    EXPECT_EQ(first->total, 0u);
    auto second = run(st().read_journal("i", 2, 0, 10));
    ASSERT_TRUE(second);
    EXPECT_EQ(second->total, 1u);
    ASSERT_EQ(second->entries.size(), 1u);
    EXPECT_EQ(second->entries[0], entry(0, "charge", 1));
    EXPECT_FALSE(run(st().read_journal("i", 3, 0, 10)));
    auto now = run(st().read_journal("i", 0, 0, 10));
    ASSERT_TRUE(now);
    EXPECT_EQ(now->total, 0u);
}

// An operator takes a signal out of the inbox while no worker runs the instance: refused
// while it runs or a worker holds it to resume it, done while it is suspended or final, kept
// for audit; the signal's key stays claimed.
TEST_P(store_conformance, an_operator_removes_a_signal_only_while_no_worker_runs_the_instance) {
    auto lease = start("i").lease;
    inbox_entry bad{0, "tx-bad", "/pay", {{"amount", "ten"}}, t0 + 1s};
    auto first = run(st().deliver("i", bad));
    ASSERT_EQ(first.result, delivery::outcome::stored);
    auto other = run(st().deliver("i", inbox_entry{0, "", "/ship", 1, t0 + 1s}));
    auto remove = [&](std::uint64_t id, keel::time_point now) {
        return run(st().remove_signal(remove_signal_request{"i", id, now}));
    };
    EXPECT_EQ(remove(first.id, t0 + 2s).error(), store_error::wrong_state);  // running
    EXPECT_EQ(run(st().remove_signal(remove_signal_request{"nope", first.id, t0 + 2s})).error(),
              store_error::not_found);
    auto suspend = commit_of("i", lease, 0);
    suspend.status = instance_status::suspended;
    suspend.waits = std::vector<signal_wait>{{1, "/later"}};
    suspend.release = true;
    ASSERT_TRUE(run(st().commit(suspend)));
    // Taken to resume: a worker holds it until its lease ends.
    ASSERT_TRUE(run(st().take("i", "w2", t0 + 3s, ttl, {}, std::nullopt)));
    EXPECT_EQ(remove(first.id, t0 + 4s).error(), store_error::busy);
    EXPECT_EQ(run(st().load("i", false))->inbox.size(), 2u);  // refused: nothing changed

    // Once the lease ran out, the signal goes; the rest of the inbox stays.
    auto later = t0 + 3s + ttl + 1s;
    EXPECT_EQ(remove(99, later).error(), store_error::inbox_missing);
    auto removed = remove(first.id, later);
    ASSERT_TRUE(removed);
    EXPECT_EQ(removed->id, first.id);
    EXPECT_EQ(removed->key, "tx-bad");
    EXPECT_EQ(removed->path, "/pay");
    EXPECT_EQ(removed->payload, bad.payload);
    EXPECT_EQ(removed->at, t0 + 1s);
    auto snap = run(st().load("i", false));
    ASSERT_EQ(snap->inbox.size(), 1u);
    EXPECT_EQ(snap->inbox[0].id, other.id);
    ASSERT_EQ(snap->removed.size(), 1u);
    EXPECT_EQ(snap->removed[0].signal.id, first.id);
    EXPECT_EQ(snap->removed[0].signal.payload, bad.payload);
    EXPECT_EQ(snap->removed[0].signal.key, "tx-bad");
    EXPECT_EQ(snap->removed[0].removed, later);
    EXPECT_EQ(snap->status, instance_status::suspended);
    EXPECT_EQ(remove(first.id, later).error(), store_error::inbox_missing);  // gone
    EXPECT_EQ(run(st().deliver("i", bad)).result, delivery::outcome::duplicate);

    // A final instance's inbox too; the audit keeps both, oldest first.
    auto again = run(st().acquire("i", "w1", later, ttl));
    ASSERT_TRUE(again);
    auto fail = commit_of("i", again->lease, 0);
    fail.status = instance_status::failed;
    fail.error = "boom";
    fail.release = true;
    ASSERT_TRUE(run(st().commit(fail)));
    ASSERT_TRUE(remove(other.id, later + 1s));
    snap = run(st().load("i", false));
    EXPECT_TRUE(snap->inbox.empty());
    ASSERT_EQ(snap->removed.size(), 2u);
    EXPECT_EQ(snap->removed[1].signal.id, other.id);
    EXPECT_EQ(snap->removed[1].signal.path, "/ship");
    EXPECT_EQ(snap->removed[1].removed, later + 1s);
    EXPECT_EQ(snap->status, instance_status::failed);
}

// A removed signal an instance waited for no longer makes it due.
TEST_P(store_conformance, removing_an_awaited_signal_leaves_the_instance_waiting) {
    auto lease = start("i").lease;
    auto suspend = commit_of("i", lease, 0);
    suspend.status = instance_status::suspended;
    suspend.waits = std::vector<signal_wait>{{1, "/pay"}};
    suspend.release = true;
    ASSERT_TRUE(run(st().commit(suspend)));
    auto d = run(st().deliver("i", inbox_entry{0, "", "/pay", {{"amount", "ten"}}, t0 + 1s}));
    ASSERT_TRUE(d.waiting);
    EXPECT_EQ(run(st().due(t0 + 2s, 10)), std::vector<std::string>{"i"});
    ASSERT_TRUE(run(st().remove_signal(remove_signal_request{"i", d.id, t0 + 2s})));
    EXPECT_TRUE(run(st().due(t0 + 2s, 10)).empty());
    EXPECT_FALSE(run(st().next_due()));
}

// A retry that leaves a consumed signal out records which, and does not give it back.
TEST_P(store_conformance, a_retry_records_the_signals_it_left_out) {
    auto lease = start("i").lease;
    auto d = run(st().deliver("i", inbox_entry{0, "", "/pay", {{"amount", "ten"}}, t0}));
    auto fail = commit_of("i", lease, 0);
    fail.entries = {journal_entry{0, op_kind::signal, "/pay",
                                  nlohmann::json{{"id", d.id}, {"payload", {{"amount", "ten"}}}},
                                  false, t0}};
    fail.consume = {d.id};
    fail.status = instance_status::failed;
    fail.error = "bad payment";
    fail.release = true;
    ASSERT_TRUE(run(st().commit(fail)));
    rewind_request r{"i", 1, 0, {}, t0 + 5s, {d.id}};
    ASSERT_TRUE(run(st().rewind(r)));
    auto snap = run(st().load("i", false));
    EXPECT_TRUE(snap->inbox.empty());
    ASSERT_EQ(snap->retries.size(), 1u);
    EXPECT_EQ(snap->retries[0], (retry_record{0, t0 + 5s, 1, {d.id}}));
}

TEST_P(store_conformance, leaving_releases_the_lease_and_says_why) {
    auto lease = start("i").lease;
    departure why{"w1", "1", "journal mismatch at #2", t0 + 5s};
    run(st().leave("i", lease_token{"w1", 7}, why));  // not the holder: nothing changes
    EXPECT_FALSE(run(st().load("i", false))->left);
    run(st().leave("i", lease, why));
    auto snap = run(st().load("i", false));
    EXPECT_FALSE(snap->lease);
    EXPECT_EQ(snap->left, why);
    EXPECT_EQ(run(st().due(t0 + 5s, 10)), std::vector<std::string>{"i"});  // for the next worker
}

TEST_P(store_conformance, workers_announce_themselves_until_their_announcement_expires) {
    worker_record a{"a", {{"def", "1"}, {"other", ""}}, t0, t0 + 15s};
    worker_record b{"b", {{"def", "2"}}, t0 + 1s, t0 + 16s};
    EXPECT_EQ(run(st().announce(a)), std::vector<worker_record>{a});
    EXPECT_EQ(run(st().announce(b)), (std::vector<worker_record>{a, b}));
    EXPECT_EQ(run(st().workers(t0 + 15s)), (std::vector<worker_record>{a, b}));
    EXPECT_EQ(run(st().workers(t0 + 16s)), std::vector<worker_record>{b});  // a expired
    b.seen = t0 + 16s;
    b.expires = t0 + 31s;
    EXPECT_EQ(run(st().announce(b)), std::vector<worker_record>{b});  // and is forgotten
    a.seen = t0 + 17s;
    a.expires = t0 + 32s;
    run(st().announce(a));
    run(st().withdraw("b"));
    EXPECT_EQ(run(st().workers(t0 + 17s)), std::vector<worker_record>{a});
}

// ---- queues (keel/process/queue.hpp) ----

queue_entry queued(std::string id, std::string partition = "", std::int32_t priority = 0,
                   std::string dedup = "") {
    return queue_entry{std::move(id), {std::move(partition), priority, std::move(dedup)}, t0};
}

std::vector<std::string> ids_of(const admission_round& round) {
    std::vector<std::string> out;
    for (const auto& a : round.admitted) out.push_back(a.instance);
    return out;
}

TEST_P(store_conformance, an_entry_is_admitted_at_once_while_nobody_waits_and_there_is_room) {
    const queue q{.name = "q", .concurrency = 1};
    auto first = run(st().enqueue(q, queued("h"), 5s));
    EXPECT_TRUE(first.fresh);
    EXPECT_TRUE(first.admitted);
    auto second = run(st().enqueue(q, queued("w"), 5s));
    EXPECT_TRUE(second.fresh);
    EXPECT_FALSE(second.admitted) << "no room";
    auto s = run(st().describe_queue("q", 10));
    EXPECT_EQ(s.admitted, 1u);
    EXPECT_EQ(s.waiting, 1u);
    run(st().leave_queue("q", "h"));
    EXPECT_FALSE(run(st().enqueue(q, queued("x"), 5s)).admitted) << "w waits: x goes behind it";
}

TEST_P(store_conformance, a_queue_admits_by_priority_then_age_within_its_concurrency) {
    const queue q{.name = "q", .concurrency = 1};
    EXPECT_TRUE(run(st().enqueue(q, queued("h"), 5s)).admitted);
    for (auto [id, pr] : {std::pair{"a", 0}, {"b", 2}, {"c", -1}, {"d", 0}})
        EXPECT_FALSE(run(st().enqueue(q, queued(id, "", pr), 5s)).admitted);
    auto full = run(st().admit(q, t0, 10, 5s));
    EXPECT_TRUE(full.admitted.empty());
    EXPECT_TRUE(full.waiting);
    EXPECT_EQ(full.next, t0 + 5s) << "h's check";
    std::vector<std::string> order;
    for (auto leaving : {"h", "c", "a", "d"}) {
        run(st().leave_queue("q", leaving));
        auto round = run(st().admit(q, t0, 10, 5s));
        ASSERT_EQ(round.admitted.size(), 1u) << leaving;
        EXPECT_TRUE(round.admitted[0].fresh);
        order.push_back(round.admitted[0].instance);
    }
    EXPECT_EQ(order, (std::vector<std::string>{"c", "a", "d", "b"}));
    run(st().leave_queue("q", "b"));
    run(st().leave_queue("q", "b"));  // again: nothing
    EXPECT_EQ(run(st().describe_queue("q", 10)).admitted, 0u);
}

// worker_concurrency: each worker's unfinished admissions, at its enqueues and its rounds;
// an entry that leaves frees its admitting worker's place whoever makes the leave.
TEST_P(store_conformance, each_worker_admits_up_to_its_worker_concurrency) {
    const queue q{.name = "wq", .concurrency = 10, .worker_concurrency = 2};
    auto by = [](std::string id, std::string worker) {
        auto e = queued(std::move(id));
        e.worker = std::move(worker);
        return e;
    };
    EXPECT_TRUE(run(st().enqueue(q, by("a1", "A"), 5s)).admitted);
    EXPECT_TRUE(run(st().enqueue(q, by("a2", "A"), 5s)).admitted);
    EXPECT_FALSE(run(st().enqueue(q, by("a3", "A"), 5s)).admitted) << "A holds two";
    for (auto id : {"a4", "a5", "a6"}) run(st().enqueue(q, by(id, "A"), 5s));
    EXPECT_TRUE(run(st().admit(q, t0, 10, 5s, "A")).admitted.empty()) << "A holds two";
    EXPECT_EQ(ids_of(run(st().admit(q, t0, 10, 5s, "B"))), (std::vector<std::string>{"a3", "a4"}));
    EXPECT_TRUE(run(st().admit(q, t0, 10, 5s, "B")).admitted.empty()) << "B holds two";
    // One of A's ends: A has room for one, B still none.
    run(st().leave_queue("wq", "a1"));
    EXPECT_TRUE(run(st().admit(q, t0, 10, 5s, "B")).admitted.empty());
    EXPECT_EQ(ids_of(run(st().admit(q, t0, 10, 5s, "A"))), (std::vector<std::string>{"a5"}));
    // A caller that is no worker is held by the queue's limits only.
    EXPECT_EQ(ids_of(run(st().admit(q, t0, 10, 5s))), (std::vector<std::string>{"a6"}));
    auto s = run(st().describe_queue("wq", 10));
    EXPECT_EQ(s.admitted, 5u);
    EXPECT_EQ(s.waiting, 0u);
    // Every one leaves: A's and B's places are free again.
    for (auto id : {"a2", "a3", "a4", "a5", "a6"}) run(st().leave_queue("wq", id));
    for (auto id : {"b1", "b2", "b3"}) run(st().enqueue(q, by(id, "C"), 5s));
    EXPECT_EQ(ids_of(run(st().admit(q, t0, 10, 5s, "A"))), (std::vector<std::string>{"b3"}));
    EXPECT_EQ(run(st().describe_queue("wq", 10)).admitted, 3u) << "C took b1, b2 at once";
}

TEST_P(store_conformance, admitted_entries_come_back_to_be_checked) {
    const queue q{.name = "q", .concurrency = 2};
    run(st().enqueue(q, queued("a"), 5s));
    run(st().enqueue(q, queued("b"), 5s));
    EXPECT_TRUE(run(st().admit(q, t0 + 4s, 10, 5s)).admitted.empty());
    auto checks = run(st().admit(q, t0 + 5s, 10, 5s));
    EXPECT_EQ(ids_of(checks), (std::vector<std::string>{"a", "b"}));
    EXPECT_FALSE(checks.waiting);
    EXPECT_EQ(checks.next, t0 + 10s);
    for (const auto& a : checks.admitted) {
        EXPECT_FALSE(a.fresh);
        EXPECT_EQ(a.enqueued_at, t0);
    }
}

TEST_P(store_conformance, partitions_take_turns_five_thousand_against_ten) {
    const queue held{.name = "fair", .concurrency = 1};
    run(st().enqueue(held, queued("blocker"), 5s));
    for (int i = 0; i < 5000; ++i)
        run(st().enqueue(held, queued("big-" + std::to_string(i), "big"), 5s));
    for (int i = 0; i < 10; ++i)
        run(st().enqueue(held, queued("small-" + std::to_string(i), "small"), 5s));
    EXPECT_EQ(run(st().describe_queue("fair", 10)).waiting, 5010u);
    // The limit lifted: one round of twenty.
    const queue open{.name = "fair"};
    auto batch = ids_of(run(st().admit(open, t0, 20, 5s)));
    ASSERT_EQ(batch.size(), 20u);
    // Round robin: the ten small ones are among the first twenty admissions.
    EXPECT_EQ(std::ranges::count_if(batch, [](const auto& id) { return id.starts_with("small-"); }),
              10);
    EXPECT_EQ(batch[0], "big-0");
    EXPECT_EQ(batch[1], "small-0");
    EXPECT_EQ(batch[19], "small-9");
}

TEST_P(store_conformance, a_partition_at_its_limit_does_not_block_the_others) {
    const queue q{.name = "p", .partition_concurrency = 1};
    EXPECT_TRUE(run(st().enqueue(q, queued("a1", "a"), 5s)).admitted);
    EXPECT_FALSE(run(st().enqueue(q, queued("a2", "a"), 5s)).admitted);
    EXPECT_FALSE(run(st().enqueue(q, queued("b1", "b"), 5s)).admitted) << "behind a2";
    EXPECT_EQ(ids_of(run(st().admit(q, t0, 10, 5s))), (std::vector<std::string>{"b1"}));
    run(st().enqueue(q, queued("c1", "c"), 5s));
    auto s = run(st().describe_queue("p", 1));
    EXPECT_EQ(s.waiting, 2u);
    EXPECT_EQ(s.admitted, 2u);
    ASSERT_EQ(s.partitions.size(), 1u);
    EXPECT_EQ(s.partitions[0].name, "a");
    EXPECT_EQ(s.partitions[0].waiting, 1u);
    EXPECT_EQ(s.partitions[0].admitted, 1u);
    EXPECT_TRUE(s.more_partitions);
    run(st().leave_queue("p", "a1"));
    EXPECT_EQ(ids_of(run(st().admit(q, t0, 10, 5s))), (std::vector<std::string>{"a2", "c1"}));
}

// Many partitions at their limit ahead of one with room, more than one round is given the
// lines of on Redis: the round that meets the unprepared one says to come again at once,
// and a round at the same moment admits it.
TEST_P(store_conformance, a_partition_behind_many_full_ones_is_admitted_at_the_same_moment) {
    const queue q{.name = "many", .partition_concurrency = 1};
    auto partition = [](int i) { return "p" + std::to_string(i); };
    for (int i = 0; i < 40; ++i)
        EXPECT_TRUE(run(st().enqueue(q, queued(partition(i) + "-a", partition(i)), 5s)).admitted);
    for (int i = 0; i < 40; ++i)
        EXPECT_FALSE(run(st().enqueue(q, queued(partition(i) + "-b", partition(i)), 5s)).admitted);
    EXPECT_FALSE(run(st().enqueue(q, queued("z-a", "z"), 5s)).admitted) << "behind the others";
    std::vector<std::string> admitted;
    for (int round = 0; round < 3 && admitted.empty(); ++round) {
        auto r = run(st().admit(q, t0, 1, 5s));
        admitted = ids_of(r);
        if (admitted.empty()) {
            EXPECT_EQ(r.next, t0) << "come again at once";
        }
    }
    EXPECT_EQ(admitted, (std::vector<std::string>{"z-a"}));
    auto s = run(st().describe_queue("many", 100));
    EXPECT_EQ(s.waiting, 40u);
    EXPECT_EQ(s.admitted, 41u);
}

TEST_P(store_conformance, a_queue_rate_is_a_sliding_window) {
    const queue q{.name = "r", .rate = 2, .per = 1s};
    int at_once = 0;
    for (int i = 0; i < 5; ++i)
        at_once += run(st().enqueue(q, queued("i" + std::to_string(i)), 5s)).admitted;
    EXPECT_EQ(at_once, 2);
    for (auto id : {"i0", "i1"}) run(st().leave_queue("r", id));  // as the engine does
    auto early = run(st().admit(q, t0 + 999ms, 10, 5s));
    EXPECT_EQ(early.admitted.size(), 0u);
    EXPECT_EQ(early.next, t0 + 1s) << "when the window lets the next one in";
    EXPECT_TRUE(early.waiting);
    EXPECT_EQ(run(st().admit(q, t0 + 1s, 10, 5s)).admitted.size(), 2u);
}

TEST_P(store_conformance, a_dedup_id_holds_while_its_entry_is_in_the_queue) {
    const queue q{.name = "d"};
    EXPECT_EQ(run(st().enqueue(q, queued("one", "", 0, "k"), 5s)).instance, "one");
    auto dup = run(st().enqueue(q, queued("two", "", 0, "k"), 5s));
    EXPECT_EQ(dup.instance, "one");
    EXPECT_FALSE(dup.fresh);
    auto again = run(st().enqueue(q, queued("one"), 5s));
    EXPECT_EQ(again.instance, "one");
    EXPECT_FALSE(again.fresh);
    run(st().leave_queue("d", "one"));
    EXPECT_TRUE(run(st().enqueue(q, queued("two", "", 0, "k"), 5s)).fresh);
    EXPECT_EQ(run(st().describe_queue("d", 10)).admitted, 1u);
    EXPECT_EQ(run(st().describe_queue("unknown", 10)).waiting, 0u);
}

// One call takes admitted and waiting entries out together, in several partitions (on Redis
// the waiting ones need a second call that names their lines), and passes over an instance
// that is not there or is named twice.
TEST_P(store_conformance, many_instances_leave_in_one_call) {
    const queue q{.name = "m", .concurrency = 2};
    EXPECT_TRUE(run(st().enqueue(q, queued("a1", "a", 0, "k1"), 5s)).admitted);
    EXPECT_TRUE(run(st().enqueue(q, queued("b1", "b"), 5s)).admitted);
    for (auto [id, p] : {std::pair{"a2", "a"}, {"b2", "b"}, {"c1", "c"}, {"c2", "c"}})
        EXPECT_FALSE(run(st().enqueue(q, queued(id, p), 5s)).admitted);
    std::vector<std::string> leaving{"a1", "b2", "c1", "nobody", "a1", "c2"};
    run(st().leave_queue("m", leaving));
    auto s = run(st().describe_queue("m", 10));
    EXPECT_EQ(s.admitted, 1u) << "b1";
    EXPECT_EQ(s.waiting, 1u) << "a2";
    ASSERT_EQ(s.partitions.size(), 2u) << "c's line is gone";
    EXPECT_EQ(s.partitions[0].name, "a");
    EXPECT_EQ(s.partitions[1].name, "b");
    EXPECT_EQ(ids_of(run(st().admit(q, t0, 10, 5s))), (std::vector<std::string>{"a2"}));
    EXPECT_TRUE(run(st().enqueue(q, queued("a3", "a", 0, "k1"), 5s)).fresh) << "k1 is free";
    std::vector<std::string> none;
    run(st().leave_queue("m", none));
    std::vector<std::string> all{"b1", "a2", "a3"};
    run(st().leave_queue("m", all));
    s = run(st().describe_queue("m", 10));
    EXPECT_EQ(s.admitted, 0u);
    EXPECT_EQ(s.waiting, 0u);
}

INSTANTIATE_TEST_SUITE_P(stores, store_conformance, ::testing::ValuesIn(store_kinds()),
                         [](const auto& info) { return info.param; });

// Redis-only: what the store keeps and how it recovers.
class redis_store_test : public ::testing::Test {
  protected:
    template <class T>
    T run(asio::awaitable<T> task) {
        return keel::test::run(io, std::move(task));
    }
    asio::io_context io;
};

TEST_F(redis_store_test, keys_of_an_instance_and_its_wake_index_share_one_slot) {
    keel::test::redis_server server;
    auto conn = keel::redis::connection::create(io.get_executor(), {.url = server.url()}).value();
    redis_store st(conn, {.shards = 8});
    auto id = std::string("order/o-42/fulfillment");
    auto tag = [](const std::string& key) {
        return key.substr(key.find('{'), key.find('}') - key.find('{') + 1);
    };
    for (auto suffix : {"meta", "journal", "inbox", "timers", "keys"})
        EXPECT_EQ(tag(st.key(id, suffix)), tag(st.wake_key(st.shard_of(id))));
    EXPECT_EQ(st.key(id, "meta"),
              "keel:{" + std::to_string(st.shard_of(id)) + "}:i:" + id + ":meta");
}

// On one server the emit is one script over every shard: it reaches each subscriber in its
// own shard, whatever the id's bytes and the shard count, and remembers the emit's key.
TEST_F(redis_store_test, shards_are_from_one_to_the_slots_of_a_cluster_or_the_stores) {
    keel::test::redis_server server;
    auto conn = keel::redis::connection::create(io.get_executor(), {.url = server.url()}).value();
    EXPECT_NO_THROW(redis_store(conn, {.shards = 0}));
    EXPECT_THROW(redis_store(conn, {.shards = max_shards + 1}), std::invalid_argument);
    redis_store most(conn, {.shards = max_shards});
    EXPECT_EQ(most.wake_key(max_shards - 1), "keel:{16383}:wake");
    EXPECT_EQ(most.key("a", "meta"), "keel:{" + std::to_string(most.shard_of("a")) + "}:i:a:meta");
}

TEST_F(redis_store_test, a_fan_out_finds_every_subscriber_in_its_shard) {
    keel::test::redis_server server;
    auto conn = keel::redis::connection::create(io.get_executor(), {.url = server.url()}).value();
    std::vector<std::string> ids;
    for (int i = 0; i < 256; ++i)
        ids.push_back(std::string(1, static_cast<char>(i)) + "-" + std::to_string(i));
    for (int i = 0; i < 40; ++i) ids.push_back("order/o-" + std::string(i * 7, 'x') + "/flow");
    ids.push_back(
        "\xc3\xbc"
        "ber/\xff\xfe");  // split: a hex escape takes every hex digit
    for (std::size_t shards : {1, 2, 7, 16, 64}) {
        redis_store st(conn, {.prefix = "s" + std::to_string(shards), .shards = shards});
        run(st.open());
        for (const auto& id : ids) {
            start_request req{id, "def", {}, "w1", t0, ttl};
            req.subscriptions = {"/sig"};
            ASSERT_TRUE(run(st.start(std::move(req))).created) << id;
        }
        fan_out_request emit;
        emit.subscriptions = {"/sig"};
        emit.signal = inbox_entry{0, "k-1", "/sig", nlohmann::json(1), t0};
        auto first = run(st.fan_out(emit));
        EXPECT_EQ(first.reached, ids.size()) << shards << " shards";
        EXPECT_FALSE(first.duplicate);
        std::set<std::string> delivered;
        for (const auto& [id, d] : first.delivered) delivered.insert(id);
        EXPECT_EQ(delivered, std::set<std::string>(ids.begin(), ids.end())) << shards << " shards";
        auto again = run(st.fan_out(emit));
        EXPECT_TRUE(again.duplicate);
        EXPECT_EQ(again.reached, ids.size());
        EXPECT_TRUE(again.delivered.empty());
        EXPECT_EQ(run(st.load(ids.back(), false))->inbox.size(), 1u);
    }
}

TEST_F(redis_store_test, survives_script_flush_and_a_restart_with_aof) {
    keel::test::redis_server server({.appendonly = true, .appendfsync = "always"});
    auto conn = keel::redis::connection::create(io.get_executor(), {.url = server.url()}).value();
    redis_store st(conn);
    run(st.open());
    auto lease = run(st.start({"i", "def", {}, "w1", t0, ttl})).lease;
    run([&]() -> asio::awaitable<void> { co_await conn.exec("SCRIPT", "FLUSH"); }());
    commit_request c;
    c.instance = "i";
    c.lease = lease;
    c.entries = {entry(0, "step", 1)};
    ASSERT_TRUE(run(st.commit(c)));  // NOSCRIPT recovered
    server.restart();
    auto snap = run(st.load("i", true));  // reconnects; the acknowledged step survived
    ASSERT_TRUE(snap);
    ASSERT_EQ(snap->journal.size(), 1u);
    EXPECT_EQ(snap->journal[0].name, "step");
}

TEST_F(redis_store_test, unreachable_redis_throws_store_unavailable) {
    keel::test::redis_server server;
    auto conn = keel::redis::connection::create(
                    io.get_executor(),
                    {.url = "unix://" + server.dir() + "/absent.sock", .request_timeout = 100ms})
                    .value();
    redis_store st(conn);
    EXPECT_THROW(run(st.open()), store_unavailable);
    EXPECT_THROW(run(st.load("i", true)), store_unavailable);
}

TEST_F(redis_store_test, finished_instances_expire_after_the_retention) {
    keel::test::redis_server server;
    auto conn = keel::redis::connection::create(io.get_executor(), {.url = server.url()}).value();
    redis_store st(conn, {.retention = 60s});
    run(st.open());
    auto lease = run(st.start({"i", "def", {}, "w1", t0, ttl})).lease;
    commit_request done;
    done.instance = "i";
    done.lease = lease;
    done.status = instance_status::completed;
    done.result = nlohmann::json(1);
    ASSERT_TRUE(run(st.commit(done)));
    auto pttl = std::stoll(server.cli({"PTTL", st.key("i", "meta")}));
    EXPECT_GT(pttl, 50'000);
    EXPECT_LE(pttl, 60'000);
    EXPECT_EQ(server.cli({"PTTL", st.key("i", "journal")}), "-2");  // empty journal: no key
}

}  // namespace
