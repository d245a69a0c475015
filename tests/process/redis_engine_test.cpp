// Engines on the Redis store, on a real redis-server and the system clock: several workers
// sharing one Redis, a worker that dies mid-run, Redis restarting, the script cache
// flushed, and many timers.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <functional>
#include <future>
#include <iterator>
#include <keel/framework/errors.hpp>
#include <keel/process/engine.hpp>
#include <keel/process/redis_store.hpp>
#include <keel/test/redis_server.hpp>
#include <keel/test/run.hpp>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

namespace keel::process {
namespace {

using namespace std::chrono_literals;
namespace redis = keel::redis;

// What the flows do to the outside world, shared by every worker.
struct effects {
    std::atomic<int> steps{0};
    std::atomic<int> slow_started{0};
    template <class T>
    T& get() {
        return *this;
    }
};

asio::awaitable<void> pause(std::chrono::milliseconds d) {
    asio::steady_timer t(co_await asio::this_coro::executor, d);
    co_await t.async_wait(asio::use_awaitable);
}

// Three steps with a durable sleep between them: instances suspend and any worker may
// resume them.
durable<int> three_steps(context& ctx, std::string, effects& fx) {
    int total = 0;
    for (int i = 0; i < 3; ++i) {
        total += co_await ctx.run("step-" + std::to_string(i), [&] {
            ++fx.steps;
            return 1;
        });
        co_await ctx.sleep(20ms);
    }
    co_return total;
}
inline constexpr auto stepping = define<three_steps>("/load/:n");

// A step that takes long enough for its worker to die in the middle of it.
durable<int> slow_step(context& ctx, std::string, effects& fx) {
    co_await ctx.run("slow", [&]() -> asio::awaitable<int> {
        ++fx.slow_started;
        co_await pause(300ms);
        co_return 1;
    });
    co_return co_await ctx.run("after", [&] {
        ++fx.steps;
        return 2;
    });
}
inline constexpr auto slow = define<slow_step>("/slow/:n");

// Collects five signals in order.
durable<std::vector<int>> collect(context& ctx, std::string n, effects&) {
    std::vector<int> got;
    for (int i = 0; i < 5; ++i) got.push_back(co_await ctx.wait<int>("/collect/" + n + "/item"));
    co_return got;
}
inline constexpr auto collecting = define<collect>("/collect/:n");

durable<int> nap(context& ctx, std::string, int ms, effects& fx) {
    co_await ctx.sleep(std::chrono::milliseconds(ms));
    co_return co_await ctx.run("woke", [&] {
        ++fx.steps;
        return ms;
    });
}
inline constexpr auto napping = define<nap>("/nap/:n/:ms");

// One worker: an engine on its own thread, with its own Redis connection and store.
class worker {
  public:
    worker(std::string name, const std::string& url, effects& fx, engine_options opts = {})
        : conn_(redis::connection::create(io_.get_executor(), {.url = url}).value()),
          store_(conn_, {.shards = 4, .audit_commits = true}) {
        opts.worker = std::move(name);  // no poll_interval: the Redis store's default applies
        engine_.emplace(io_.get_executor(), store_, clock_, opts);
        engine_->add(stepping, fx);
        engine_->add(slow, fx);
        engine_->add(collecting, fx);
        engine_->add(napping, fx);
        thread_ = std::jthread([this] { io_.run(); });
        call([this]() -> asio::awaitable<int> {
            co_await store_.open();
            engine_->run();
            co_return 0;
        });
    }
    ~worker() { stop(); }

    // Runs a coroutine on the worker's thread and waits for its value.
    template <class F>
    auto call(F f) -> typename decltype(f())::value_type {
        return keel::test::call_on(io_, std::move(f));
    }

