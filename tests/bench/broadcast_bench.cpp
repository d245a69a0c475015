// A broadcast against single deliveries, on one Redis, in one run (docs/benchmarks.md,
// "A broadcast: one emit waking 10,000 instances"):
//
//   A (broadcast): N instances started and suspended in `ctx.wait(signals.go)`, the signal
//     /promo/go that binds no entity, so that every instance subscribes to it. Then ONE
//     `signals.go.emit(value)` wakes them all; each returns the value it received (no step
//     after the wait: a waiter that does work after the wake-up would do the same work in
//     B). Every handle's `wait()` is called before the window opens (a `wait()` that begins
//     while its instance is suspended asks the store first, which B's, called while their
//     instances run, never do). Timed from the emit's call until every `wait()` returned.
//   B (single deliveries): N instances started and suspended in `ctx.wait(billing.paid)`,
//     /account/:account/paid, bound to the instance's own entity (ref<account>), so that an
//     emit to one account wakes exactly one instance. Then N emits through the same API
//     (`billing.paid.emit(ref, i)`), issued concurrently (N coroutines, each emitting and
//     then awaiting its instance's `wait()`). Timed from the first emit until every handle's
//     `wait()` has returned.
//
// Both: one engine part on one thread (one io_context), the system clock, the Redis store on
// the bench's own redis-server over one connection. Each workload gets an empty database
// (FLUSHALL), a fresh engine, store and signal groups (a group keeps the first engine
// attached to it), with max_hot above N so every woken instance is in memory in both.
// Starting the N instances (concurrently) and their suspension are outside the window: the
// bench waits until Redis is quiet (fewer than 10 commands in 100 ms) before it reads the
// counters. After the last `wait()` it waits for quiet again (the instances' final commits),
// then reads them again: Redis commands (those run inside scripts included, INFO's own left
// out), calls by command, Redis CPU (INFO cpu) and this process's CPU (getrusage) from just
// before the first emit to then (less this process's CPU in those INFO reads, which run
// redis-cli). Every instance's value is checked: A's all equal the
// emitted value, B's each its own; any other answer, or an emit that reached another count
// than N (A) or 1 (B), fails the run. A and B alternate for R rounds; each figure is per
// woken instance, and A/B is the median and range of the per-round ratios.
//
//   keel_broadcast_bench [--broadcast N] [--rounds R] [--profile 1] [--cluster 1]
//
// --cluster 1 runs both on a Redis Cluster of 3 primaries without replicas (keel::test::
// redis_cluster, loopback TCP, no persistence) instead of the one redis-server; Redis's
// counters, CPU and memory are then the sums over the primaries. Each workload also reports
// Redis's memory per waiting instance: used_memory once its N instances are suspended, less
// used_memory of the empty store.
//
// --profile 1 adds one pass of each workload with SLOWLOG at threshold 0 and prints the
// script calls per woken instance by script (SHA prefix and key count) with Redis's time in
// them, which INFO does not separate. SLOWLOG slows every call: only counts and proportions.

#include <sys/resource.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <keel/framework/clock.hpp>
#include <keel/framework/concurrency.hpp>
#include <keel/framework/log.hpp>
#include <keel/process/engine.hpp>
#include <keel/process/redis_store.hpp>
#include <keel/signals/signal.hpp>
#include <keel/test/redis_cluster.hpp>
#include <keel/test/redis_server.hpp>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "redis_backend.hpp"
#include "redis_counts.hpp"
#include "rounds.hpp"

namespace asio = boost::asio;
namespace redis = keel::redis;
using namespace keel::process;
using keel::bench::by_round;
using keel::bench::column;
using keel::bench::median_and_range;
using keel::bench::percentile;
using keel::bench::print_table;
using keel::bench::ratios;
using keel::bench::read_counts;
using keel::bench::redis_counts;
using steady = std::chrono::steady_clock;

