// An engine of two parts on two threads, as a service with --threads 2 runs it. Each
// instance belongs to one part, by its id, and lives on that part's thread however its
// start, signals and waits reach the engine: started from one thread, paid by an emit from
// the other, waited for from both. On the in-memory store and on a redis-server with a
// connection lane per thread.

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <future>
#include <keel/framework/clock.hpp>
#include <keel/process/context.hpp>
#include <keel/process/engine.hpp>
#include <keel/process/forwarding_store.hpp>
#include <keel/process/memory_store.hpp>
#include <keel/process/redis_store.hpp>
#include <keel/test/redis_server.hpp>
#include <keel/test/run.hpp>
#include <map>
#include <mutex>
#include <thread>

namespace keel::process {
namespace {

struct account {
    static constexpr std::string_view model_name = "account";
};

struct billing : signal_group {
    signal<int, account> paid{this, "/account/:account/paid"};
};

// The threads each instance's steps ran on.
struct step_threads {
    std::mutex mutex;
    std::map<std::string, std::vector<std::thread::id>> by_account;
    void note(const std::string& account) {
        std::lock_guard lock(mutex);
        by_account[account].push_back(std::this_thread::get_id());
    }
};

struct dependencies {
    billing signals;
    step_threads steps;
    template <class T>
    T& get() {
        if constexpr (std::is_same_v<T, billing>)
            return signals;
        else
            return steps;
    }
};

durable<int> settle(context& ctx, ref<account> who, billing& signals, step_threads& steps) {
    co_await ctx.run("open", [&] {
        steps.note(who.id());
        return 0;
    });
    int cents = co_await ctx.wait(signals.paid);
    co_return co_await ctx.run("book", [&] {
        steps.note(who.id());
        return cents;
    });
}
inline constexpr auto settling = define<settle>("/account/:account/settle");

// Two io_contexts, each run by its own thread, for the life of the test.
class two_threads {
  public:
    two_threads() {
        for (auto& io : io_) {
            guards_.emplace_back(io.get_executor());
            threads_.emplace_back([&io] { io.run(); });
        }
    }
    ~two_threads() { stop(); }
    void stop() {
        guards_.clear();
        for (auto& t : threads_)
            if (t.joinable()) t.join();
    }

    std::vector<asio::any_io_executor> executors() {
        return {io_[0].get_executor(), io_[1].get_executor()};
    }
    std::thread::id thread(std::size_t i) const { return threads_[i].get_id(); }

    // Runs a coroutine on thread `i` and waits for its value.
    template <class T>
    T call(std::size_t i, asio::awaitable<T> task) {
        return keel::test::call_on(io_[i],
                                   [t = std::move(task)]() mutable { return std::move(t); });
    }

