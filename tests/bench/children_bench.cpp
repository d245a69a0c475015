// Child processes on one Redis against the same work driven from outside, in one run:
//
//   A (children): one parent instance whose handler starts N children one after another
//     (`co_await ctx.start(child, i)` in a plain loop, as users write it first), then joins
//     them in order; each child does one `ctx.run` step and returns its value; the parent
//     returns the sum. Timed from `engine.start(parent)` to the parent's `wait()` returning.
//   S (children, concurrent): the same parent written for fan-out: one ctx.spawn branch per
//     child, each starting its child and joining it; the parent sums the branches. Same
//     starts, steps and outcome signals as A.
//   B (baseline): N independent instances that each do one `ctx.run` step and then wait for
//     the signal /done. A controller starts all N concurrently (N coroutines), and once all
//     are started, delivers /done to each and awaits its `wait()` (N coroutines again).
//     Timed from the first start to the last completion.
//
// Both do N starts, N steps and N signal deliveries. Each workload gets an empty database
// (FLUSHALL on the bench's own redis-server) and a fresh engine and store on it; A and B
// alternate for R rounds. Redis's work is counted around each workload from INFO: commands
// processed (those run inside scripts included), calls by command, Redis's time in scripts
// and its CPU; the client's requests and socket writes from the connection's stats, and its
// CPU. Counts are per child.
//
//   C (requests): one suspended instance answers M requests asked one after another
//     (`engine.ask`, the handler's `ctx.receive` then `ctx.reply`); each ask timed from the
//     call to the answer. D (baseline): M signals delivered one after another to one
//     suspended instance that waits for them (`engine.deliver`, what a webhook's emit
//     does), each timed from the call to its return (the signal stored and the instance
//     woken). Fresh database and engine for each; C and D alternate for R rounds.
//
//   keel_children_bench [--children N] [--rounds R] [--asks M] [--profile 1]
//
// --profile 1 adds one pass of each workload with SLOWLOG at threshold 0 and prints the
// script calls per child by script and by whose key comes first (a parent's, a child's),
// with the first call's first key and arguments to tell the scripts apart, which INFO does
// not separate. SLOWLOG slows every call: only its counts and proportions mean anything.

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <keel/framework/clock.hpp>
#include <keel/framework/concurrency.hpp>
#include <keel/framework/log.hpp>
#include <keel/process/child.hpp>
#include <keel/process/engine.hpp>
#include <keel/process/redis_store.hpp>
#include <keel/test/redis_server.hpp>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

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
    int children = 1000;
    int rounds = 5;
    int asks = 1000;
    bool profile = false;
};

options parse(int argc, char** argv) {
    options o;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string flag = argv[i];
        int value = std::stoi(argv[i + 1]);
        if (flag == "--children")
            o.children = std::max(1, value);
        else if (flag == "--rounds")
            o.rounds = std::max(1, value);
        else if (flag == "--asks")
            o.asks = std::max(0, value);
        else if (flag == "--profile")
            o.profile = value != 0;
        else
            throw std::invalid_argument("unknown flag " + flag);
    }
    return o;
}

// ---- the processes ----

// A child's value: small, and different enough between children to check the sum.
int value_of(const std::string& n) {
    return std::stoi(n) % 10;
}

int expected_sum(int n) {
    int sum = 0;
    for (int i = 0; i < n; ++i) sum += value_of(std::to_string(i));
    return sum;
}

// A minimal child: one step, then it ends with the step's value.
durable<int> child_flow(context& ctx, std::string n) {
    co_return co_await ctx.run("work", [&n] { return value_of(n); });
}
inline constexpr auto child_def = define<child_flow>("/bench/child/:n");

