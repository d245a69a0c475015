// Durable steps on the Redis store, each figure beside a raw baseline measured in the same
// run, in alternating rounds, each side on a fresh redis-server of the same configuration:
//
//   1. throughput: M instances each doing K `ctx.run` steps, one engine, one connection;
//      baseline: M coroutines each sending K pipelined Lua calls that make the same writes
//      (check lease and journal length, append the entry, update the instance hash).
//   2. sequential: one instance doing M * K / 4 steps; baseline: as many sequential round
//      trips of the same Lua call.
//   3. signal-to-resume latency: emit a signal to a suspended instance until its resumed
//      step is journaled (the instance completes), p50 and p99, hot (in memory) and cold
//      (evicted, resumed by replay).
//
//   keel_process_redis_bench [--instances M] [--steps K] [--rounds R] [--latency-samples N]
//                            [--profile 1]
//
// --profile 1 prints, per script, the calls and Redis time that SLOWLOG recorded.

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <keel/framework/log.hpp>
#include <keel/process/engine.hpp>
#include <keel/process/redis_store.hpp>
#include <keel/test/redis_server.hpp>
#include <keel/test/run.hpp>
#include <map>
#include <string>
#include <vector>

#include "rounds.hpp"
#include "stepping.hpp"

namespace asio = boost::asio;
namespace redis = keel::redis;
using namespace keel::process;
using steady = std::chrono::steady_clock;

namespace {

struct options {
    int instances = 200;
    int steps = 20;
    int samples = 300;
    int rounds = 5;
};

bool profile = false;  // --profile

options parse(int argc, char** argv) {
    options o;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string flag = argv[i];
        int value = std::stoi(argv[i + 1]);
        if (flag == "--instances")
            o.instances = value;
        else if (flag == "--steps")
            o.steps = value;
        else if (flag == "--rounds")
            o.rounds = std::max(1, value);
        else if (flag == "--profile")
            profile = value != 0;
        else if (flag == "--latency-samples")
            o.samples = value;
        else
            throw std::invalid_argument("unknown flag " + flag);
    }
    return o;
}

using keel::bench::median_and_range;
using keel::bench::percentile;
using keel::bench::stepping;

durable<int> waiting_flow(context& ctx, std::string) {
    co_return co_await ctx.wait<int>("/go");
}
inline constexpr auto waiting = define<waiting_flow>("/wait/:n");

// The same writes as a commit of one step, without the engine: validate lease and journal
// length, append the entry, touch the instance hash.
const redis::script raw_step(R"lua(
local m = redis.call('HMGET', KEYS[1], 'lease_worker', 'lease_epoch')
if m[1] ~= ARGV[1] or m[2] ~= ARGV[2] then return 'fenced' end
if redis.call('LLEN', KEYS[2]) ~= tonumber(ARGV[3]) then return 'conflict' end
redis.call('RPUSH', KEYS[2], ARGV[4])
redis.call('HSET', KEYS[1], 'status', 'running')
return 'ok'
)lua");

asio::awaitable<void> raw_instance(redis::connection& c, int n, int k) {
    std::vector<std::string> keys{"raw:{" + std::to_string(n) + "}:meta",
                                  "raw:{" + std::to_string(n) + "}:journal"};
    co_await c.exec("HSET", keys[0], "lease_worker", "w", "lease_epoch", 1);
    const std::string entry = R"({"seq":0,"kind":"run","name":"step","value":0})";
    for (int i = 0; i < k; ++i) {
        std::vector<std::string> args{"w", "1", std::to_string(i), entry};
        auto r = co_await c.eval(raw_step, keys, args);
        if (!r || r->text() != "ok") throw std::runtime_error("raw step failed");
    }
}

template <class F>
double timed(asio::io_context& io, F start) {
    auto t0 = steady::now();
    start();
    io.restart();
    io.run();
    return std::chrono::duration<double>(steady::now() - t0).count();
}