  private:
    asio::io_context io_[2];
    std::vector<asio::executor_work_guard<asio::io_context::executor_type>> guards_;
    std::vector<std::thread> threads_;
};

constexpr int accounts = 40;

std::string account_name(int i) {
    return "acct-" + std::to_string(i);
}

// Starts every instance from thread 0, pays each from thread 1, waits for each result from
// the thread that did not pay it, and checks where the steps ran.
void run_flows(two_threads& threads, engine& eng, dependencies& deps) {
    for (int i = 0; i < accounts; ++i)
        threads.call(0, [&, i]() -> asio::awaitable<int> {
            co_await eng.start(settling, ref<account>(account_name(i)));
            co_return 0;
        }());
    for (int i = 0; i < accounts; ++i) {
        auto sent = threads.call(1, [&, i]() -> asio::awaitable<std::size_t> {
            auto r = co_await deps.signals.paid.emit(ref<account>(account_name(i)), i);
            co_return r.reached;
        }());
        EXPECT_EQ(sent, 1u) << account_name(i);
    }
    for (int i = 0; i < accounts; ++i) {
        auto id = settling.instance_id(ref<account>(account_name(i)));
        auto result = threads.call(static_cast<std::size_t>(i % 2),
                                   [&, id]() -> asio::awaitable<expected<nlohmann::json, failure>> {
                                       co_return co_await eng.wait(id);
                                   }());
        ASSERT_TRUE(result.has_value()) << id << ": " << result.error().message;
        EXPECT_EQ(*result, i);
    }
    std::size_t on_part[2] = {0, 0};
    std::lock_guard lock(deps.steps.mutex);
    for (int i = 0; i < accounts; ++i) {
        auto id = settling.instance_id(ref<account>(account_name(i)));
        auto part = shard_of(id, 2);
        ++on_part[part];
        const auto& ran = deps.steps.by_account[account_name(i)];
        ASSERT_EQ(ran.size(), 2u) << id << ": its two steps, each once";
        EXPECT_EQ(ran[0], threads.thread(part)) << id << " opened off its part's thread";
        EXPECT_EQ(ran[1], threads.thread(part)) << id << " booked off its part's thread";
    }
    EXPECT_GT(on_part[0], 0u);
    EXPECT_GT(on_part[1], 0u);
}

engine_options options() {
    engine_options o;
    o.worker = "parts";
    o.seed = 7;
    return o;
}

TEST(engine_parts, each_instance_runs_on_its_part_on_the_memory_store) {
    two_threads threads;
    memory_store store;
    system_clock clock;
    dependencies deps;
    {
        engine eng(threads.executors(), store, clock, options());
        EXPECT_EQ(eng.parts(), 2u);
        eng.add(settling, deps);
        eng.run();
        run_flows(threads, eng, deps);
        threads.call(0, [&]() -> asio::awaitable<int> {
            eng.stop();
            co_return 0;
        }());
        threads.stop();
    }
}

TEST(engine_parts, each_instance_runs_on_its_part_on_redis_with_a_lane_per_thread) {
    keel::test::redis_server server;
    two_threads threads;
    auto conn = redis::connection::create(threads.executors(),
                                          {.url = server.url(), .health_check_interval = {}})
                    .value();
    EXPECT_EQ(conn.lanes(), 2u);
    redis_store store(conn, {.shards = 4});
    threads.call(0, store.open());
    system_clock clock;
    dependencies deps;
    {
        engine eng(threads.executors(), store, clock, options());
        eng.add(settling, deps);
        eng.run();
        run_flows(threads, eng, deps);
        threads.call(0, [&]() -> asio::awaitable<int> {
            eng.stop();
            conn.close();
            co_return 0;
        }());
        threads.stop();
    }
}

// A service withdraws its worker when shutdown begins and stops the engine only after HTTP
// has drained (app/src/application.cpp), on the part's own thread. In between, the wake loop
// of part 0 must still sleep: a withdrawn worker sends no heartbeat, and a wake-up for one
// made the loop go round without ever suspending on the in-memory store (its calls complete
// at once), so the thread never ran another handler: keel-payments-sim hung on SIGTERM.
// The store counts the loop's rounds; past a bound it throws, which makes the loop back off,
// so that the case fails instead of hanging.
struct round_counting_store final : forwarding_store {
    using forwarding_store::forwarding_store;
    static constexpr int bound = 1000;
    int rounds = 0;
    asio::awaitable<std::optional<time_point>> next_due() override {
        if (++rounds >= bound) throw std::runtime_error("the wake loop does not sleep");
        return forwarding_store::next_due();
    }
};

TEST(engine_parts, a_withdrawn_worker_s_wake_loop_still_sleeps_until_the_engine_stops) {
    asio::io_context io;
    manual_clock clock;
    memory_store inner;
    round_counting_store store(inner);
    auto o = options();
    ASSERT_GT(o.heartbeat, duration::zero());
    engine eng(io.get_executor(), store, clock, o);
    eng.run();
    io.poll();
    bool withdrawn = false;
    asio::co_spawn(io, eng.withdraw(), [&](std::exception_ptr e) { withdrawn = !e; });
    io.poll();
    ASSERT_TRUE(withdrawn);

    store.rounds = 0;
    clock.advance(o.heartbeat + std::chrono::seconds(1));  // past the heartbeat it skips
    bool ran = false;
    asio::post(io, [&] { ran = true; });
    io.poll();
    EXPECT_TRUE(ran);
    EXPECT_LT(store.rounds, 10) << "the wake loop went round without sleeping";

    eng.stop();
    io.poll();
}

// A lease falls due for renewal at lease_expires - lease_ttl / 2, and the wake loop sleeps
// until then. At exactly that instant it must renew: if it only renewed past it, the loop
// woke, renewed nothing, computed the same instant and went round again; on a manual clock
// (the simulation, testing::environment) time never moved on and the thread spun for ever.
durable<int> long_step(context& ctx, std::string, manual_clock& clock) {
    co_return co_await ctx.run("slow", [&clock]() -> asio::awaitable<int> {
        co_await clock.sleep_for(std::chrono::minutes(5));
        co_return 1;
    });
}
inline constexpr auto long_stepping = define<long_step>("/long/:n");
struct clock_deps {
    manual_clock* clock;
    template <class T>
    T& get() {
        return *clock;
    }
};

TEST(engine_parts, a_lease_due_for_renewal_at_this_instant_is_renewed_without_spinning) {
    asio::io_context io;
    manual_clock clock;
    memory_store inner;
    round_counting_store store(inner);
    auto o = options();
    ASSERT_EQ(o.lease_ttl / 2 % o.heartbeat, duration::zero());  // heartbeats meet it
    engine eng(io.get_executor(), store, clock, o);
    clock_deps deps{&clock};
    eng.add(long_stepping, deps);
    eng.run();
    asio::co_spawn(io, eng.start(long_stepping, std::string("a")),
                   [](std::exception_ptr, handle<int>) {});
    io.poll();
    ASSERT_EQ(inner.load_now("long/a", false)->status, instance_status::running);

    store.rounds = 0;
    for (auto t = duration::zero(); t < o.lease_ttl / 2; t += o.heartbeat) {
        clock.advance(o.heartbeat);  // up to the renewal's very instant
        io.poll();
    }
    EXPECT_LT(store.rounds, 10) << "the wake loop went round without renewing";
    auto expires = inner.load_now("long/a", false)->lease_expires;
    EXPECT_EQ(std::chrono::duration_cast<std::chrono::milliseconds>(expires - clock.now()),
              std::chrono::duration_cast<std::chrono::milliseconds>(o.lease_ttl))
        << "not renewed at its instant";

    eng.stop();
    io.poll();
}

}  // namespace
}  // namespace keel::process