// Workload A: starts `children` children in a plain loop, then joins them all.
durable<int> parent_flow(context& ctx, std::string, int children) {
    std::vector<child<int>> started;
    started.reserve(static_cast<std::size_t>(children));
    for (int i = 0; i < children; ++i)
        started.push_back(co_await ctx.start(child_def, std::to_string(i)));
    int sum = 0;
    for (auto& c : started) sum += co_await ctx.join(c);
    co_return sum;
}
inline constexpr auto parent_def = define<parent_flow>("/bench/parent/:run/:children");

// Workload S: the same children started concurrently, one branch each.
durable<int> start_and_join(context& ctx, int i) {
    auto c = co_await ctx.start(child_def, std::to_string(i));
    co_return co_await ctx.join(c);
}
durable<int> spawning_parent_flow(context& ctx, std::string, int children) {
    std::vector<branch<int>> branches;
    branches.reserve(static_cast<std::size_t>(children));
    for (int i = 0; i < children; ++i) branches.push_back(ctx.spawn(start_and_join(ctx, i)));
    int sum = 0;
    for (auto& b : branches) sum += co_await b;
    co_return sum;
}
inline constexpr auto spawning_def = define<spawning_parent_flow>("/bench/spawning/:run/:children");

// Workload B: the same step, then a signal from outside instead of a parent's join.
durable<int> alone_flow(context& ctx, std::string n) {
    int value = co_await ctx.run("work", [&n] { return value_of(n); });
    co_await ctx.wait("/done");
    co_return value;
}
inline constexpr auto alone_def = define<alone_flow>("/bench/alone/:n");

// Workload C: answers every request to /q with its body.
durable<void> answering_flow(context& ctx, std::string) {
    for (;;) {
        auto req = co_await ctx.receive("/q");
        co_await ctx.reply(req, req.body);
    }
}
inline constexpr auto answering_def = define<answering_flow>("/bench/answering/:run");

// Workload D: takes every /note.
durable<void> listening_flow(context& ctx, std::string) {
    for (;;) co_await ctx.wait("/note");
}
inline constexpr auto listening_def = define<listening_flow>("/bench/listening/:run");

// ---- one workload ----

struct sample {
    double seconds = 0;
    double commands = 0;       // per child: Redis commands processed, inside scripts included
    double requests = 0;       // per child: requests the client sent (script calls count once)
    double writes = 0;         // per child: the client's socket writes (requests / writes:
                               // how much the requests were pipelined)
    double redis_us = 0;       // per child: Redis's time in script calls, microseconds
    double client_cpu_ms = 0;  // this process's CPU time during the workload
    double redis_cpu_ms = 0;   // redis-server's, from just before to just after it
    std::map<std::string, double> calls;  // per child, by command
};

struct bench_env {
    keel::test::redis_server server;
    asio::io_context io{1};
    keel::system_clock clock;
    redis::connection conn =
        redis::connection::create(io.get_executor(), {.url = server.url()}).value();
    // Every workload's store and engine; stopped ones are kept until the io_context is done.
    std::vector<std::unique_ptr<redis_store>> stores;
    std::vector<std::unique_ptr<engine>> engines;

    // An empty database, and a fresh store and running engine on it.
    engine& fresh_engine() {
        server.cli({"FLUSHALL"});
        stores.push_back(std::make_unique<redis_store>(conn));
        engine_options opts{.worker = "bench"};
        engines.push_back(std::make_unique<engine>(io.get_executor(), *stores.back(), clock, opts));
        auto& eng = *engines.back();
        eng.add(child_def);
        eng.add(parent_def);
        eng.add(spawning_def);
        eng.add(alone_def);
        eng.add(answering_def);
        eng.add(listening_def);
        eng.run();
        return eng;
    }
};

asio::awaitable<void> pause(std::chrono::milliseconds d) {
    asio::steady_timer t(co_await asio::this_coro::executor, d);
    co_await t.async_wait(asio::use_awaitable);
}

