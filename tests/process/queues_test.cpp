// Queues (engine::enqueue): instances created at once and queued until admitted, the
// queue's concurrency, partition concurrency and rate, priorities within a partition,
// partitions taking turns, deduplication, cancelling a queued instance, the checks that give
// back slots whose leave was lost, and bad declarations refused by name. On the memory, Redis
// and cluster stores, in virtual time.

#include <gtest/gtest.h>

#include <algorithm>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <keel/process/forwarding_store.hpp>
#include <keel/process/queue.hpp>
#include <set>

#include "harness.hpp"

namespace keel::process {
namespace {

using namespace std::chrono_literals;
using test::harness;

const queue pair_queue{.name = "pairs", .concurrency = 2};
const queue one_queue{.name = "one", .concurrency = 1};
const queue per_tenant{.name = "tenants", .partition_concurrency = 1};
const queue paced{.name = "paced", .rate = 2, .per = 1s};

// The order handlers began in (a step: replays do not add to it).
struct board {
    std::vector<std::string> began;
};
struct board_deps {
    board b;
    template <class T>
    T& get() {
        return b;
    }
};

// Begins, then waits until told it is done.
durable<void> do_job(context& ctx, std::string n, board& b) {
    // Named before the co_await: g++ 12 destroys a temporary with a non-trivial destructor
    // (this lambda's copy of n) twice in a co_await's full-expression.
    auto note = [&b, n] {
        b.began.push_back(n);
        return 0;
    };
    co_await ctx.run("begin", note);
    co_await ctx.wait<nlohmann::json>("/job/" + n + "/done");
}
inline constexpr auto job = define<do_job>("/job/:n");

durable<void> do_quick(context& ctx, std::string n, board& b) {
    // Named before the co_await: g++ 12 destroys a temporary with a non-trivial destructor
    // (this lambda's copy of n) twice in a co_await's full-expression.
    auto note = [&b, n] {
        b.began.push_back(n);
        return 0;
    };
    co_await ctx.run("begin", note);
}
inline constexpr auto quick = define<do_quick>("/quick/:n");

// Starts two children on the one-at-a-time queue and joins both.
durable<int> do_batch(context& ctx, std::string n) {
    child_options on_queue{.on_queue = &one_queue, .partition = n};
    auto a = co_await ctx.start(on_queue, quick, n + "-a");
    auto b = co_await ctx.start(on_queue, quick, n + "-b");
    co_await ctx.join(a);
    co_await ctx.join(b);
    co_return 2;
}
inline constexpr auto batch = define<do_batch>("/batch/:n");

struct queues_test : ::testing::TestWithParam<std::size_t> {
    harness h{{.max_hot = GetParam()}};
    board_deps deps;
    void SetUp() override {
        h.eng->add(job, deps);
        h.eng->add(quick, deps);
        h.eng->add(batch);
        for (const auto* q : {&pair_queue, &one_queue, &per_tenant, &paced}) h.eng->add_queue(*q);
    }
    std::string enqueue(const queue& q, const std::string& n, enqueue_options o = {}) {
        return h.sync(h.eng->enqueue(q, std::move(o), job, n)).id();
    }
    void finish(const std::string& n) {
        h.sync(h.eng->deliver("job/" + n, "/job/" + n + "/done", nlohmann::json::object()));
        h.settle();
    }
    bool queued(const std::string& id) { return waits_for_admission(h.snapshot(id)); }
    std::set<std::string> listed(index_status s) {
        list_query q;
        q.status = s;
        q.definition = "/job/:n";
        std::set<std::string> ids;
        for (const auto& i : h.sync(h.store.list(q)).instances) ids.insert(i.id);
        return ids;
    }
    std::uint64_t count(index_status s) {
        return h.sync(h.store.counts())["/job/:n"][static_cast<std::size_t>(s)];
    }
    queue_state state(const queue& q) { return *h.sync(h.eng->describe_queue(q.name, 100)); }
    // A live worker of an earlier build (store `level`), seen by the engine's next heartbeat.
    void announce_older(const std::string& name, std::uint32_t level) {
        auto now = h.clock.now();
        h.sync(h.store.announce(worker_record{name, {}, now, now + 1h, level}));
        h.advance(5s);
    }
    std::vector<std::string> began() const { return deps.b.began; }
};

TEST_P(queues_test, a_queue_admits_up_to_its_concurrency_and_the_next_as_one_ends) {
    for (int i = 0; i < 5; ++i) enqueue(pair_queue, std::to_string(i));
    h.settle();
    EXPECT_EQ(began(), (std::vector<std::string>{"0", "1"}));
    for (const char* id : {"job/2", "job/3", "job/4"}) {
        EXPECT_TRUE(queued(id)) << id;
        EXPECT_EQ(h.status(id), instance_status::suspended) << id;
    }
    EXPECT_FALSE(queued("job/0"));
    auto s = state(pair_queue);
    EXPECT_EQ(s.waiting, 3u);
    EXPECT_EQ(s.admitted, 2u);

    finish("0");
    EXPECT_EQ(h.status("job/0"), instance_status::completed);
    EXPECT_EQ(began(), (std::vector<std::string>{"0", "1", "2"}));
    for (const char* n : {"1", "2", "3", "4"}) finish(n);
    EXPECT_EQ(began(), (std::vector<std::string>{"0", "1", "2", "3", "4"}));
    s = state(pair_queue);
    EXPECT_EQ(s.waiting, 0u);
    EXPECT_EQ(s.admitted, 0u) << "every slot given back";
    // The journal says when it was admitted: the marker, the admission, then the handler.
    auto journal = h.snapshot("job/4").journal;
    ASSERT_GE(journal.size(), 3u);
    EXPECT_EQ(queue_of(journal), "pairs");
    EXPECT_EQ(journal[1].kind, op_kind::signal);
    EXPECT_EQ(journal[2].name, "begin");
}

// Operators see a queued instance as queued in the listing and its counts (admin API, CLI,
// console, metrics), not as suspended, until it is admitted or cancelled.
TEST_P(queues_test, the_listing_counts_queued_instances_apart_until_they_are_admitted) {
    for (int i = 0; i < 4; ++i) enqueue(pair_queue, std::to_string(i));
    h.settle();
    EXPECT_EQ(listed(index_status::queued), (std::set<std::string>{"job/2", "job/3"}));
    EXPECT_EQ(listed(index_status::suspended), (std::set<std::string>{"job/0", "job/1"}));
    EXPECT_EQ(count(index_status::queued), 2u);
    EXPECT_EQ(index_status_of(h.snapshot("job/2")), index_status::queued);

    finish("0");  // job/2 is admitted and waits for its own signal: suspended
    EXPECT_TRUE(h.sync(h.eng->cancel("job/3")).has_value());
    h.settle();
    EXPECT_TRUE(listed(index_status::queued).empty());
    EXPECT_EQ(count(index_status::queued), 0u);
    EXPECT_EQ(listed(index_status::suspended), (std::set<std::string>{"job/1", "job/2"}));
    EXPECT_EQ(count(index_status::cancelled), 1u);
    EXPECT_EQ(count(index_status::completed), 1u);
}

// Enqueued while a worker of a build that would leave it listed as queued once it runs
// (store level 1) is alive, an instance is listed as suspended, as such a build lists it;
// its own view still says queued.
TEST_P(queues_test, a_queued_instance_is_listed_as_suspended_beside_a_level_one_worker) {
    announce_older("older", 1);
    enqueue(one_queue, "runs");
    enqueue(one_queue, "waits");
    h.settle();
    EXPECT_TRUE(listed(index_status::queued).empty());
    EXPECT_EQ(listed(index_status::suspended), (std::set<std::string>{"job/runs", "job/waits"}));
    EXPECT_EQ(index_status_of(h.snapshot("job/waits")), index_status::queued);
    finish("runs");
    finish("waits");
    EXPECT_EQ(count(index_status::completed), 2u);
    EXPECT_EQ(count(index_status::suspended), 0u);
}

// A worker of a Keel build before queues (store level 0) would run a queued instance
// unqueued: while one is alive, an enqueue is refused as unavailable (503) naming it, and a
// parent's child on a queue waits to be started. Both go on once it has left.
TEST_P(queues_test, nothing_is_queued_while_a_worker_of_a_build_before_queues_is_alive) {
    announce_older("old", 0);
    try {
        enqueue(pair_queue, "0");
        ADD_FAILURE() << "enqueued beside a level-0 worker";
    } catch (const keel::unavailable_error& e) {
        EXPECT_NE(std::string(e.what()).find("worker old"), std::string::npos) << e.what();
    }
    EXPECT_FALSE(h.sync(h.store.load("job/0", false)));
    h.sync(h.eng->start(batch, std::string("b")));
    h.advance(30s);
    EXPECT_FALSE(h.sync(h.store.load("quick/b-a", false)));

    h.sync(h.store.withdraw("old"));
    h.advance(5s);
    h.advance(5s);
    EXPECT_EQ(h.status("batch/b"), instance_status::completed);
    enqueue(pair_queue, "0");
    h.settle();
    EXPECT_EQ(began(), (std::vector<std::string>{"b-a", "b-b", "0"}));
}

TEST_P(queues_test, the_lowest_priority_goes_first_then_the_oldest) {
    enqueue(one_queue, "first");
    enqueue(one_queue, "late", {.priority = 5});
    enqueue(one_queue, "urgent", {.priority = -3});
    enqueue(one_queue, "plain-a");
    enqueue(one_queue, "plain-b");
    h.settle();
    for (const char* n : {"first", "urgent", "plain-a", "plain-b"}) finish(n);
    EXPECT_EQ(began(), (std::vector<std::string>{"first", "urgent", "plain-a", "plain-b", "late"}));
}

TEST_P(queues_test, partitions_take_turns_and_each_has_its_own_concurrency) {
    enqueue(per_tenant, "a1", {.partition = "acme"});
    enqueue(per_tenant, "a2", {.partition = "acme"});
    enqueue(per_tenant, "a3", {.partition = "acme"});
    enqueue(per_tenant, "b1", {.partition = "bolt"});
    h.settle();
    EXPECT_EQ(began(), (std::vector<std::string>{"a1", "b1"}))
        << "a tenant's second waits for its first; another tenant does not";
    auto s = state(per_tenant);
    ASSERT_EQ(s.partitions.size(), 2u);
    EXPECT_EQ(s.partitions[0].name, "acme");
    EXPECT_EQ(s.partitions[0].waiting, 2u);
    EXPECT_EQ(s.partitions[0].admitted, 1u);
    EXPECT_EQ(s.partitions[1].name, "bolt");
    EXPECT_EQ(s.partitions[1].waiting, 0u);
    EXPECT_EQ(s.partitions[1].admitted, 1u);
    finish("a1");
    EXPECT_EQ(began(), (std::vector<std::string>{"a1", "b1", "a2"}));
}

TEST_P(queues_test, a_rate_admits_at_most_its_count_in_any_window) {
    for (int i = 0; i < 5; ++i) enqueue(paced, std::to_string(i));
    h.settle();
    EXPECT_EQ(began().size(), 2u);
    EXPECT_EQ(state(paced).admitted, 0u) << "a queue without concurrency holds no slots";
    h.advance(500ms);
    EXPECT_EQ(began().size(), 2u);
    h.advance(500ms);
    EXPECT_EQ(began().size(), 4u);
    h.advance(1s);
    EXPECT_EQ(began().size(), 5u);
    EXPECT_EQ(state(paced).waiting, 0u);
}

TEST_P(queues_test, one_tenant_with_a_thousand_queued_delays_another_by_one_turn) {
    // Paced at 2 a second: each admission is one turn, so the order is the turns'.
    for (int i = 0; i < 1000; ++i) enqueue(paced, "big-" + std::to_string(i), {.partition = "big"});
    for (int i = 0; i < 10; ++i)
        enqueue(paced, "small-" + std::to_string(i), {.partition = "small"});
    for (int s = 0; s < 12; ++s) h.advance(1s);
    auto order = began();
    std::vector<std::size_t> small;  // where each small one was admitted, in order
    for (std::size_t i = 0; i < order.size(); ++i)
        if (order[i].starts_with("small-")) small.push_back(i);
    ASSERT_EQ(small.size(), 10u);
    // Two big ones were admitted at their enqueue, before any small one was queued; from
    // then on each round (a second) admits one of each partition: small k in round k + 1.
    // The two of a round run concurrently, so their steps may begin in either order.
    EXPECT_EQ(order[0], "big-0");
    EXPECT_EQ(order[1], "big-1");
    for (std::size_t k = 0; k < small.size(); ++k) EXPECT_EQ(small[k] / 2, k + 1) << k;
}

TEST_P(queues_test, a_dedup_id_names_one_piece_of_work_while_it_is_queued_or_running) {
    auto first = enqueue(one_queue, "1", {.dedup = "invoice-7"});
    auto again = enqueue(one_queue, "2", {.dedup = "invoice-7"});
    EXPECT_EQ(first, "job/1");
    EXPECT_EQ(again, "job/1");
    EXPECT_FALSE(h.sync(h.store.load("job/2", false))) << "the duplicate started nothing";
    finish("1");
    EXPECT_EQ(enqueue(one_queue, "3", {.dedup = "invoice-7"}), "job/3")
        << "the id is free once its instance ended";
    // Enqueueing the same instance twice queues it once.
    enqueue(one_queue, "3");
    EXPECT_EQ(state(one_queue).admitted + state(one_queue).waiting, 1u);
}

TEST_P(queues_test, cancelling_a_queued_instance_takes_it_out_of_the_line) {
    enqueue(one_queue, "runs");
    enqueue(one_queue, "waits");
    h.settle();
    EXPECT_EQ(state(one_queue).waiting, 1u);
    EXPECT_TRUE(h.sync(h.eng->cancel("job/waits")).has_value());
    h.settle();
    EXPECT_EQ(h.status("job/waits"), instance_status::cancelled);
    EXPECT_EQ(state(one_queue).waiting, 0u);
    finish("runs");
    EXPECT_EQ(began(), (std::vector<std::string>{"runs"}));
    EXPECT_EQ(state(one_queue).admitted, 0u);
}

TEST_P(queues_test, cancelling_an_admitted_instance_gives_its_slot_to_the_next) {
    enqueue(one_queue, "a");
    enqueue(one_queue, "b");
    h.settle();
    EXPECT_TRUE(h.sync(h.eng->cancel("job/a")).has_value());
    h.settle();
    EXPECT_EQ(began(), (std::vector<std::string>{"a", "b"}));
}

TEST_P(queues_test, a_slot_whose_leave_was_lost_comes_back_at_its_check) {
    // An entry whose instance ended without leaving (its worker died in between), and one
    // whose instance never started (its worker died after the enqueue).
    h.sync(h.eng->start(quick, std::string("done")));
    h.settle();
    ASSERT_EQ(h.status("quick/done"), instance_status::completed);
    queue_entry ended{"quick/done", {}, h.clock.now()};
    h.sync(h.store.enqueue(one_queue, ended, 30s));
    h.advance(61s);  // an idle admission loop looks again every minute
    EXPECT_EQ(state(one_queue).admitted, 0u) << "told, it said it ended: its slot is back";

    queue_entry never{"job/never", {}, h.clock.now()};
    h.sync(h.store.enqueue(one_queue, never, 30s));
    enqueue(one_queue, "next");
    h.advance(1s);
    EXPECT_EQ(state(one_queue).admitted, 1u) << "held while it may still start";
    EXPECT_TRUE(queued("job/next"));
    for (int i = 0; i < 20; ++i) h.advance(5s);  // checked every 30 s; dropped after 60
    EXPECT_FALSE(queued("job/next")) << "the entry that never started was dropped";
    EXPECT_EQ(began(), (std::vector<std::string>{"done", "next"}));
}

// The checks read an instance admitted at its enqueue, which never waits for its admission:
// they tell it nothing, so no admission signal is left in its inbox.
TEST_P(queues_test, the_checks_leave_no_signal_with_an_instance_admitted_at_its_enqueue) {
    enqueue(pair_queue, "at-once");
    enqueue(one_queue, "first");
    enqueue(one_queue, "second");  // admitted by a round, told with a signal, once
    h.advance(1s);
    finish("first");
    for (int i = 0; i < 14; ++i) h.advance(5s);  // two checks of each
    EXPECT_EQ(state(pair_queue).admitted, 1u);
    for (const auto* id : {"job/at-once", "job/second"}) {
        auto snap = h.sync(h.store.load(id, true));
        ASSERT_TRUE(snap);
        EXPECT_EQ(snap->status, instance_status::suspended) << id;
        EXPECT_TRUE(snap->inbox.empty()) << id << ": " << snap->inbox.front().path;
    }
    finish("at-once");
    finish("second");
    for (int i = 0; i < 14; ++i) h.advance(5s);
    EXPECT_EQ(state(pair_queue).admitted, 0u);
    EXPECT_EQ(state(one_queue).admitted, 0u);
}

TEST_P(queues_test, queued_instances_survive_a_restart_of_the_worker) {
    enqueue(one_queue, "a");
    enqueue(one_queue, "b");
    h.settle();
    h.eng.reset();
    h.settle();
    h.eng.emplace(h.io.get_executor(), h.store, h.clock,
                  engine_options{.worker = "w2", .max_hot = GetParam(), .seed = 7});
    h.eng->add(job, deps);
    h.eng->add(quick, deps);
    h.eng->add_queue(one_queue);
    h.eng->run();
    h.advance(31s);  // the first worker's lease on "a" expires
    finish("a");
    EXPECT_EQ(began(), (std::vector<std::string>{"a", "b"}));
    EXPECT_FALSE(queued("job/b"));
}

TEST_P(queues_test, a_child_started_on_a_queue_waits_its_turn_and_is_joined) {
    enqueue(one_queue, "holder");
    auto parent = h.sync(h.eng->start(batch, std::string("x")));
    h.settle();
    EXPECT_TRUE(queued("quick/x-a")) << "the holder has the queue's one slot";
    EXPECT_EQ(h.snapshot("quick/x-a").parent, "batch/x");
    finish("holder");
    EXPECT_EQ(h.status("batch/x"), instance_status::completed);
    EXPECT_EQ(began(), (std::vector<std::string>{"holder", "x-a", "x-b"}));
    EXPECT_EQ(queue_of(h.snapshot("quick/x-b").journal), "one");
    EXPECT_EQ(state(one_queue).admitted, 0u);
    (void)parent;
}

TEST_P(queues_test, unknown_queues_and_bad_options_are_refused_by_name) {
    const queue stranger{.name = "stranger"};
    auto refused = [&](const queue& q, enqueue_options o) {
        try {
            h.sync(h.eng->enqueue(q, std::move(o), job, std::string("x")));
        } catch (const std::invalid_argument& e) {
            return std::string(e.what());
        }
        return std::string("accepted");
    };
    EXPECT_NE(refused(stranger, {}).find("queue 'stranger' is not registered"), std::string::npos);
    EXPECT_NE(refused(one_queue, {.priority = 5000}).find("priority"), std::string::npos);
    EXPECT_NE(refused(one_queue, {.partition = "a b"}).find("partition"), std::string::npos);
    EXPECT_FALSE(h.sync(h.store.load("job/x", false))) << "a refused enqueue starts nothing";
    EXPECT_THROW(h.eng->add_queue(one_queue), std::invalid_argument);
    EXPECT_FALSE(h.sync(h.eng->describe_queue("stranger", 10)).has_value());
}

INSTANTIATE_TEST_SUITE_P(hot_and_evicted, queues_test, ::testing::Values(100, 0));

// ---- three workers, one of which dies ----

// Steps of the fleet's jobs in progress, counted by the steps themselves.
struct fleet_tally {
    keel::clock* clock = nullptr;
    int running = 0;
    int most = 0;
    std::map<std::string, int> runs;  // job -> attempts of its step begun
    template <class T>
    T& get() {
        return *this;
    }
};

durable<void> fleet_job(context& ctx, std::string n, fleet_tally& t) {
    auto work = [&t, n]() -> asio::awaitable<int> {
        struct in_progress {
            fleet_tally& t;
            explicit in_progress(fleet_tally& t) : t(t) { t.most = std::max(t.most, ++t.running); }
            ~in_progress() { --t.running; }
        } counted(t);
        ++t.runs[n];
        co_await t.clock->sleep_for(2s);
        co_return 1;
    };
    co_await ctx.run("work", work);
}
inline constexpr auto fleet_def = define<fleet_job>("/fleet/:n");
const queue fleet{.name = "fleet", .concurrency = 3};

// A worker's view of the store that fails every call once the worker is dead, as a worker
// killed with SIGKILL writes nothing more.
struct mortal_store final : forwarding_store {
    using forwarding_store::forwarding_store;
    bool dead = false;
    asio::awaitable<void> before_call() override {
        if (dead) throw store_unavailable("this worker is dead");
        co_return;
    }
};

// Advances 100 ms at a time, sampling after each, until the twelve fleet jobs completed or
// `ticks` passed; then checks that each completed.
template <class Sample>
void run_fleet_until_done(harness& h, int ticks, Sample sample) {
    auto all_done = [&] {
        for (int i = 0; i < 12; ++i)
            if (h.status("fleet/" + std::to_string(i)) != instance_status::completed) return false;
        return true;
    };
    for (int tick = 0; tick < ticks && !all_done(); ++tick) {
        h.advance(100ms);
        sample();
    }
    for (int i = 0; i < 12; ++i)
        EXPECT_EQ(h.status("fleet/" + std::to_string(i)), instance_status::completed) << i;
}

TEST(queue_fleet, three_workers_hold_the_limit_when_one_dies_and_every_job_completes_once) {
    harness h;
    fleet_tally tally;
    tally.clock = &h.clock;
    h.eng.reset();
    std::vector<std::unique_ptr<mortal_store>> views;
    std::vector<std::unique_ptr<engine>> workers;
    for (const char* name : {"w1", "w2", "w3"}) {
        views.push_back(std::make_unique<mortal_store>(h.store));
        workers.push_back(std::make_unique<engine>(
            h.io.get_executor(), *views.back(), h.clock,
            engine_options{.worker = name, .poll_interval = 1s, .seed = 11}));
        workers.back()->add(fleet_def, tally);
        workers.back()->add_queue(fleet);
        workers.back()->run();
    }
    for (int i = 0; i < 12; ++i)
        h.sync(
            workers[static_cast<std::size_t>(i % 3)]->enqueue(fleet, fleet_def, std::to_string(i)));
    std::uint64_t most_admitted = 0;
    auto sample = [&] {
        auto s = h.sync(h.store.describe_queue("fleet", 0));
        most_admitted = std::max(most_admitted, s.admitted);
    };
    for (int tick = 0; tick < 10; ++tick) {
        h.advance(100ms);
        sample();
    }
    views[1]->dead = true;  // w2 dies mid-flight: its leases run out, its slots stay held
    auto dead = std::move(workers[1]);
    run_fleet_until_done(h, 1200, sample);
    EXPECT_LE(tally.most, 3) << "steps in progress at once";
    EXPECT_LE(most_admitted, 3u) << "admitted at once, as the store counts";
    EXPECT_EQ(h.sync(h.store.describe_queue("fleet", 0)).admitted, 0u) << "every slot back";
    for (const auto& [job, runs] : tally.runs) EXPECT_LE(runs, 2) << job;
    for (auto& w : workers)
        if (w) w->stop();
    h.settle();
    dead.reset();
    h.settle();
}

// ---- the admitting worker runs what it admits ----

// Another worker's take that comes for an admitted instance the moment its admission is
// stored (the signal makes the instance due) is what a wake-up of another worker does at
// worst. Each such take is made here and what it got is recorded.
struct interloping_store final : forwarding_store {
    interloping_store(store& inner, manual_clock& clock) : forwarding_store(inner), clock_(clock) {}
    std::vector<std::string> interloper_got;  // per admission: "taken" or the error
    asio::awaitable<delivery> deliver(std::string id, inbox_entry signal) override {
        bool admission = signal.path == admission_path;
        auto d = co_await forwarding_store::deliver(id, std::move(signal));
        if (admission && d.result == delivery::outcome::stored) {
            auto got = co_await inner().take(id, "interloper", clock_.now(), 30s, {}, std::nullopt);
            interloper_got.push_back(got ? "taken" : std::string(to_string(got.error())));
        }
        co_return d;
    }