namespace {

struct options {
    int n = 10'000;
    int rounds = 5;
    bool profile = false;
    bool cluster = false;
};

options parse(int argc, char** argv) {
    options o;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string flag = argv[i];
        int value = std::stoi(argv[i + 1]);
        if (flag == "--broadcast")
            o.n = std::max(1, value);
        else if (flag == "--rounds")
            o.rounds = std::max(1, value);
        else if (flag == "--profile")
            o.profile = value != 0;
        else if (flag == "--cluster")
            o.cluster = value != 0;
        else
            throw std::invalid_argument("unknown flag " + flag);
    }
    if (o.profile && o.cluster)
        throw std::invalid_argument("--profile reads one server's SLOWLOG: not with --cluster");
    return o;
}

// ---- the processes ----

// A: one signal every waiting instance subscribes to (it binds no entity).
struct promo_signals : keel::signals::signal_group {
    keel::signals::signal<int> go{this, "/promo/go"};
};

durable<int> wait_for_promo(context& ctx, std::string, promo_signals& signals) {
    co_return co_await ctx.wait(signals.go);
}
inline constexpr auto promo_waiter = define<wait_for_promo>("/promo/:n");

// B: one signal per account; an instance binds its own account, so an emit wakes one.
struct account {
    static constexpr std::string_view model_name = "account";
};

struct billing : keel::signals::signal_group {
    keel::signals::signal<int, account> paid{this, "/account/:account/paid"};
};

durable<int> wait_for_payment(context& ctx, keel::ref<account>, billing& signals) {
    co_return co_await ctx.wait(signals.paid);
}
inline constexpr auto payment_waiter = define<wait_for_payment>("/account/:account/wait");

// Fresh groups for each engine: a group keeps the first emitter attached to it.
struct dependencies {
    promo_signals promo;
    billing pay;
    template <class T>
    T& get() {
        if constexpr (std::is_same_v<T, promo_signals>)
            return promo;
        else
            return pay;
    }
};

std::string account_name(int i) {
    return "acct-" + std::to_string(i);
}

// ---- one workload ----

struct sample {
    double seconds = 0;        // the window: first emit to the last wait() returned
    double answer_ms = 0;      // A: the emit's own answer (its call to its return)
    double commands = 0;       // per woken instance: Redis commands, inside scripts included
    double requests = 0;       // per woken instance: requests the client sent
    double writes = 0;         // per woken instance: the client's socket writes
    double redis_cpu_us = 0;   // per woken instance
    double client_cpu_us = 0;  // per woken instance
    double memory_bytes = 0;   // Redis's used_memory per waiting instance, before the window
    std::map<std::string, double> calls;  // per woken instance, by command
};

double cpu_seconds() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    auto s = [](const timeval& t) { return double(t.tv_sec) + 1e-6 * double(t.tv_usec); };
    return s(u.ru_utime) + s(u.ru_stime);
}

struct bench_env {
    explicit bench_env(bool cluster) : redis(cluster) {}

    keel::bench::redis_backend redis;
    asio::io_context io{1};
    keel::system_clock clock;
    redis::connection conn =
        redis::connection::create(io.get_executor(), {.url = redis.url()}).value();
    // Every workload's store, groups and engine; stopped ones are kept until io is done.
    std::vector<std::unique_ptr<redis_store>> stores;
    std::vector<std::unique_ptr<dependencies>> deps;
    std::vector<std::unique_ptr<engine>> engines;
    // This process's CPU in the INFO reads (redis-cli) of quiet(), left out of the client's.
    double probe_cpu = 0;
    // --profile: SLOWLOG is reset when the window opens, so the starts are left out.
    bool profiling = false;

    redis_counts counts() {
        double c = cpu_seconds();
        auto r = redis.counts();
        probe_cpu += cpu_seconds() - c;
        return r;
    }