// Measures `work` (which returns its own elapsed seconds) on a fresh engine: Redis's counters
// and CPU around it, the client's requests and writes, and this process's CPU during it. The
// pauses let the engine's opening commands (the first heartbeat) finish before, and the
// children's final commits, which follow the outcome signal that lets the parent end,
// finish after.
template <class Work>
asio::awaitable<sample> measure(bench_env& env, int n, Work work) {
    auto& eng = env.fresh_engine();
    co_await env.stores.back()->open();  // before the engine's calls
    co_await pause(std::chrono::milliseconds(200));
    auto before = read_counts(env.server);
    auto sent = env.conn.stats();
    sample s;
    auto cpu = std::clock();
    s.seconds = co_await work(eng);
    s.client_cpu_ms = 1e3 * double(std::clock() - cpu) / CLOCKS_PER_SEC;
    co_await pause(std::chrono::milliseconds(200));
    auto after = read_counts(env.server);
    auto now_sent = env.conn.stats();
    eng.stop();
    // The INFO that read `before` is counted in `after`: leave it out.
    long info = after.calls["info"] - before.calls["info"];
    s.commands = double(after.total - before.total - info) / n;
    s.requests = double(now_sent.requests - sent.requests) / n;
    s.writes = double(now_sent.writes - sent.writes) / n;
    s.redis_us = double(after.script_usec - before.script_usec) / n;
    s.redis_cpu_ms = 1e3 * (after.cpu_seconds - before.cpu_seconds);
    for (const auto& [name, calls] : after.calls)
        if (name != "info")
            if (long d = calls - before.calls[name]; d != 0) s.calls[name] = double(d) / n;
    co_return s;
}

double seconds_since(steady::time_point t0) {
    return std::chrono::duration<double>(steady::now() - t0).count();
}

// A (or S, with the spawning parent): one parent starting and joining n children.
template <const auto& Parent = parent_def>
asio::awaitable<double> run_children(engine& eng, int n, int round) {
    auto t0 = steady::now();
    auto h = co_await eng.start(Parent, std::to_string(round), n);
    auto r = co_await h.wait();
    double s = seconds_since(t0);
    if (!r) throw std::runtime_error("parent failed: " + r.error().message);
    if (*r != expected_sum(n))
        throw std::runtime_error("parent returned " + std::to_string(*r) + ", not " +
                                 std::to_string(expected_sum(n)));
    co_return s;
}

// B: n instances started concurrently, then each signalled and awaited concurrently.
asio::awaitable<double> run_alone(engine& eng, int n) {
    keel::concurrency::nursery_options wide{.max_children = static_cast<std::size_t>(n) + 1};
    std::vector<handle<int>> handles(static_cast<std::size_t>(n));
    int sum = 0;
    auto t0 = steady::now();
    co_await keel::concurrency::open_nursery(
        [&](keel::concurrency::nursery& group) -> asio::awaitable<void> {
            for (int i = 0; i < n; ++i)
                group.spawn([&eng, &handles, i]() -> asio::awaitable<void> {
                    handles[static_cast<std::size_t>(i)] =
                        co_await eng.start(alone_def, std::to_string(i));
                });
            co_return;
        },
        wide);
    co_await keel::concurrency::open_nursery(
        [&](keel::concurrency::nursery& group) -> asio::awaitable<void> {
            for (int i = 0; i < n; ++i)
                group.spawn([&eng, &handles, &sum, i]() -> asio::awaitable<void> {
                    co_await eng.deliver(handles[static_cast<std::size_t>(i)].id(), "/done", i);
                    auto r = co_await handles[static_cast<std::size_t>(i)].wait();
                    if (!r) throw std::runtime_error("instance failed: " + r.error().message);
                    sum += *r;
                });
            co_return;
        },
        wide);
    double s = seconds_since(t0);
    if (sum != expected_sum(n))
        throw std::runtime_error("instances returned " + std::to_string(sum) + ", not " +
                                 std::to_string(expected_sum(n)));
    co_return s;
}

double micros_since(steady::time_point t0) {
    return std::chrono::duration<double, std::micro>(steady::now() - t0).count();
}

