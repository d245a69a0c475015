// Starts through a queue against direct starts, on one Redis, in one run:
//
//   A (queued): N instances enqueued concurrently (`engine.enqueue`) on a queue whose
//     concurrency (N + 1) never binds; each does one `ctx.run` step and ends. Timed from the
//     first enqueue to the last completion (`wait()` on each handle).
//   B (direct): the same N instances started concurrently with `engine.start`.
//
// Each workload gets an empty database and a fresh engine; A and B alternate for R rounds.
// Reported per start: the client's CPU, redis-server's CPU, both together, and Redis
// commands processed; then A/B of the CPU per start (median and range over the rounds).
//
//   Q (queued and waiting): M instances enqueued on a queue with concurrency 1 whose slot a
//     first instance holds: Redis memory per queued instance (INFO used_memory before and
//     after, the instance's own keys included) and the queue's keys alone (MEMORY USAGE).
//     Then the engine is replaced by one whose queue has no limit: the time until the queue
//     has admitted all M, and the admissions per second.
//
//   keel_queue_bench [--starts N] [--rounds R] [--queued M]

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <keel/framework/clock.hpp>
#include <keel/framework/concurrency.hpp>
#include <keel/framework/log.hpp>
#include <keel/process/engine.hpp>
#include <keel/process/queue.hpp>
#include <keel/process/redis_store.hpp>
#include <keel/test/redis_server.hpp>
#include <memory>
#include <string>
#include <vector>

#include "redis_counts.hpp"
#include "rounds.hpp"

namespace asio = boost::asio;
namespace redis = keel::redis;
using namespace keel::process;
using keel::bench::median_and_range;
using keel::bench::read_counts;
using steady = std::chrono::steady_clock;

namespace {

struct options {
    int starts = 2000;
    int rounds = 5;
    int queued = 20000;
};

options parse(int argc, char** argv) {
    options o;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string flag = argv[i];
        int value = std::stoi(argv[i + 1]);
        if (flag == "--starts")
            o.starts = std::max(1, value);
        else if (flag == "--rounds")
            o.rounds = std::max(1, value);
        else if (flag == "--queued")
            o.queued = std::max(0, value);
        else
            throw std::invalid_argument("unknown flag " + flag);
    }
    return o;
}

durable<int> work_flow(context& ctx, std::string n) {
    co_return co_await ctx.run("work", [&n] { return static_cast<int>(n.size()); });
}
inline constexpr auto work_def = define<work_flow>("/bench/work/:n");

durable<void> holder_flow(context& ctx, std::string) {
    co_await ctx.wait("/never");
}
inline constexpr auto holder_def = define<holder_flow>("/bench/holder/:n");

const queue wide{.name = "wide", .concurrency = 1'000'000};
const queue narrow{.name = "narrow", .concurrency = 1};
const queue lifted{.name = "narrow"};  // the same queue, its limit lifted

struct bench_env {
    keel::test::redis_server server;
    asio::io_context io{1};
    keel::system_clock clock;
    redis::connection conn =
        redis::connection::create(io.get_executor(), {.url = server.url()}).value();
    std::vector<std::unique_ptr<redis_store>> stores;
    std::vector<std::unique_ptr<engine>> engines;

    engine& fresh_engine(const queue& q, bool flush = true) {
        if (flush) server.cli({"FLUSHALL"});
        stores.push_back(std::make_unique<redis_store>(conn));
        engine_options opts{.worker = "bench"};
        engines.push_back(std::make_unique<engine>(io.get_executor(), *stores.back(), clock, opts));
        auto& eng = *engines.back();
        eng.add(work_def);
        eng.add(holder_def);
        eng.add_queue(q);
        eng.run();
        return eng;
    }
};

asio::awaitable<void> pause(std::chrono::milliseconds d) {
    asio::steady_timer t(co_await asio::this_coro::executor, d);
    co_await t.async_wait(asio::use_awaitable);
}

struct sample {
    double seconds = 0;
    double client_cpu_us = 0;  // per start
    double redis_cpu_us = 0;   // per start
    double commands = 0;       // per start
};

// n starts, all at once, each awaited to its end; queued or direct.
asio::awaitable<sample> run_starts(bench_env& env, int n, bool queued) {
    auto& eng = env.fresh_engine(wide);
    co_await env.stores.back()->open();  // before the engine's calls
    co_await pause(std::chrono::milliseconds(200));
    auto before = read_counts(env.server);
    auto cpu = std::clock();
    auto t0 = steady::now();
    keel::concurrency::nursery_options all{.max_children = static_cast<std::size_t>(n) + 1};
    co_await keel::concurrency::open_nursery(
        [&](keel::concurrency::nursery& group) -> asio::awaitable<void> {
            for (int i = 0; i < n; ++i)
                group.spawn([&eng, i, queued]() -> asio::awaitable<void> {
                    auto name = std::to_string(i);
                    handle<int> h;
                    if (queued) {
                        enqueue_options as;
                        h = co_await eng.enqueue(wide, as, work_def, name);
                    } else {
                        h = co_await eng.start(work_def, name);
                    }
                    auto r = co_await h.wait();
                    if (!r) throw std::runtime_error("instance failed: " + r.error().message);
                });
            co_return;
        },
        all);
    sample s;
    s.seconds = std::chrono::duration<double>(steady::now() - t0).count();
    s.client_cpu_us = 1e6 * double(std::clock() - cpu) / CLOCKS_PER_SEC / n;
    co_await pause(std::chrono::milliseconds(300));  // the queue's leaves, after the ends
    auto after = read_counts(env.server);
    eng.stop();
    s.redis_cpu_us = 1e6 * (after.cpu_seconds - before.cpu_seconds) / n;
    long info = after.calls["info"] - before.calls["info"];
    s.commands = double(after.total - before.total - info) / n;
    co_return s;
}