struct bench_env {
    keel::test::redis_server server;
    asio::io_context io{1};
    keel::system_clock clock;
    redis::connection conn =
        redis::connection::create(io.get_executor(), {.url = server.url()}).value();
};

// With --profile: every command's Redis time from SLOWLOG (threshold 0), summed per
// script (SHA prefix and key count) and printed after the run.
void start_profile(bench_env& env) {
    if (!profile) return;
    env.server.cli({"CONFIG", "SET", "slowlog-log-slower-than", "0"});
    env.server.cli({"CONFIG", "SET", "slowlog-max-len", "1000000"});
    env.server.cli({"SLOWLOG", "RESET"});
}

void print_profile(bench_env& env, const char* label) {
    if (!profile) return;
    auto c = redis::connection::create(env.io.get_executor(), {.url = env.server.url()}).value();
    std::map<std::string, std::pair<long, long>> per;  // script -> calls, microseconds
    asio::co_spawn(
        env.io,
        [&]() -> asio::awaitable<void> {
            auto r = co_await c.exec("SLOWLOG", "GET", "-1");
            for (const auto& e : r.value().elements()) {
                auto f = e.elements();
                auto args = f[3].elements();
                std::string name(args[0].text().value_or(""));
                if (args.size() > 2 && name == "EVALSHA")
                    name = std::string(args[1].text().value_or("").substr(0, 8)) + " keys " +
                           std::string(args[2].text().value_or(""));
                auto& [calls, us] = per[name];
                ++calls;
                us += f[2].integer().value_or(0);
            }
            c.close();
        },
        [](std::exception_ptr e) {
            if (e) std::rethrow_exception(e);
        });
    env.io.restart();
    env.io.run();
    for (const auto& [name, v] : per)
        std::fprintf(stderr, "%s: %-24s %6ld calls %8ld us %6.2f us/call\n", label, name.c_str(),
                     v.first, v.second, double(v.second) / double(v.first));
}

double raw_rate(bench_env& env, int instances, int k, int base) {
    env.conn.add_script(raw_step);  // loaded like the store's scripts: no NOSCRIPT round trips
    start_profile(env);
    int done = 0;
    double s = timed(env.io, [&] {
        for (int i = 0; i < instances; ++i)
            asio::co_spawn(env.io, raw_instance(env.conn, base + i, k), [&](std::exception_ptr e) {
                if (e) std::rethrow_exception(e);
                if (++done == instances) env.conn.close();
            });
    });
    auto info = env.server.cli({"INFO", "commandstats"});
    auto at = info.find("cmdstat_evalsha:");
    if (at != std::string::npos)
        std::fprintf(stderr, "raw: redis %s\n", info.substr(at, info.find('\n', at) - at).c_str());
    print_profile(env, "raw");
    return instances * double(k) / s;
}

double engine_rate(int instances, int k, int base) {
    bench_env env;
    start_profile(env);
    redis_store store(env.conn);
    keel::test::run(env.io, store.open());
    engine eng(env.io.get_executor(), store, env.clock, {.worker = "bench"});
    eng.add(stepping);
    eng.run();
    int done = 0;
    double s = timed(env.io, [&] {
        for (int i = 0; i < instances; ++i) {
            asio::co_spawn(
                env.io,
                [&, i]() -> asio::awaitable<void> {
                    auto h = co_await eng.start(stepping, std::to_string(base + i), k);
                    auto r = co_await h.wait();
                    if (!r) throw std::runtime_error("instance failed: " + r.error().message);
                    if (++done == instances) {
                        eng.stop();
                        env.conn.close();
                    }
                },
                [](std::exception_ptr e) {
                    if (e) std::rethrow_exception(e);
                });
        }
    });
    // Redis's own CPU time per script call tells whether Redis or the client is the limit.
    auto info = env.server.cli({"INFO", "commandstats"});
    auto at = info.find("cmdstat_evalsha:");
    if (at != std::string::npos)
        std::fprintf(stderr, "engine: redis %s\n",
                     info.substr(at, info.find('\n', at) - at).c_str());
    print_profile(env, "engine");
    auto st = env.conn.stats();
    std::fprintf(stderr, "engine: %d instances x %d steps: %llu redis requests, %llu writes\n",
                 instances, k, (unsigned long long)st.requests, (unsigned long long)st.writes);
    return instances * double(k) / s;
}