// C: m asks, one after another, to one suspended instance; each one's latency in us.
asio::awaitable<std::vector<double>> run_asks(bench_env& env, int m, int round) {
    auto& eng = env.fresh_engine();
    co_await env.stores.back()->open();  // before the engine's calls
    auto h = co_await eng.start(answering_def, std::to_string(round));
    co_await pause(std::chrono::milliseconds(100));
    std::vector<double> latency;
    for (int i = 0; i < m; ++i) {
        auto t0 = steady::now();
        auto answer = co_await eng.ask(h.id(), "/q", i);
        latency.push_back(micros_since(t0));
        if (!answer) throw std::runtime_error("ask failed: " + answer.error().message);
        if (*answer != i) throw std::runtime_error("ask answered " + answer->dump());
    }
    eng.stop();
    co_return latency;
}

// D: m signals, one after another, to one suspended instance; each delivery's latency in us.
asio::awaitable<std::vector<double>> run_deliveries(bench_env& env, int m, int round) {
    auto& eng = env.fresh_engine();
    co_await env.stores.back()->open();  // before the engine's calls
    auto h = co_await eng.start(listening_def, std::to_string(round));
    co_await pause(std::chrono::milliseconds(100));
    std::vector<double> latency;
    for (int i = 0; i < m; ++i) {
        auto t0 = steady::now();
        auto d = co_await eng.deliver(h.id(), "/note", i);
        latency.push_back(micros_since(t0));
        if (d.result != delivery::outcome::stored) throw std::runtime_error("not delivered");
    }
    co_await pause(std::chrono::milliseconds(200));
    eng.stop();
    co_return latency;
}

// ---- --profile: script calls by script ----

struct script_calls {
    long calls = 0;
    long usec = 0;           // Redis's time in them (SLOWLOG's own measure)
    std::string first_call;  // its first key and first arguments, to tell the scripts apart
};

void start_profile(bench_env& env) {
    env.server.cli({"CONFIG", "SET", "slowlog-log-slower-than", "0"});
    env.server.cli({"CONFIG", "SET", "slowlog-max-len", "1000000"});
    env.server.cli({"SLOWLOG", "RESET"});
}

// Whose key a script call's first key is: "bench/parent", "bench/child", "bench/alone" for an
// instance's (keel:{0}:i:bench/child/7:meta), else the key itself (keel:workers).
std::string owner_of(std::string_view key) {
    auto at = key.find(":i:");
    if (at == std::string_view::npos) return std::string(key);
    auto id = key.substr(at + 3);
    return std::string(id.substr(0, id.find('/', id.find('/') + 1)));
}

asio::awaitable<std::map<std::string, script_calls>> read_profile(bench_env& env) {
    // "<sha prefix> keys <k> on <owner>" -> calls
    std::map<std::string, script_calls> per;
    auto r = co_await env.conn.exec("SLOWLOG", "GET", "-1");
    for (const auto& e : r.value().elements()) {
        auto args = e.elements()[3].elements();
        std::string name(args[0].text().value_or(""));
        if (name != "EVALSHA" || args.size() < 4) continue;
        name = std::string(args[1].text().value_or("").substr(0, 8)) + " keys " +
               std::string(args[2].text().value_or("")) + " on " +
               owner_of(args[3].text().value_or(""));
        auto& s = per[name];
        ++s.calls;
        s.usec += e.elements()[2].integer().value_or(0);
        // SLOWLOG keeps entries newest first: the last one seen is the first call. Its
        // first key, then its first three arguments after the keys.
        std::size_t keys = std::stoul(std::string(args[2].text().value_or("0")));
        s.first_call = std::string(args[3].text().value_or(""));
        for (std::size_t i = 3 + keys; i < std::min(args.size(), 6 + keys); ++i)
            s.first_call += " " + std::string(args[i].text().value_or("").substr(0, 24));
    }
    env.server.cli({"CONFIG", "SET", "slowlog-log-slower-than", "10000"});
    env.server.cli({"SLOWLOG", "RESET"});
    co_return per;
}