    engine& fresh_engine(int n) {
        redis.on_every_node({"FLUSHALL"});
        stores.push_back(std::make_unique<redis_store>(conn));
        deps.push_back(std::make_unique<dependencies>());
        engine_options opts{.worker = "bench", .max_hot = static_cast<std::size_t>(n) + 1000};
        engines.push_back(std::make_unique<engine>(io.get_executor(), *stores.back(), clock, opts));
        auto& eng = *engines.back();
        eng.add(promo_waiter, *deps.back());
        eng.add(payment_waiter, *deps.back());
        eng.run();
        return eng;
    }
};

asio::awaitable<void> pause(std::chrono::milliseconds d) {
    asio::steady_timer t(co_await asio::this_coro::executor, d);
    co_await t.async_wait(asio::use_awaitable);
}

// Until Redis has processed fewer than 10 commands (its INFO left out) in 100 ms.
asio::awaitable<void> quiet(bench_env& env) {
    auto last = env.counts();
    for (int i = 0; i < 600; ++i) {
        co_await pause(std::chrono::milliseconds(100));
        auto now = env.counts();
        long info = now.calls["info"] - last.calls["info"];
        if (now.total - last.total - info < 10) co_return;
        last = now;
    }
    throw std::runtime_error("Redis never went quiet");
}

// Starts n instances concurrently (n coroutines) and returns their handles.
template <class Start>
asio::awaitable<std::vector<handle<int>>> start_all(int n, Start start) {
    keel::concurrency::nursery_options wide{.max_children = static_cast<std::size_t>(n) + 1};
    std::vector<handle<int>> handles(static_cast<std::size_t>(n));
    co_await keel::concurrency::open_nursery(
        [&](keel::concurrency::nursery& group) -> asio::awaitable<void> {
            for (int i = 0; i < n; ++i)
                group.spawn([&handles, &start, i]() -> asio::awaitable<void> {
                    handles[static_cast<std::size_t>(i)] = co_await start(i);
                });
            co_return;
        },
        wide);
    co_return handles;
}

double seconds_since(steady::time_point t0) {
    return std::chrono::duration<double>(steady::now() - t0).count();
}

// A: one emit wakes all n; every instance must return `value`.
asio::awaitable<sample> broadcast(bench_env& env, int n, int value) {
    auto& eng = env.fresh_engine(n);
    co_await env.stores.back()->open();  // before the engine's calls
    auto& deps = *env.deps.back();
    co_await quiet(env);
    auto empty = env.counts();
    auto handles =
        co_await start_all(n, [&](int i) { return eng.start(promo_waiter, std::to_string(i)); });
    // Every handle's wait() is registered before the window, as B's are while their instances
    // run: a wait() that begins while its instance is suspended, or after it ended, asks the
    // store first (one load each), which is the bench's reading, not the broadcast's cost.
    sample s;
    redis_counts before;
    keel::redis::connection_stats sent;
    double cpu = 0, probes = 0;
    auto t0 = steady::now();
    auto check = [&](const handle<int>& h, const keel::expected<int, failure>& done) {
        if (!done) throw std::runtime_error("A: instance failed: " + done.error().message);
        if (*done != value)
            throw std::runtime_error("A: instance " + h.id() + " returned " +
                                     std::to_string(*done) + ", not " + std::to_string(value));
    };
    keel::concurrency::nursery_options wide{.max_children = static_cast<std::size_t>(n) + 2};
    co_await keel::concurrency::open_nursery(
        [&](keel::concurrency::nursery& group) -> asio::awaitable<void> {
            for (auto& h : handles)
                group.spawn([&h, &check]() -> asio::awaitable<void> {
                    auto done = co_await h.wait();
                    check(h, done);
                });
            group.spawn([&]() -> asio::awaitable<void> {
                co_await quiet(env);  // the waits' first looks at the store are over
                if (env.profiling) env.redis.on_every_node({"SLOWLOG", "RESET"});
                before = env.counts();
                sent = env.conn.stats();
                cpu = cpu_seconds();
                probes = env.probe_cpu;
                t0 = steady::now();
                auto r = co_await deps.promo.go.emit(value);
                s.answer_ms = 1e3 * seconds_since(t0);
                if (r.reached != static_cast<std::size_t>(n))
                    throw std::runtime_error("A: the emit reached " + std::to_string(r.reached) +
                                             ", not " + std::to_string(n));
            });
            co_return;
        },
        wide);
    s.seconds = seconds_since(t0);
    co_await quiet(env);
    s.client_cpu_us = 1e6 * (cpu_seconds() - cpu - (env.probe_cpu - probes)) / n;
    auto after = env.counts();
    auto now_sent = env.conn.stats();
    eng.stop();
    long info = after.calls["info"] - before.calls["info"];
    s.commands = double(after.total - before.total - info) / n;
    s.requests = double(now_sent.requests - sent.requests) / n;
    s.writes = double(now_sent.writes - sent.writes) / n;
    s.redis_cpu_us = 1e6 * (after.cpu_seconds - before.cpu_seconds) / n;
    s.memory_bytes = double(before.used_memory - empty.used_memory) / n;
    for (const auto& [name, calls] : after.calls)
        if (name != "info")
            if (long d = calls - before.calls[name]; d != 0) s.calls[name] = double(d) / n;
    co_return s;
}