// Emit-to-completion latency of `samples` instances, one at a time.
std::vector<double> resume_latency(int samples, std::size_t max_hot) {
    bench_env env;
    redis_store store(env.conn);
    keel::test::run(env.io, store.open());
    engine eng(env.io.get_executor(), store, env.clock, {.worker = "bench", .max_hot = max_hot});
    eng.add(waiting);
    std::vector<double> micros;
    asio::co_spawn(
        env.io,
        [&]() -> asio::awaitable<void> {
            eng.run();
            for (int i = 0; i < samples; ++i) {
                auto h = co_await eng.start(waiting, std::to_string(i));
                auto t0 = steady::now();
                co_await eng.deliver(h.id(), "/go", i);
                auto r = co_await h.wait();
                if (!r) throw std::runtime_error("instance failed: " + r.error().message);
                micros.push_back(
                    std::chrono::duration<double, std::micro>(steady::now() - t0).count());
            }
            eng.stop();
            env.conn.close();
        },
        [](std::exception_ptr e) {
            if (e) std::rethrow_exception(e);
        });
    env.io.run();
    return micros;
}

}  // namespace

int main(int argc, char** argv) {
    // Lifecycle lines (info) would measure the terminal: a service in production logs them,
    // but the figures here compare the store's work with the raw script's.
    keel::log::configure({.min_level = keel::log::level::warn});
    try {
        auto o = parse(argc, argv);
        std::printf("instances %d, steps %d, rounds %d, latency samples %d\n\n", o.instances,
                    o.steps, o.rounds, o.samples);
        std::printf(
            "| figure (median of rounds) | keel | raw baseline | ratio: median (range) |\n"
            "|---|---:|---:|---:|\n");

        // Alternate raw and engine runs, each on a fresh redis-server; the ratio is taken
        // within each round (noise on the shared cores hits both sides of a round alike) and
        // the median over the rounds is reported, with its range.
        std::vector<double> raw, keel_rate, raw_seq, keel_seq, ratio, ratio_seq;
        const int sequential = o.instances * o.steps / 4;
        for (int round = 0; round < o.rounds; ++round) {
            int base = round * 100'000;
            {
                bench_env env;
                raw.push_back(raw_rate(env, o.instances, o.steps, base));
            }
            keel_rate.push_back(engine_rate(o.instances, o.steps, base));
            {
                bench_env env;
                raw_seq.push_back(raw_rate(env, 1, sequential, base));
            }
            keel_seq.push_back(engine_rate(1, sequential, base));
            ratio.push_back(keel_rate.back() / raw.back());
            ratio_seq.push_back(keel_seq.back() / raw_seq.back());
        }
        std::printf("| durable steps/s, %d instances x %d steps | %.0f | %.0f | %s |\n",
                    o.instances, o.steps, percentile(keel_rate, 0.5), percentile(raw, 0.5),
                    median_and_range(ratio).c_str());
        std::printf("| sequential steps/s, 1 instance x %d steps | %.0f | %.0f | %s |\n",
                    sequential, percentile(keel_seq, 0.5), percentile(raw_seq, 0.5),
                    median_and_range(ratio_seq).c_str());

        for (auto [label, hot] : {std::pair{"hot", std::size_t{10'000}},
                                  std::pair{"cold (replayed)", std::size_t{0}}}) {
            auto lat = resume_latency(o.samples, hot);
            std::printf("| signal-to-resume, %s: p50 / p99 (us) | %.0f / %.0f | | |\n", label,
                        percentile(lat, 0.5), percentile(lat, 0.99));
        }
        return 0;
    } catch (const std::exception& e) {
        std::cerr << "keel_process_redis_bench: " << e.what() << "\n";
        return 1;
    }
}