void print_profile(const char* label, const std::map<std::string, script_calls>& per, int n) {
    for (const auto& [name, s] : per)
        std::printf("  %s: %-36s %7ld calls, %6.3f per child, %6.1f us each; first: %s\n", label,
                    name.c_str(), s.calls, double(s.calls) / n, double(s.usec) / double(s.calls),
                    s.first_call.c_str());
}

// ---- the run ----

void print_calls(const std::vector<sample>& a, const std::vector<sample>& b) {
    // Mean over the rounds of each command's calls per child, A's largest first.
    std::map<std::string, std::pair<double, double>> mean;
    for (const auto& s : a)
        for (const auto& [name, v] : s.calls) mean[name].first += v / double(a.size());
    for (const auto& s : b)
        for (const auto& [name, v] : s.calls) mean[name].second += v / double(b.size());
    std::vector<std::pair<std::string, std::pair<double, double>>> rows(mean.begin(), mean.end());
    std::sort(rows.begin(), rows.end(),
              [](const auto& x, const auto& y) { return x.second.first > y.second.first; });
    std::printf(
        "\n| command (INFO commandstats), calls per child | A: children | B: starts "
        "and signals |\n|---|---:|---:|\n");
    for (const auto& [name, v] : rows)
        std::printf("| %s | %.2f | %.2f |\n", name.c_str(), v.first, v.second);
}