// B: n emits, each to one instance's own account, concurrently; instance i must return i.
asio::awaitable<sample> singles(bench_env& env, int n) {
    auto& eng = env.fresh_engine(n);
    co_await env.stores.back()->open();  // before the engine's calls
    auto& deps = *env.deps.back();
    co_await quiet(env);
    auto empty = env.counts();
    auto handles = co_await start_all(
        n, [&](int i) { return eng.start(payment_waiter, keel::ref<account>(account_name(i))); });
    co_await quiet(env);
    if (env.profiling) env.redis.on_every_node({"SLOWLOG", "RESET"});
    auto before = env.counts();
    auto sent = env.conn.stats();
    double cpu = cpu_seconds();
    double probes = env.probe_cpu;
    sample s;
    keel::concurrency::nursery_options wide{.max_children = static_cast<std::size_t>(n) + 1};
    auto t0 = steady::now();
    co_await keel::concurrency::open_nursery(
        [&](keel::concurrency::nursery& group) -> asio::awaitable<void> {
            for (int i = 0; i < n; ++i)
                group.spawn([&deps, &handles, i]() -> asio::awaitable<void> {
                    keel::ref<account> who(account_name(i));
                    auto r = co_await deps.pay.paid.emit(who, i);
                    if (r.reached != 1)
                        throw std::runtime_error("B: the emit to " + account_name(i) + " reached " +
                                                 std::to_string(r.reached));
                    auto& h = handles[static_cast<std::size_t>(i)];
                    auto done = co_await h.wait();
                    if (!done)
                        throw std::runtime_error("B: instance failed: " + done.error().message);
                    if (*done != i)
                        throw std::runtime_error("B: instance " + h.id() + " returned " +
                                                 std::to_string(*done) + ", not " +
                                                 std::to_string(i));
                });
            co_return;
        },
        wide);
    s.seconds = seconds_since(t0);
    co_await quiet(env);
    s.client_cpu_us = 1e6 * (cpu_seconds() - cpu - (env.probe_cpu - probes)) / n;
    auto after = env.counts();
    auto now_sent = env.conn.stats();
    eng.stop();
    long info = after.calls["info"] - before.calls["info"];
    s.commands = double(after.total - before.total - info) / n;
    s.requests = double(now_sent.requests - sent.requests) / n;
    s.writes = double(now_sent.writes - sent.writes) / n;
    s.redis_cpu_us = 1e6 * (after.cpu_seconds - before.cpu_seconds) / n;
    s.memory_bytes = double(before.used_memory - empty.used_memory) / n;
    for (const auto& [name, calls] : after.calls)
        if (name != "info")
            if (long d = calls - before.calls[name]; d != 0) s.calls[name] = double(d) / n;
    co_return s;
}