long used_memory(const keel::test::redis_server& server) {
    auto info = server.cli({"INFO", "memory"});
    auto at = info.find("used_memory:");
    return std::stol(info.substr(at + 12));
}

long queue_key_bytes(const keel::test::redis_server& server, int partitions) {
    long total = 0;
    std::vector<std::string> keys = {"entries", "dedup",  "ring", "admitted",
                                     "held",    "window", "seq"};
    for (int p = 0; p < partitions; ++p) keys.push_back("w:");
    for (const auto& k : keys) {
        auto out = server.cli({"MEMORY", "USAGE", "keel:queue:{narrow}:" + k, "SAMPLES", "0"});
        if (!out.empty() && std::isdigit(static_cast<unsigned char>(out[0])))
            total += std::stol(out);
    }
    return total;
}

asio::awaitable<void> run_queued(bench_env& env, int m) {
    auto& eng = env.fresh_engine(narrow);
    co_await env.stores.back()->open();  // before the engine's calls
    enqueue_options as;
    co_await eng.enqueue(narrow, as, holder_def, std::string("holder"));
    co_await pause(std::chrono::milliseconds(200));
    auto before = used_memory(env.server);
    keel::concurrency::nursery_options some{.max_children = 257};
    for (int base = 0; base < m; base += 256) {
        co_await keel::concurrency::open_nursery(
            [&](keel::concurrency::nursery& group) -> asio::awaitable<void> {
                for (int i = base; i < std::min(m, base + 256); ++i)
                    group.spawn([&eng, i]() -> asio::awaitable<void> {
                        enqueue_options none;
                        co_await eng.enqueue(narrow, none, work_def, std::to_string(i));
                    });
                co_return;
            },
            some);
    }
    co_await pause(std::chrono::milliseconds(300));
    auto after = used_memory(env.server);
    auto state = co_await eng.describe_queue("narrow", 0);
    std::printf("queued: %d instances waiting (the queue says %llu)\n", m,
                static_cast<unsigned long long>(state ? state->waiting : 0));
    std::printf("  Redis memory per queued instance: %.0f bytes (INFO used_memory)\n",
                double(after - before) / m);
    std::printf("  of which the queue's keys: %.0f bytes (MEMORY USAGE)\n",
                double(queue_key_bytes(env.server, 1)) / m);
    eng.stop();
    co_await pause(std::chrono::milliseconds(100));

    // The limit lifted: a new engine whose queue of the same name has none.
    auto& opened = env.fresh_engine(lifted, false);
    co_await env.stores.back()->open();
    auto t0 = steady::now();
    for (;;) {
        auto s = co_await opened.describe_queue("narrow", 0);
        if (s && s->waiting == 0) break;
        co_await pause(std::chrono::milliseconds(20));
    }
    double seconds = std::chrono::duration<double>(steady::now() - t0).count();
    std::printf("  limit lifted: all %d admitted in %.2f s, %.0f admissions/s\n", m, seconds,
                m / seconds);
    co_await pause(std::chrono::milliseconds(500));  // the last instances end and leave
    opened.stop();
}

asio::awaitable<void> run(bench_env& env, options o) {
    std::vector<sample> queued, direct;
    for (int r = 0; r < o.rounds; ++r) {
        queued.push_back(co_await run_starts(env, o.starts, true));
        direct.push_back(co_await run_starts(env, o.starts, false));
    }
    std::printf("%d starts per round, %d rounds; per start:\n", o.starts, o.rounds);
    std::printf("%5s %30s %30s\n", "round", "queued: client us, redis us, cmds",
                "direct: client us, redis us, cmds");
    std::vector<double> cpu_ratio, wall_ratio;
    for (std::size_t r = 0; r < queued.size(); ++r) {
        auto& a = queued[r];
        auto& b = direct[r];
        std::printf("%5zu %10.1f %9.1f %9.1f %10.1f %9.1f %9.1f\n", r + 1, a.client_cpu_us,
                    a.redis_cpu_us, a.commands, b.client_cpu_us, b.redis_cpu_us, b.commands);
        cpu_ratio.push_back((a.client_cpu_us + a.redis_cpu_us) /
                            (b.client_cpu_us + b.redis_cpu_us));
        wall_ratio.push_back(a.seconds / b.seconds);
    }
    std::printf("queued/direct, CPU per start (client + Redis): %s\n",
                median_and_range(cpu_ratio).c_str());
    std::printf("queued/direct, wall time:                      %s\n",
                median_and_range(wall_ratio).c_str());
    if (o.queued > 0) co_await run_queued(env, o.queued);
    env.conn.close();
}

}  // namespace

int main(int argc, char** argv) {
    // Lifecycle lines (info) would measure the terminal, not the engine.
    keel::log::configure({.min_level = keel::log::level::warn});
    try {
        auto o = parse(argc, argv);
        bench_env env;
        std::exception_ptr failed;
        asio::co_spawn(env.io, run(env, o), [&](std::exception_ptr e) { failed = e; });
        env.io.run();
        if (failed) std::rethrow_exception(failed);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "keel_queue_bench: %s\n", e.what());
        return 1;
    }
}