    // Runs f(0) ... f(n - 1) on the worker's thread, `lanes` of them at a time (the store
    // pipelines what they send), and waits for every value, in order.
    template <class F>
    auto call_each(std::size_t n, std::size_t lanes, F f)
        -> std::vector<typename decltype(f(0))::value_type> {
        using T = typename decltype(f(0))::value_type;
        return call([&]() -> asio::awaitable<std::vector<T>> {
            std::vector<std::optional<T>> got(n);
            std::exception_ptr failed;
            lanes = std::max<std::size_t>(lanes, 1);
            std::size_t running = lanes;
            asio::steady_timer all_done(io_, asio::steady_timer::time_point::max());
            for (std::size_t lane = 0; lane < lanes; ++lane)
                asio::co_spawn(
                    io_,
                    [&, lane]() -> asio::awaitable<void> {
                        for (std::size_t i = lane; i < n; i += lanes) got[i] = co_await f(i);
                    },
                    [&](std::exception_ptr e) {
                        if (e) failed = e;
                        if (--running == 0) all_done.cancel();
                    });
            if (running > 0)  // (lanes that never wait finish before this line)
                co_await all_done.async_wait(asio::as_tuple(asio::use_awaitable));
            if (failed) std::rethrow_exception(failed);
            std::vector<T> values;
            for (auto& v : got) values.push_back(std::move(*v));
            co_return values;
        });
    }

    engine& eng() { return *engine_; }
    redis_store& store() { return store_; }

    // Stops at once: nothing more is written, leases are not released (as on a crash).
    void stop() {
        if (stopped_.exchange(true)) return;
        call([this]() -> asio::awaitable<int> {
            engine_->stop();
            conn_.close();
            co_return 0;
        });
        guard_.reset();
        io_.stop();
        thread_.join();
    }

  private:
    asio::io_context io_;
    asio::executor_work_guard<asio::io_context::executor_type> guard_{io_.get_executor()};
    system_clock clock_;
    redis::connection conn_;
    redis_store store_;
    std::optional<engine> engine_;
    std::jthread thread_;
    std::atomic<bool> stopped_{false};
};

// Reads instance states from Redis on the test thread.
class observer {
  public:
    explicit observer(const std::string& url)
        : conn_(redis::connection::create(io_.get_executor(), {.url = url}).value()),
          store_(conn_, {.shards = 4}) {
        run(store_.open());
    }

    std::optional<instance_snapshot> load(const std::string& id) {
        return run(store_.load(id, true));
    }
    std::vector<std::string> commit_log(const std::string& id) {
        return run(store_.commit_log(id));
    }