// ---- --profile: script calls by script ----

struct script_calls {
    long calls = 0;
    long usec = 0;
    std::string first_key;
};

void start_profile(bench_env& env) {
    env.redis.on_every_node({"CONFIG", "SET", "slowlog-log-slower-than", "0"});
    env.redis.on_every_node({"CONFIG", "SET", "slowlog-max-len", "1000000"});
    env.redis.on_every_node({"SLOWLOG", "RESET"});
}

asio::awaitable<std::map<std::string, script_calls>> read_profile(bench_env& env) {
    std::map<std::string, script_calls> per;
    auto r = co_await env.conn.exec("SLOWLOG", "GET", "-1");
    for (const auto& e : r.value().elements()) {
        auto args = e.elements()[3].elements();
        std::string name(args[0].text().value_or(""));
        if (name != "EVALSHA" || args.size() < 4) continue;
        name = std::string(args[1].text().value_or("").substr(0, 8)) + " keys " +
               std::string(args[2].text().value_or(""));
        auto& s = per[name];
        ++s.calls;
        s.usec += e.elements()[2].integer().value_or(0);
        s.first_key = std::string(args[3].text().value_or(""));
    }
    env.redis.on_every_node({"CONFIG", "SET", "slowlog-log-slower-than", "10000"});
    env.redis.on_every_node({"SLOWLOG", "RESET"});
    co_return per;
}

void print_profile(const char* label, const std::map<std::string, script_calls>& per, int n) {
    for (const auto& [name, s] : per)
        std::printf(
            "  %s: %-20s %7ld calls, %7.3f per instance, %8.1f us each, %6.1f us per "
            "instance; a first key: %s\n",
            label, name.c_str(), s.calls, double(s.calls) / n, double(s.usec) / double(s.calls),
            double(s.usec) / n, s.first_key.c_str());
}

// ---- the tables ----

// Three columns for one figure: A, B and A/B.
template <class F>
void add(std::vector<column>& t, const char* a_title, const char* b_title, const char* ratio,
         const char* format, const std::vector<sample>& a, const std::vector<sample>& b, F figure) {
    t.push_back({a_title, format, by_round(a, figure)});
    t.push_back({b_title, format, by_round(b, figure)});
    t.push_back({ratio, " %.2f |", ratios(a, b, figure), true});
}

void print_calls(const std::vector<sample>& a, const std::vector<sample>& b) {
    std::map<std::string, std::pair<double, double>> mean;
    for (const auto& s : a)
        for (const auto& [name, v] : s.calls) mean[name].first += v / double(a.size());
    for (const auto& s : b)
        for (const auto& [name, v] : s.calls) mean[name].second += v / double(b.size());
    std::vector<std::pair<std::string, std::pair<double, double>>> rows(mean.begin(), mean.end());
    std::sort(rows.begin(), rows.end(),
              [](const auto& x, const auto& y) { return x.second.second > y.second.second; });
    std::printf(
        "\n| command (INFO commandstats), calls per woken instance | A: broadcast | B: single "
        "emits |\n|---|---:|---:|\n");
    for (const auto& [name, v] : rows)
        std::printf("| %s | %.3f | %.3f |\n", name.c_str(), v.first, v.second);
}