  private:
    manual_clock& clock_;
};

// One worker engine over a store view (the harness's own engine reset), running `job` on
// queue `q`: enqueue() queues jobs by name, done() ends one, each then settled.
class view_worker {
  public:
    view_worker(harness& h, store& view, const queue& q)
        : h_(h), q_(q), eng_(h.io.get_executor(), view, h.clock, engine_options{.worker = "w1"}) {
        eng_.add(job, deps_);
        eng_.add_queue(q);
        eng_.run();
    }
    ~view_worker() {
        eng_.stop();
        h_.settle();
    }
    void enqueue(std::initializer_list<const char*> names) {
        for (const char* n : names) h_.sync(eng_.enqueue(q_, job, std::string(n)));
        h_.settle();
    }
    void done(const char* n) {
        h_.sync(eng_.deliver("job/" + std::string(n), "/job/" + std::string(n) + "/done",
                             nlohmann::json::object()));
        h_.settle();
    }
    std::vector<std::string> began() const { return deps_.b.began; }

  private:
    harness& h_;
    const queue& q_;
    board_deps deps_;
    engine eng_;
};

// The worker that admits an instance takes it before telling it, so no other worker's wake-up
// takes it in between: it runs where it was admitted, where worker_concurrency counts it.
TEST(queue_admission, the_admitting_worker_holds_the_instance_before_its_admission_arrives) {
    harness h;
    h.eng.reset();
    interloping_store view(h.store, h.clock);
    view_worker worker(h, view, one_queue);
    worker.enqueue({"a", "b", "c"});
    worker.done("a");
    worker.done("b");
    EXPECT_EQ(worker.began(), (std::vector<std::string>{"a", "b", "c"}));
    EXPECT_EQ(view.interloper_got, (std::vector<std::string>{"busy", "busy"}))
        << "b and c were told after their admission; another worker's take must find them held";
}

// ---- the slots of instances that end together go back in one call ----

// Records each leave call's instances; holds the first until released.
struct gated_leave_store final : forwarding_store {
    gated_leave_store(store& inner, asio::io_context& io) : forwarding_store(inner), gate_(io) {
        gate_.expires_at(asio::steady_timer::time_point::max());
    }
    std::vector<std::vector<std::string>> calls;
    asio::awaitable<void> leave_queue(std::string queue,
                                      std::vector<std::string> instances) override {
        calls.push_back(instances);
        if (calls.size() == 1) {
            boost::system::error_code ec;
            co_await gate_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        }
        co_await forwarding_store::leave_queue(std::move(queue), std::move(instances));
    }
    using forwarding_store::leave_queue;
    void release() { gate_.cancel(); }