    // Waits until every instance is final (no wake-index entry is left: final instances
    // are the only ones without one); returns how many completed.
    std::size_t wait_final(const std::vector<std::string>& ids, std::chrono::seconds limit) {
        auto deadline = std::chrono::steady_clock::now() + limit;
        while (pending() > 0 && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(20ms);
        std::size_t completed = 0;
        for (const auto& id : ids) {
            auto s = run(store_.load(id, false));
            if (s && s->status == instance_status::completed) ++completed;
        }
        return completed;
    }

    std::int64_t pending() {
        return run([this]() -> asio::awaitable<std::int64_t> {
            std::int64_t n = 0;
            for (std::size_t shard = 0; shard < 4; ++shard) {
                auto r = co_await conn_.exec("ZCARD", store_.wake_key(shard));
                n += r ? r->integer().value_or(0) : 1;
            }
            co_return n;
        }());
    }

    template <class T>
    T run(asio::awaitable<T> task) {
        return keel::test::run(io_, std::move(task));
    }

  private:
    asio::io_context io_;
    redis::connection conn_;
    redis_store store_;
};

// Every commit of an instance came from one worker per epoch.
void expect_one_writer_per_epoch(observer& obs, const std::string& id) {
    std::map<std::string, std::string> writer;  // epoch -> worker
    for (const auto& line : obs.commit_log(id)) {
        auto space = line.find(' ');
        auto epoch = line.substr(0, space), who = line.substr(space + 1);
        auto [it, fresh] = writer.emplace(epoch, who);
        EXPECT_EQ(it->second, who) << id << ": epoch " << epoch << " written by two workers";
    }
}

TEST(redis_engine, two_workers_run_a_thousand_instances_with_one_writer_per_epoch) {
    keel::test::redis_server server;
    effects fx;
    worker a("a", server.url(), fx), b("b", server.url(), fx);
    std::vector<std::string> ids;
    for (int i = 0; i < 1000; ++i) {
        auto& w = i % 2 ? a : b;
        auto n = std::to_string(i);
        ids.push_back(w.call([&]() -> asio::awaitable<std::string> {
            auto h = co_await w.eng().start(stepping, n);
            co_return h.id();
        }));
    }
    observer obs(server.url());
    EXPECT_EQ(obs.wait_final(ids, 60s), ids.size());
    EXPECT_EQ(fx.steps.load(), 3000);  // no crash: every step ran exactly once
    std::set<std::string> writers;
    for (const auto& id : ids) {
        auto s = obs.load(id);
        ASSERT_TRUE(s);
        EXPECT_EQ(s->result, nlohmann::json(3)) << id;
        expect_one_writer_per_epoch(obs, id);
        for (const auto& line : obs.commit_log(id)) writers.insert(line.substr(line.find(' ') + 1));
    }
    EXPECT_EQ(writers, (std::set<std::string>{"a", "b"}));
}

TEST(redis_engine, a_worker_that_dies_mid_step_is_taken_over_after_its_lease) {
    keel::test::redis_server server;
    effects fx;
    engine_options fast{.lease_ttl = 500ms};
    std::vector<std::string> ids;
    // b runs from the start with default options: it has nothing due, so only the store's
    // poll interval makes it look again and find a's instances once a's leases expire.
    std::optional<worker> b;
    b.emplace("b", server.url(), fx, fast);
    {
        worker a("a", server.url(), fx, fast);
        for (int i = 0; i < 20; ++i) {
            auto n = std::to_string(i);
            ids.push_back(a.call([&]() -> asio::awaitable<std::string> {
                co_return (co_await a.eng().start(slow, n)).id();
            }));
        }
        while (fx.slow_started < 20) std::this_thread::sleep_for(5ms);
        a.stop();  // in the middle of every instance's slow step
    }
    observer obs(server.url());
    EXPECT_EQ(obs.wait_final(ids, 30s), ids.size());
    EXPECT_EQ(fx.steps.load(), 20);  // "after" ran once per instance
    for (const auto& id : ids) {
        auto s = obs.load(id);
        EXPECT_EQ(s->result, nlohmann::json(2));
        ASSERT_EQ(s->journal.size(), 2u) << id;  // "slow" recorded once despite running twice
        expect_one_writer_per_epoch(obs, id);
    }
    EXPECT_GE(fx.slow_started.load(), 40);  // at least once, and again after the takeover
}

TEST(redis_engine, no_acknowledged_signal_is_lost_across_a_redis_restart) {
    keel::test::redis_server server({.appendonly = true, .appendfsync = "always"});
    effects fx;
    worker a("a", server.url(), fx);
    std::vector<std::string> ids;
    for (int i = 0; i < 10; ++i) {
        auto n = std::to_string(i);
        ids.push_back(a.call([&]() -> asio::awaitable<std::string> {
            co_return (co_await a.eng().start(collecting, n)).id();
        }));
    }
    // Like a webhook sender: retry each signal with the same idempotency key until acknowledged.
    auto emit = [&](int instance, int item) {
        auto id = ids[static_cast<std::size_t>(instance)];
        auto path = "/collect/" + std::to_string(instance) + "/item";
        auto key = "k-" + std::to_string(instance) + "-" + std::to_string(item);
        for (int attempt = 0; attempt < 200; ++attempt) {
            try {
                auto d = a.call([&]() -> asio::awaitable<delivery> {
                    co_return co_await a.eng().deliver(id, path, item, key);
                });
                if (d.result == delivery::outcome::stored ||
                    d.result == delivery::outcome::duplicate)
                    return;
            } catch (const std::exception&) {
            }
            std::this_thread::sleep_for(20ms);
        }
        ADD_FAILURE() << "signal " << key << " never acknowledged";
    };
    for (int item = 0; item < 5; ++item) {
        for (int i = 0; i < 10; ++i) emit(i, item);
        if (item == 2) server.restart();
    }
    observer obs(server.url());
    EXPECT_EQ(obs.wait_final(ids, 30s), ids.size());
    for (const auto& id : ids)
        EXPECT_EQ(obs.load(id)->result, nlohmann::json({0, 1, 2, 3, 4})) << id;
}

TEST(redis_engine, script_flush_mid_run_is_recovered) {
    keel::test::redis_server server;
    effects fx;
    worker a("a", server.url(), fx);
    std::vector<std::string> ids;
    for (int i = 0; i < 200; ++i) {
        auto n = std::to_string(i);
        ids.push_back(a.call([&]() -> asio::awaitable<std::string> {
            co_return (co_await a.eng().start(stepping, n)).id();
        }));
        if (i == 100) server.cli({"SCRIPT", "FLUSH"});
    }
    server.cli({"SCRIPT", "FLUSH"});
    observer obs(server.url());
    EXPECT_EQ(obs.wait_final(ids, 30s), ids.size());
    EXPECT_EQ(fx.steps.load(), 600);
}

TEST(redis_engine, ten_thousand_timers_due_within_a_second_fire_once) {
    keel::test::redis_server server;
    effects fx;
    worker a("a", server.url(), fx), b("b", server.url(), fx);
    // Each worker starts its half a hundred at a time, so the timers come due together,
    // within a second or two of each other, not spread over the time it takes to start them
    // one after another.
    auto start_half = [&](worker& w, int parity) {
        return w.call_each(5'000, 100, [&w, parity](std::size_t k) -> asio::awaitable<std::string> {
            int i = static_cast<int>(2 * k) + parity;
            int ms = (i * 7919) % 1000;
            co_return (co_await w.eng().start(napping, std::to_string(i), ms)).id();
        });
    };
    auto from_b = std::async(std::launch::async, start_half, std::ref(b), 0);
    auto ids = start_half(a, 1);
    std::ranges::move(from_b.get(), std::back_inserter(ids));
    observer obs(server.url());
    EXPECT_EQ(obs.wait_final(ids, 120s), ids.size());
    EXPECT_EQ(fx.steps.load(), 10'000);  // each timer fired once, each step ran once
    for (std::size_t i = 0; i < ids.size(); i += 97) {
        auto s = obs.load(ids[i]);
        ASSERT_EQ(s->journal.size(), 2u);
        EXPECT_EQ(s->journal[0].kind, op_kind::timer);
    }
}

TEST(redis_engine, a_timer_due_while_no_worker_runs_fires_when_one_starts) {
    keel::test::redis_server server;
    effects fx;
    std::string id;
    {
        worker a("a", server.url(), fx);
        id = a.call([&]() -> asio::awaitable<std::string> {
            co_return (co_await a.eng().start(napping, std::string("late"), 200)).id();
        });
    }  // no worker runs while the timer comes due
    std::this_thread::sleep_for(400ms);
    observer obs(server.url());
    EXPECT_EQ(obs.load(id)->status, instance_status::suspended);
    EXPECT_EQ(fx.steps.load(), 0);
    worker b("b", server.url(), fx);
    EXPECT_EQ(obs.wait_final({id}, 10s), 1u);
    EXPECT_EQ(obs.load(id)->result, nlohmann::json(200));
}

// A store that comes back empty (docs/architecture.md): Redis loses its data under a running
// worker. Idempotent starts would begin every flow again, so the worker starts nothing and
// claims nothing until the store is its own again or an operator confirms it.
namespace {
bool eventually(const std::function<bool()>& done, std::chrono::milliseconds limit = 5s) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (!done()) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(20ms);
    }
    return true;
}
std::string start_nap(worker& w, const std::string& n) {
    return w.call([&]() -> asio::awaitable<std::string> {
        co_return (co_await w.eng().start(napping, n, 10)).id();
    });
}
}  // namespace

TEST(store_identity, a_store_that_comes_back_empty_starts_nothing_until_an_operator_confirms) {
    keel::test::redis_server server;
    effects fx;
    worker a("a", server.url(), fx, {.heartbeat = 100ms});
    start_nap(a, "before");
    ASSERT_TRUE(eventually([&] { return fx.steps.load() == 1; }));
    EXPECT_FALSE(a.eng().store_in_question());

    server.cli({"FLUSHALL"});  // Redis back without its data
    ASSERT_TRUE(eventually([&] { return a.eng().store_in_question().has_value(); }));
    EXPECT_NE(a.eng().store_in_question()->find("identity record is gone"), std::string::npos);
    EXPECT_THROW(start_nap(a, "during"), keel::unavailable_error);

    // A worker started now sees a store of its own making: the running one still refuses it.
    worker b("b", server.url(), fx, {.heartbeat = 100ms});
    ASSERT_TRUE(eventually([&] {
        auto why = a.eng().store_in_question();
        return why && why->find("is another one") != std::string::npos;
    }));
    EXPECT_THROW(start_nap(a, "during"), keel::unavailable_error);

    auto id = a.call(
        [&]() -> asio::awaitable<std::string> { co_return co_await a.eng().confirm_store(); });
    EXPECT_FALSE(a.eng().store_in_question());
    start_nap(a, "after");
    ASSERT_TRUE(eventually([&] { return fx.steps.load() == 2; }));
    EXPECT_FALSE(b.eng().store_in_question());
    auto record = server.cli({"HGET", "keel:identity", "confirmed"});
    EXPECT_NE(record.find(id), std::string::npos);
}

TEST(store_identity, a_worker_that_requires_the_store_refuses_an_empty_one_until_confirmed) {
    keel::test::redis_server server;
    effects fx;
    worker a("a", server.url(), fx, {.heartbeat = 100ms, .store_must_exist = true});
    ASSERT_TRUE(eventually([&] { return a.eng().store_in_question().has_value(); }));
    EXPECT_NE(a.eng().store_in_question()->find("store_must_exist"), std::string::npos);
    EXPECT_THROW(start_nap(a, "refused"), keel::unavailable_error);
    a.call([&]() -> asio::awaitable<std::string> { co_return co_await a.eng().confirm_store(); });
    start_nap(a, "confirmed");
    EXPECT_TRUE(eventually([&] { return fx.steps.load() == 1; }));
    // A restart finds the record it required.
    a.stop();
    worker again("again", server.url(), fx, {.heartbeat = 100ms, .store_must_exist = true});
    std::this_thread::sleep_for(400ms);
    EXPECT_FALSE(again.eng().store_in_question());
}

TEST(store_identity, a_redis_restarted_with_its_data_is_the_same_store) {
    keel::test::redis_server server({.appendonly = true, .appendfsync = "always"});
    effects fx;
    worker a("a", server.url(), fx, {.heartbeat = 100ms});
    start_nap(a, "before");
    ASSERT_TRUE(eventually([&] { return fx.steps.load() == 1; }));
    server.restart();
    std::this_thread::sleep_for(1s);
    EXPECT_FALSE(a.eng().store_in_question());
    start_nap(a, "after");
    EXPECT_TRUE(eventually([&] { return fx.steps.load() == 2; }));
}

// Durability on failover (connection_options::wait_replicas): a transition is acknowledged
// only once a replica has it. Without a replica, start() reports the store unavailable (the
// instance is on the primary only, its outcome unknown to the caller); once a replica is
// attached, the caller's retry finds the instance, creates nothing twice, and returns.
TEST(redis_store_replication, a_transition_is_acknowledged_only_once_a_replica_has_it) {
    keel::test::redis_server primary({.tcp = true});
    asio::io_context io;
    auto conn =
        redis::connection::create(
            io.get_executor(), {.url = primary.url(), .wait_replicas = 1, .replica_timeout = 100ms})
            .value();
    redis_store store(conn);
    keel::test::run(io, store.open());
    auto now = std::chrono::system_clock::now();
    start_request req{"order-1", "/def", nlohmann::json::array(), "w1", now, 30s};
    try {
        keel::test::run(io, store.start(req));
        ADD_FAILURE() << "start() was acknowledged with no replica";
    } catch (const store_unavailable& e) {
        EXPECT_NE(std::string(e.what()).find("0 of 1 replicas"), std::string::npos) << e.what();
    }

    auto replica = keel::test::start_replica(primary);
    auto again = keel::test::run(io, store.start(req));
    EXPECT_FALSE(again.created);  // the first start is on the primary
    EXPECT_EQ(replica->cli({"EXISTS", store.key("order-1", "meta")}), "1");
    conn.close();
}

}  // namespace
}  // namespace keel::process