int run(const options& o) {
    bench_env env(o.cluster);
    std::vector<sample> a, b;
    std::map<std::string, script_calls> profile_a, profile_b;
    asio::co_spawn(
        env.io,
        [&]() -> asio::awaitable<void> {
            for (int round = 0; round < o.rounds; ++round) {
                a.push_back(co_await broadcast(env, o.n, 1000 + round));
                b.push_back(co_await singles(env, o.n));
                std::fprintf(stderr, "round %d: A %.0f ms, B %.0f ms\n", round + 1,
                             a.back().seconds * 1e3, b.back().seconds * 1e3);
            }
            if (o.profile) {
                env.profiling = true;
                start_profile(env);
                co_await broadcast(env, o.n, 999);
                profile_a = co_await read_profile(env);
                start_profile(env);
                co_await singles(env, o.n);
                profile_b = co_await read_profile(env);
            }
            env.conn.close();
        },
        [](std::exception_ptr e) {
            if (e) std::rethrow_exception(e);
        });
    env.io.run();

    std::printf(
        "instances %d, rounds %d, on %s\n"
        "A: %d instances wait for /promo/go; one emit wakes them all\n"
        "B: %d instances each wait for /account/<own>/paid; %d emits, concurrently, one each\n"
        "every instance completed with the right value in both\n\n",
        o.n, o.rounds,
        o.cluster ? "a Redis Cluster of 3 primaries (no replicas)" : "one redis-server", o.n, o.n,
        o.n);
    auto total_cpu = [](const sample& x) { return x.redis_cpu_us + x.client_cpu_us; };
    std::vector<column> cost;
    add(cost, "A Redis+client CPU us", "B Redis+client CPU us", "A/B CPU", " %.1f |", a, b,
        total_cpu);
    add(cost, "A Redis CPU us", "B Redis CPU us", "A/B Redis CPU", " %.1f |", a, b,
        [](const sample& x) { return x.redis_cpu_us; });
    add(cost, "A client CPU us", "B client CPU us", "A/B client CPU", " %.1f |", a, b,
        [](const sample& x) { return x.client_cpu_us; });
    std::printf("per woken instance:\n\n");
    print_table(cost);
    std::vector<column> work;
    add(work, "A cmds", "B cmds", "A/B cmds", " %.2f |", a, b,
        [](const sample& x) { return x.commands; });
    add(work, "A wall us", "B wall us", "A/B wall", " %.1f |", a, b,
        [](const sample& x) { return 1e6 * x.seconds; });
    add(work, "A Redis bytes waiting", "B Redis bytes waiting", "A/B bytes", " %.0f |", a, b,
        [](const sample& x) { return x.memory_bytes; });
    std::printf("\n");
    // The wall column is per instance: the window divided by N.
    for (auto& c : work)
        if (!c.ratio && std::string(c.title).find("wall") != std::string::npos)
            for (auto& v : c.values) v /= o.n;
    print_table(work);
    std::vector<column> more{
        {"A window ms", " %.0f |", by_round(a, [](const sample& x) { return 1e3 * x.seconds; })},
        {"A emit answer ms", " %.0f |", by_round(a, [](const sample& x) { return x.answer_ms; })},
        {"B window ms", " %.0f |", by_round(b, [](const sample& x) { return 1e3 * x.seconds; })},
        {"A requests", " %.3f |", by_round(a, [](const sample& x) { return x.requests; })},
        {"B requests", " %.3f |", by_round(b, [](const sample& x) { return x.requests; })},
        {"A writes", " %.3f |", by_round(a, [](const sample& x) { return x.writes; })},
        {"B writes", " %.3f |", by_round(b, [](const sample& x) { return x.writes; })},
    };
    std::printf("\n");
    print_table(more);
    print_calls(a, b);
    if (o.profile) {
        std::printf(
            "\nscript calls per woken instance (SLOWLOG, one more pass of each, the "
            "window only):\n");
        print_profile("A", profile_a, o.n);
        print_profile("B", profile_b, o.n);
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    keel::log::configure({.min_level = keel::log::level::warn});
    try {
        return run(parse(argc, argv));
    } catch (const std::exception& e) {
        std::cerr << "keel_broadcast_bench: " << e.what() << "\n";
        return 1;
    }
}