int run(const options& o) {
    bench_env env;
    std::vector<sample> a, b, spawned;
    std::vector<std::vector<double>> asks, deliveries;
    std::map<std::string, script_calls> profile_a, profile_b;
    asio::co_spawn(
        env.io,
        [&]() -> asio::awaitable<void> {
            const int n = o.children;
            for (int round = 0; round < o.rounds; ++round) {
                a.push_back(co_await measure(
                    env, n, [&](engine& eng) { return run_children(eng, n, round); }));
                b.push_back(
                    co_await measure(env, n, [&](engine& eng) { return run_alone(eng, n); }));
                spawned.push_back(co_await measure(env, n, [&](engine& eng) {
                    return run_children<spawning_def>(eng, n, round);
                }));
                if (o.asks > 0) {
                    asks.push_back(co_await run_asks(env, o.asks, round));
                    deliveries.push_back(co_await run_deliveries(env, o.asks, round));
                }
            }
            if (o.profile) {
                start_profile(env);
                co_await measure(env, n, [&](engine& eng) { return run_children(eng, n, 0); });
                profile_a = co_await read_profile(env);
                start_profile(env);
                co_await measure(env, n, [&](engine& eng) { return run_alone(eng, n); });
                profile_b = co_await read_profile(env);
            }
            env.conn.close();
        },
        [](std::exception_ptr e) {
            if (e) std::rethrow_exception(e);
        });
    env.io.run();

    std::printf(
        "children %d, rounds %d\n"
        "A: one parent starts %d children in a plain loop (ctx.start, sequential), then joins "
        "them in order\n"
        "B: %d instances started concurrently (%d coroutines), then each sent /done and "
        "awaited concurrently\n"
        "S: one parent starts %d children concurrently (a ctx.spawn branch per child: start, "
        "join), then sums the branches\n\n",
        o.children, o.rounds, o.children, o.children, o.children, o.children);
    std::vector<column> figures{
        {"A wall ms", " %.0f |", by_round(a, [](auto& x) { return x.seconds * 1e3; })},
        {"B wall ms", " %.0f |", by_round(b, [](auto& x) { return x.seconds * 1e3; })},
        {"A/B wall", " %.2f |", ratios(a, b, [](auto& x) { return x.seconds; }), true},
        {"A cmds/child", " %.2f |", by_round(a, [](auto& x) { return x.commands; })},
        {"B cmds/child", " %.2f |", by_round(b, [](auto& x) { return x.commands; })},
        {"A/B cmds", " %.2f |", ratios(a, b, [](auto& x) { return x.commands; }), true},
        {"S wall ms", " %.0f |", by_round(spawned, [](auto& x) { return x.seconds * 1e3; })},
        {"S/B wall", " %.2f |", ratios(spawned, b, [](auto& x) { return x.seconds; }), true},
        {"S cmds/child", " %.2f |", by_round(spawned, [](auto& x) { return x.commands; })},
        {"S/B cmds", " %.2f |", ratios(spawned, b, [](auto& x) { return x.commands; }), true},
        {"A evalsha/child", " %.2f |", by_round(a, [](auto& x) { return x.calls["evalsha"]; })},
        {"B evalsha/child", " %.2f |", by_round(b, [](auto& x) { return x.calls["evalsha"]; })},
    };
    print_table(figures);
    // Where the wall time goes: requests sent, the socket writes that carried them, and the
    // CPU of each side.
    std::vector<column> costs{
        {"A requests/child", " %.2f |", by_round(a, [](auto& x) { return x.requests; })},
        {"B requests/child", " %.2f |", by_round(b, [](auto& x) { return x.requests; })},
        {"A writes/child", " %.2f |", by_round(a, [](auto& x) { return x.writes; })},
        {"B writes/child", " %.2f |", by_round(b, [](auto& x) { return x.writes; })},
        {"A Redis script us/child", " %.1f |", by_round(a, [](auto& x) { return x.redis_us; })},
        {"B Redis script us/child", " %.1f |", by_round(b, [](auto& x) { return x.redis_us; })},
        {"A Redis CPU ms", " %.0f |", by_round(a, [](auto& x) { return x.redis_cpu_ms; })},
        {"B Redis CPU ms", " %.0f |", by_round(b, [](auto& x) { return x.redis_cpu_ms; })},
        {"A client CPU ms", " %.0f |", by_round(a, [](auto& x) { return x.client_cpu_ms; })},
        {"B client CPU ms", " %.0f |", by_round(b, [](auto& x) { return x.client_cpu_ms; })},
    };
    std::printf("\n");
    print_table(costs);
    print_calls(a, b);
    if (!asks.empty()) {
        std::printf(
            "\nC: %d requests asked one after another of one suspended instance (ask -> "
            "receive -> reply -> answer)\nD: %d signals delivered one after another to one "
            "suspended instance (deliver returns)\n\n",
            o.asks, o.asks);
        auto at = [](std::vector<std::vector<double>>& side, double p) {
            std::vector<double> v;
            for (auto& round : side) v.push_back(percentile(round, p));
            return v;
        };
        auto ratio = [](std::vector<double> x, const std::vector<double>& y) {
            for (std::size_t i = 0; i < x.size(); ++i) x[i] /= y[i];
            return x;
        };
        std::vector<column> latency{
            {"C ask p50 us", " %.0f |", at(asks, 0.5)},
            {"C ask p99 us", " %.0f |", at(asks, 0.99)},
            {"D deliver p50 us", " %.0f |", at(deliveries, 0.5)},
            {"D deliver p99 us", " %.0f |", at(deliveries, 0.99)},
            {"C/D p50", " %.2f |", ratio(at(asks, 0.5), at(deliveries, 0.5)), true},
            {"C/D p99", " %.2f |", ratio(at(asks, 0.99), at(deliveries, 0.99)), true},
        };
        print_table(latency);
    }
    if (o.profile) {
        std::printf("\nscript calls per child (SLOWLOG, one more pass of each):\n");
        print_profile("A", profile_a, o.children);
        print_profile("B", profile_b, o.children);
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    // Lifecycle lines (info) would measure the terminal, not the engine.
    keel::log::configure({.min_level = keel::log::level::warn});
    try {
        return run(parse(argc, argv));
    } catch (const std::exception& e) {
        std::cerr << "keel_children_bench: " << e.what() << "\n";
        return 1;
    }
}