  private:
    asio::steady_timer gate_;
};

const queue three{.name = "three", .concurrency = 3};

TEST(queue_leaving, instances_that_end_while_a_leave_is_in_flight_leave_together_next) {
    harness h;
    h.eng.reset();
    gated_leave_store view(h.store, h.io);
    view_worker worker(h, view, three);
    worker.enqueue({"a", "b", "c", "d"});
    for (const char* n : {"a", "b", "c"}) worker.done(n);  // a's leave is held; d waits
    EXPECT_EQ(worker.began(), (std::vector<std::string>{"a", "b", "c"}));
    EXPECT_EQ(h.sync(h.store.describe_queue("three", 0)).admitted, 3u) << "no slot back yet";
    view.release();
    h.settle();
    EXPECT_EQ(worker.began(), (std::vector<std::string>{"a", "b", "c", "d"})) << "admitted";
    worker.done("d");
    ASSERT_EQ(view.calls.size(), 3u);
    EXPECT_EQ(view.calls[0], (std::vector<std::string>{"job/a"}));
    EXPECT_EQ(view.calls[1], (std::vector<std::string>{"job/b", "job/c"}))
        << "ended while a's leave was in flight: one call";
    EXPECT_EQ(view.calls[2], (std::vector<std::string>{"job/d"}));
    for (const char* id : {"job/a", "job/b", "job/c", "job/d"})
        EXPECT_EQ(h.status(id), instance_status::completed) << id;
    EXPECT_EQ(h.sync(h.store.describe_queue("three", 0)).admitted, 0u) << "every slot back";
}

// ---- three workers, each taking in at most two ----

const queue two_each{.name = "two-each", .worker_concurrency = 2};

// Every job is enqueued by w1: w1 takes in two at their enqueue, and the admission rounds of
// all three hand out the rest, two a worker at a time. Each worker's steps in progress are
// counted by the steps themselves (each worker has its own tally).
TEST(queue_fleet, each_worker_runs_at_most_its_worker_concurrency_and_the_others_take_the_rest) {
    harness h;
    h.eng.reset();
    std::vector<std::unique_ptr<fleet_tally>> tallies;
    std::vector<std::unique_ptr<engine>> workers;
    for (const char* name : {"w1", "w2", "w3"}) {
        tallies.push_back(std::make_unique<fleet_tally>());
        tallies.back()->clock = &h.clock;
        workers.push_back(std::make_unique<engine>(
            h.io.get_executor(), h.store, h.clock,
            engine_options{.worker = name, .poll_interval = 1s, .seed = 13}));
        workers.back()->add(fleet_def, *tallies.back());
        workers.back()->add_queue(two_each);
        workers.back()->run();
    }
    for (int i = 0; i < 12; ++i)
        h.sync(workers[0]->enqueue(two_each, fleet_def, std::to_string(i)));
    int most_in_all = 0;
    run_fleet_until_done(h, 600, [&] {
        int running = 0;
        for (const auto& t : tallies) running += t->running;
        most_in_all = std::max(most_in_all, running);
    });
    for (std::size_t w = 0; w < tallies.size(); ++w) {
        EXPECT_LE(tallies[w]->most, 2) << "worker w" << w + 1 << "'s steps in progress at once";
        EXPECT_GE(tallies[w]->runs.size(), 1u) << "worker w" << w + 1 << " ran none";
    }
    EXPECT_GT(most_in_all, 2) << "the limit is each worker's, not the queue's";
    EXPECT_EQ(h.sync(h.store.describe_queue("two-each", 0)).admitted, 0u) << "every slot back";
    for (auto& w : workers) w->stop();
    h.settle();
}

// ---- three workers, one rate ----

struct begin_log {
    keel::clock* clock = nullptr;
    std::vector<time_point> began;
    template <class T>
    T& get() {
        return *this;
    }
};

durable<void> paced_job(context& ctx, std::string, begin_log& log) {
    auto note = [&log] {
        log.began.push_back(log.clock->now());
        return 0;
    };
    co_await ctx.run("begin", note);
}
inline constexpr auto paced_def = define<paced_job>("/paced/:n");
const queue fifty{.name = "fifty", .rate = 50, .per = 1s};

// Three workers each enqueue 700 and each admits: for 30 seconds the queue lets 50 a second
// in, never more in any window of a second, and falls short of the rate by less than 5%.
TEST(queue_fleet, three_workers_admitting_hold_a_rate_of_fifty_a_second_for_thirty_seconds) {
    harness h;
    begin_log log;
    log.clock = &h.clock;
    h.eng.reset();
    std::vector<std::unique_ptr<engine>> workers;
    for (const char* name : {"w1", "w2", "w3"}) {
        workers.push_back(std::make_unique<engine>(h.io.get_executor(), h.store, h.clock,
                                                   engine_options{.worker = name, .seed = 5}));
        workers.back()->add(paced_def, log);
        workers.back()->add_queue(fifty);
        workers.back()->run();
    }
    auto start = h.clock.now();
    for (int i = 0; i < 2100; ++i)
        h.sync(
            workers[static_cast<std::size_t>(i % 3)]->enqueue(fifty, paced_def, std::to_string(i)));
    while (h.clock.now() - start < 30s) h.advance(50ms);
    auto began = log.began;
    std::sort(began.begin(), began.end());
    std::size_t in_time = 0;
    for (auto t : began) in_time += t - start < 30s;
    EXPECT_GE(in_time, 1425u) << "within 5% of 50 a second for 30 seconds";
    EXPECT_LE(in_time, 1500u);
    for (std::size_t i = 0; i + 50 < began.size(); ++i)
        ASSERT_GE(began[i + 50] - began[i], 1s) << "51 began within a second, from " << i;
    for (auto& w : workers) w->stop();
    h.settle();
}

TEST(queue_check, bad_declarations_are_refused_naming_the_field) {
    auto refused = [](queue q) {
        try {
            check(q);
        } catch (const std::invalid_argument& e) {
            return std::string(e.what());
        }
        return std::string("accepted");
    };
    EXPECT_EQ(refused({.name = "plain"}), "accepted");
    EXPECT_NE(refused({.name = ""}).find("name"), std::string::npos);
    EXPECT_NE(refused({.name = "a{b}"}).find("name"), std::string::npos);
    EXPECT_NE(refused({.name = "fast", .rate = 1, .per = 0s}).find("per"), std::string::npos);
    EXPECT_NE(refused({.name = "odd", .concurrency = 1, .partition_concurrency = 2})
                  .find("partition_concurrency"),
              std::string::npos);
    EXPECT_NE(refused({.name = "odd", .concurrency = 1, .worker_concurrency = 2})
                  .find("worker_concurrency"),
              std::string::npos);
    EXPECT_EQ(refused({.name = "each", .worker_concurrency = 2}), "accepted");
}

}  // namespace
}  // namespace keel::process
