// A timer storm (docs/benchmarks.md, "A timer storm"): N instances whose durable timers all
// fall due at the same instant T, on one engine of two parts on two threads (as a service with
// --threads 2 runs it) over the Redis store on the bench's own redis-server (unix socket, AOF
// appendfsync everysec, no automatic rewrites). Each round, on a fresh server:
//
//   A. single steps: N `one_step` flows (start, one ctx.run step, complete), started by
//      --concurrency clients on the engine's threads, each starting the next when its last
//      completed (a closed loop): flows/s = N / the time until all completed. Measured before
//      the storm's fill and again after the storm (on the store it left); the storm is
//      compared with their mean, so that a change in what else the shared machine runs
//      moves the baseline too.
//   B. storm: a pool of `waiter`s (suspended on a signal) and N `sleeper`s (each
//      ctx.timer_at(T), then one step, then completes) are made first, outside the figures;
//      T is set far enough ahead for the fill (from A's rate) plus the --window. From T the
//      engine drains the storm by itself: each sleeper's step records its lateness (the
//      step's start less T) in a preallocated array; a monitor on the bench's own thread and
//      Redis connection reads the store's counts() every 50 ms, so the drain's end (every
//      sleeper completed) is known to 50 ms. Drain rate = N / (that end - T).
//   Other traffic: from T - window until the drain ends, an open-loop load of --rate new
//      `one_step` starts a second and --rate signals a second, each to a waiter of the pool
//      (which then runs one step and completes): each request is spawned on an engine thread,
//      as an HTTP handler would be, at its planned time, and its latency runs from that time
//      until its instance's wait() returns (so a request held up by a busy thread counts its
//      delay). Requests planned before T are "without the storm", from T to the drain's end
//      "during": p50 and p99 of each, and during / without.
//
// Per phase, to say why: this process's CPU (getrusage: the engine's threads and the bench's)
// and its busiest engine thread's, redis-server's (INFO cpu), Redis commands (those scripts
// run included) per instance, the engine connection's requests per socket write, and the
// cores the machine's other processes took (/proc/stat less this process and Redis). Per
// second of the storm: timers fired and sleepers completed, the traffic's p99, and the
// largest lateness of a 5 ms timer on an engine thread with the CPU that thread used
// meanwhile (held up running, or not given a core); Redis's own calls of 20 ms or more
// (LATENCY HISTORY). Redis's used_memory growth per sleeper over their fill. The targets
// (the issue's): the drain at >= 0.8x the single steps' rate, the traffic's p99 during the
// storm <= 3x its p99 without, no timer starved (every sleeper fired, the largest lateness
// stated).
//
//   keel_storm_bench [--instances N] [--rounds R] [--rate per-second] [--concurrency C]
//                    [--window seconds] [--max-hot M] [--profile 1] [--cluster 1]
//
// --cluster 1 runs every round on a fresh Redis Cluster of 3 primaries without replicas
// (keel::test::redis_cluster: loopback TCP, no persistence) instead of the one redis-server;
// Redis's counters, CPU and memory are then the sums over the primaries (read on a plain
// connection to each), and its slow events are each primary's.
// --window: seconds of traffic before T (default N / 10,000, within 3 to 10).
// --max-hot sets engine_options::max_hot (instances kept in memory per part; the default,
// 10,000, as a service runs): above N, no woken sleeper is replayed (a diagnostic).
// --profile 1 logs every Redis call (SLOWLOG at threshold 0) in the single steps and in the
// storm and prints the calls and Redis's time per instance by script (SHA prefix, key count
// and the first key with its digits masked). SLOWLOG slows every call: only counts and
// proportions, and it holds every call of a phase (--instances 20000 is enough).
//
// --instances 2000 --rounds 1 is a smoke run (under 10 s).

#include <pthread.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <future>
#include <iostream>
#include <keel/framework/clock.hpp>
#include <keel/framework/log.hpp>
#include <keel/process/context.hpp>
#include <keel/process/engine.hpp>
#include <keel/process/redis_store.hpp>
#include <keel/test/redis_server.hpp>
#include <keel/test/run.hpp>
#include <latch>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "redis_backend.hpp"
#include "rounds.hpp"

namespace asio = boost::asio;
namespace redis = keel::redis;
using namespace keel::process;
using keel::duration;
using keel::time_point;
using keel::bench::column;
using keel::bench::percentile;
using keel::bench::print_table;
using steady = std::chrono::steady_clock;

namespace {

struct options {
    int instances = 100'000;
    int rounds = 3;
    int rate = 200;  // of each kind of other traffic, per second
    int concurrency = 200;
    double window = 0;  // seconds of traffic without the storm; 0: N / 10,000, within 3 to 10
    std::size_t max_hot = engine_options{}.max_hot;  // per part: the engine's default
    bool profile = false;
    bool cluster = false;
};

options parse(int argc, char** argv) {
    options o;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string flag = argv[i];
        double value = std::stod(argv[i + 1]);
        if (flag == "--instances")
            o.instances = std::max(1, int(value));
        else if (flag == "--rounds")
            o.rounds = std::max(1, int(value));
        else if (flag == "--rate")
            o.rate = std::max(1, int(value));
        else if (flag == "--concurrency")
            o.concurrency = std::max(1, int(value));
        else if (flag == "--window")
            o.window = value;
        else if (flag == "--max-hot")
            o.max_hot = static_cast<std::size_t>(value);
        else if (flag == "--profile")
            o.profile = value != 0;
        else if (flag == "--cluster")
            o.cluster = value != 0;
        else
            throw std::invalid_argument("unknown flag " + flag);
    }
    if (o.profile && o.cluster)
        throw std::invalid_argument("--profile reads one server's SLOWLOG: not with --cluster");
    if (o.window <= 0) o.window = std::clamp(o.instances / 10'000.0, 3.0, 10.0);
    return o;
}

double seconds_since(steady::time_point t0) {
    return std::chrono::duration<double>(steady::now() - t0).count();
}

double cpu_seconds() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    auto s = [](const timeval& t) { return double(t.tv_sec) + 1e-6 * double(t.tv_usec); };
    return s(u.ru_utime) + s(u.ru_stime);
}

// Every process's CPU time on this machine (/proc/stat: user, nice, system, irq, softirq and
// steal), to tell how much of the 2 cores others (a build, tests) took during a window.
double machine_busy_seconds() {
    std::ifstream in("/proc/stat");
    std::string cpu;
    double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
    in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
    return (user + nice + system + irq + softirq + steal) / double(sysconf(_SC_CLK_TCK));
}

// ---- the processes ----

// Where the sleepers' steps record how late they ran: microseconds after T, one slot per
// sleeper (written once, by the instance's own thread; read after the drain).
struct storm_log {
    time_point due{};
    std::unique_ptr<std::atomic<std::int64_t>[]> late_us;
    int size = 0;

    static constexpr std::int64_t unfired = INT64_MIN;

    void reset(int n, time_point t) {
        due = t;
        size = n;
        late_us = std::make_unique<std::atomic<std::int64_t>[]>(static_cast<std::size_t>(n));
        for (int i = 0; i < n; ++i) late_us[i].store(unfired, std::memory_order_relaxed);
    }
    // The first run of the step counts (a step run again after a failed commit would not).
    void fire(int n) {
        auto late = std::chrono::duration_cast<std::chrono::microseconds>(
                        std::chrono::system_clock::now() - due)
                        .count();
        auto expected = unfired;
        late_us[n].compare_exchange_strong(expected, late, std::memory_order_relaxed);
    }
};

struct dependencies {
    storm_log log;
    template <class T>
    T& get() {
        return log;
    }
};

durable<int> one_step_flow(context& ctx, std::string) {
    auto body = [] { return 1; };
    co_return co_await ctx.run("step", body);
}
inline constexpr auto one_step = define<one_step_flow>("/one/:n");

durable<int> waiter_flow(context& ctx, std::string) {
    int value = co_await ctx.wait<int>("/go");
    auto body = [value] { return value; };
    co_return co_await ctx.run("step", body);
}
inline constexpr auto waiter = define<waiter_flow>("/waiter/:n");

durable<int> sleeper_flow(context& ctx, int n, std::int64_t due_ms, storm_log& log) {
    auto due = time_point(std::chrono::duration_cast<duration>(std::chrono::milliseconds(due_ms)));
    co_await ctx.timer_at(due, "due");
    auto body = [&log, n] {
        log.fire(n);
        return n;
    };
    co_return co_await ctx.run("step", body);
}
inline constexpr auto sleeper = define<sleeper_flow>("/storm/:n/:due");

// ---- the service under test and the bench's own side ----

keel::test::redis_server_options redis_options() {
    keel::test::redis_server_options r;
    r.appendonly = true;
    r.appendfsync = "everysec";
    r.extra_args = {"--auto-aof-rewrite-percentage", "0"};  // no rewrite falls into a phase
    return r;
}

// An engine of two parts on two threads with a Redis socket each (keel-orders --threads 2),
// and the bench's own thread with its own connection and store object, for the traffic's
// clock and the counts (so that watching costs the engine's threads nothing).
struct service {
    keel::bench::redis_backend redis;
    std::vector<std::unique_ptr<asio::io_context>> io;
    std::vector<asio::any_io_executor> executors;
    asio::io_context bench_io{1};
    keel::system_clock clock;
    std::optional<redis::connection> conn;
    std::optional<redis_store> store;
    std::optional<redis::connection> probe_conn;
    std::optional<redis_store> probe;
    std::vector<redis::connection> info_conns;  // one to each node, for INFO
    dependencies deps;
    std::optional<engine> eng;
    std::vector<asio::executor_work_guard<asio::io_context::executor_type>> guards;
    std::vector<std::thread> threads;

    service(std::size_t max_hot, bool cluster) : redis(cluster, redis_options()) {
        for (int i = 0; i < 2; ++i) {
            io.push_back(std::make_unique<asio::io_context>(1));
            executors.push_back(io.back()->get_executor());
        }
        conn.emplace(redis::connection::create(executors, {.url = redis.url()}).value());
        store.emplace(*conn);
        probe_conn.emplace(
            redis::connection::create(bench_io.get_executor(), {.url = redis.url()}).value());
        probe.emplace(*probe_conn);
        for (std::size_t node = 0; node < redis.nodes(); ++node)
            info_conns.push_back(
                redis::connection::create(bench_io.get_executor(), {.url = redis.node_url(node)})
                    .value());
        engine_options options;
        options.worker = "storm";
        options.max_hot = max_hot;
        eng.emplace(executors, *store, clock, options);
        eng->add(one_step);
        eng->add(waiter);
        eng->add(sleeper, deps);
        eng->run();
        for (auto& ctx : io) guards.emplace_back(ctx->get_executor());
        guards.emplace_back(bench_io.get_executor());
        for (auto& ctx : io) threads.emplace_back([&ctx] { ctx->run(); });
        threads.emplace_back([this] { bench_io.run(); });
        keel::test::call_on(bench_io, [this] { return store->open(); });
        keel::test::call_on(bench_io, [this] { return probe->open(); });
    }
    ~service() {
        eng->stop();  // posted to the parts
        close_on(executors[0], *conn);
        close_on(bench(), *probe_conn);
        for (auto& c : info_conns) close_on(bench(), c);
        guards.clear();
        for (auto& ctx : io) ctx->stop();
        bench_io.stop();
        for (auto& t : threads) t.join();
        eng.reset();
    }
    service(const service&) = delete;
    service& operator=(const service&) = delete;

    asio::any_io_executor bench() { return bench_io.get_executor(); }

    // Closes `c` on a thread of its own and waits until it has.
    static void close_on(const asio::any_io_executor& ex, redis::connection& c) {
        std::promise<void> closed;
        asio::post(ex, [&] {
            c.close();
            closed.set_value();
        });
        closed.get_future().wait();
    }
};

// Runs the coroutine `f` returns on `ex` and waits for its value (from the main thread).
template <class F>
auto run_on(const asio::any_io_executor& ex, F f) {
    return asio::co_spawn(ex, std::move(f), asio::use_future).get();
}

asio::awaitable<void> pause(std::chrono::milliseconds d) {
    asio::steady_timer t(co_await asio::this_coro::executor, d);
    co_await t.async_wait(asio::use_awaitable);
}

// ---- Redis's counters, read on the bench's connection (no redis-cli fork in a window) ----

struct redis_info {
    double commands = 0;  // total_commands_processed: those scripts run included
    double cpu_seconds = 0;
    double used_memory = 0;
    double delayed_fsyncs = 0;  // aof_delayed_fsync: writes Redis held back for a slow fsync
};

double field(const std::string& line, std::string_view name) {
    return std::stod(line.substr(name.size() + 1));
}

redis_info parse_info(const std::string& text) {
    redis_info out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.starts_with("total_commands_processed:"))
            out.commands = field(line, "total_commands_processed");
        else if (line.starts_with("used_cpu_user:"))
            out.cpu_seconds += field(line, "used_cpu_user");
        else if (line.starts_with("used_cpu_sys:"))
            out.cpu_seconds += field(line, "used_cpu_sys");
        else if (line.starts_with("used_memory:"))
            out.used_memory = field(line, "used_memory");
        else if (line.starts_with("aof_delayed_fsync:"))
            out.delayed_fsyncs = field(line, "aof_delayed_fsync");
    }
    return out;
}

// The server's, or the sum of the primaries'.
asio::awaitable<redis_info> read_info(service& s) {
    redis_info sum;
    for (auto& c : s.info_conns) {
        auto r = co_await c.exec("INFO", "stats", "cpu", "memory", "persistence");
        if (!r) throw std::runtime_error("INFO: " + r.error().what());
        auto one = parse_info(std::string(r->text().value_or("")));
        sum.commands += one.commands;
        sum.cpu_seconds += one.cpu_seconds;
        sum.used_memory += one.used_memory;
        sum.delayed_fsyncs += one.delayed_fsyncs;
    }
    co_return sum;
}

redis_info info_now(service& s) {
    return run_on(s.bench(), [&s] { return read_info(s); });
}

// The store's count of `definition`'s instances with status `st`.
asio::awaitable<std::uint64_t> count_of(service& s, std::string definition, index_status st) {
    auto counts = co_await s.probe->counts();
    auto it = counts.find(definition);
    if (it == counts.end()) co_return 0;
    co_return it->second[static_cast<std::size_t>(st)];
}

// Until the store counts `n` instances of `definition` with status `st` (at most `limit`).
void await_count(service& s, std::string_view definition, index_status st, int n,
                 std::chrono::seconds limit) {
    auto t0 = steady::now();
    for (;;) {
        auto name = std::string(definition);
        auto c = run_on(s.bench(), [&s, name, st] { return count_of(s, name, st); });
        if (c >= static_cast<std::uint64_t>(n)) return;
        if (steady::now() - t0 > limit)
            throw std::runtime_error(std::string(definition) + ": " + std::to_string(c) + " of " +
                                     std::to_string(n) + " " + std::string(to_string(st)));
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
}

// ---- --profile: Redis calls by script, from SLOWLOG ----
// (Redis 7 logs the commands a script runs too, under their own names; a script's time
// includes theirs.)

struct script_calls {
    double calls = 0;
    double usec = 0;
};

// "EVALSHA 1a2b3c4d keys 2 keel:{#}:i:storm/#/#:meta": digits masked so that calls group.
std::string call_shape(std::span<const redis::reply> args) {
    std::string name(args[0].text().value_or(""));
    if (name != "EVALSHA" || args.size() < 4) return name;
    std::string key(args[3].text().value_or(""));
    std::string masked;
    for (char c : key)
        if (!std::isdigit(static_cast<unsigned char>(c)))
            masked += c;
        else if (masked.empty() || masked.back() != '#')
            masked += '#';
    return "EVALSHA " + std::string(args[1].text().value_or("").substr(0, 8)) + " keys " +
           std::string(args[2].text().value_or("")) + " " + masked;
}

asio::awaitable<std::map<std::string, script_calls>> read_slowlog(service& s) {
    std::map<std::string, script_calls> per;
    auto r = co_await s.probe_conn->exec("SLOWLOG", "GET", "-1");
    if (!r) throw std::runtime_error("SLOWLOG: " + r.error().what());
    for (const auto& e : r->elements()) {
        auto fields = e.elements();
        auto shape = call_shape(fields[3].elements());
        if (shape == "SLOWLOG" || shape == "INFO") continue;
        auto& c = per[shape];
        c.calls += 1;
        c.usec += double(fields[2].integer().value_or(0));
    }
    co_await s.probe_conn->exec("SLOWLOG", "RESET");
    co_return per;
}

void print_profile(service& s, const char* phase, double instances, int round) {
    auto per = run_on(s.bench(), [&s] { return read_slowlog(s); });
    std::printf("round %d: profile of %s, per instance: calls, Redis us (SLOWLOG)\n", round, phase);
    for (const auto& [shape, c] : per)
        if (c.calls / instances >= 0.001)
            std::printf("    %-72s %6.2f %7.1f\n", shape.c_str(), c.calls / instances,
                        c.usec / instances);
}

// ---- A: single steps, and the fills (closed loops on the engine's threads) ----

// Awaits `call(k)` for every k in [0, n) from `clients` coroutines spread over the engine's
// threads, each making its next call when its last returned; the seconds it took.
template <class Call>
double closed_loop(service& s, int n, int clients, Call& call) {
    std::atomic<int> next{0};
    std::latch done(clients);
    std::mutex m;
    std::exception_ptr failed;
    auto t0 = steady::now();
    for (int c = 0; c < clients; ++c)
        asio::co_spawn(
            s.executors[static_cast<std::size_t>(c) % s.executors.size()],
            [&]() -> asio::awaitable<void> {
                for (int k; (k = next.fetch_add(1)) < n;) co_await call(k);
            },
            [&](std::exception_ptr e) {
                if (e) {
                    std::lock_guard lock(m);
                    if (!failed) failed = e;
                }
                done.count_down();
            });
    done.wait();
    double seconds = seconds_since(t0);
    if (failed) std::rethrow_exception(failed);
    return seconds;
}

// The counters at one moment: this process's CPU, Redis's, and the machine's.
struct snapshot {
    steady::time_point at{};
    double cpu = 0;
    std::vector<double> parts;     // each engine thread's CPU
    redis::connection_stats sent;  // the engine's connection
    redis_info redis;
    double machine = 0;
};

double thread_cpu_seconds(std::thread& t) {
    clockid_t id{};
    timespec ts{};
    if (pthread_getcpuclockid(t.native_handle(), &id) != 0 || clock_gettime(id, &ts) != 0) return 0;
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

asio::awaitable<snapshot> take_snapshot(service& s) {
    snapshot out;
    out.cpu = cpu_seconds();
    for (std::size_t i = 0; i < s.executors.size(); ++i)
        out.parts.push_back(thread_cpu_seconds(s.threads[i]));
    out.machine = machine_busy_seconds();
    out.sent = s.conn->stats();
    out.redis = co_await read_info(s);
    out.at = steady::now();
    co_return out;
}

struct cost {
    double client_cpu_us = 0;  // per instance
    double redis_cpu_us = 0;   // per instance
    double commands = 0;       // per instance
    double cores = 0;          // both CPUs together over the wall time: how busy the 2 cores were
    double others = 0;         // cores other processes of the machine took meanwhile
    double busiest_part = 0;   // the busiest engine thread's share of a core
    double batching = 0;       // the engine's Redis requests per socket write
};

cost cost_between(const snapshot& a, const snapshot& b, double n) {
    double client = b.cpu - a.cpu, server = b.redis.cpu_seconds - a.redis.cpu_seconds;
    double seconds = std::chrono::duration<double>(b.at - a.at).count();
    double machine = b.machine - a.machine;
    double busiest = 0;
    for (std::size_t i = 0; i < a.parts.size(); ++i)
        busiest = std::max(busiest, (b.parts[i] - a.parts[i]) / seconds);
    return {1e6 * client / n,
            1e6 * server / n,
            (b.redis.commands - a.redis.commands) / n,
            (client + server) / seconds,
            std::max(0.0, machine - client - server) / seconds,
            busiest,
            double(b.sent.requests - a.sent.requests) /
                double(std::max<std::uint64_t>(1, b.sent.writes - a.sent.writes))};
}

struct single_steps {
    double per_s = 0;
    cost per_flow;
};

single_steps run_single_steps(service& s, const options& o, const std::string& prefix) {
    if (o.profile) s.redis.on_every_node({"SLOWLOG", "RESET"});
    auto flow = [&s, &prefix](int k) -> asio::awaitable<void> {
        auto h = co_await s.eng->start(one_step, prefix + std::to_string(k));
        auto r = co_await h.wait();
        if (!r) throw std::runtime_error("one_step failed: " + r.error().message);
    };
    auto before = run_on(s.bench(), [&s] { return take_snapshot(s); });
    double seconds = closed_loop(s, o.instances, o.concurrency, flow);
    auto after = run_on(s.bench(), [&s] { return take_snapshot(s); });
    return {o.instances / seconds, cost_between(before, after, o.instances)};
}

// ---- B: the storm and the traffic beside it ----

// One kind of traffic: per request, its planned time (seconds from T) and its latency.
struct traffic_log {
    std::vector<double> planned;
    std::vector<double> latency_ms;  // NaN until it completed
    int sent = 0;                    // the bench thread's count
    int capacity = 0;

    explicit traffic_log(int cap)
        : planned(static_cast<std::size_t>(cap)),
          latency_ms(static_cast<std::size_t>(cap), std::nan("")),
          capacity(cap) {}
};

struct traffic {
    traffic_log starts;
    traffic_log signals;
    std::vector<std::string> waiters;  // the pool: signal k goes to waiters[k]
    std::atomic<int> outstanding{0};
    std::atomic<int> errors{0};
    std::mutex m;
    std::string first_error;

    traffic(int start_cap, std::vector<std::string> pool)
        : starts(start_cap), signals(static_cast<int>(pool.size())), waiters(std::move(pool)) {}

    // A request has ended, with `e` when it failed.
    void done(std::exception_ptr e) {
        if (e) {
            errors.fetch_add(1);
            std::lock_guard lock(m);
            if (first_error.empty()) first_error = what(e);
        }
        outstanding.fetch_sub(1, std::memory_order_release);
    }
    static std::string what(std::exception_ptr e) {
        try {
            std::rethrow_exception(e);
        } catch (const std::exception& x) {
            return x.what();
        } catch (...) {
            return "unknown exception";
        }
    }
};

double ms_since(steady::time_point t) {
    return std::chrono::duration<double, std::milli>(steady::now() - t).count();
}

asio::awaitable<void> new_order(engine& eng, std::string name, double& latency,
                                steady::time_point planned) {
    auto h = co_await eng.start(one_step, std::move(name));
    auto r = co_await h.wait();
    if (!r) throw std::runtime_error("new one_step failed: " + r.error().message);
    latency = ms_since(planned);
}

asio::awaitable<void> webhook(engine& eng, std::string id, int value, double& latency,
                              steady::time_point planned) {
    nlohmann::json payload = value;
    auto d = co_await eng.deliver(id, "/go", payload);
    if (d.result != delivery::outcome::stored)
        throw std::runtime_error("signal to " + id + " not stored");
    handle<int> h(eng, id);
    auto r = co_await h.wait();
    if (!r) throw std::runtime_error("waiter failed: " + r.error().message);
    if (*r != value) throw std::runtime_error("waiter " + id + " returned another value");
    latency = ms_since(planned);
}

// The times of one storm: T on the engine's clock and on the steady clock, and the window.
struct storm_times {
    time_point due{};
    steady::time_point due_steady{};
    double window = 0;     // seconds of traffic before T
    double cap = 0;        // seconds after T after which the storm is given up
    bool profile = false;  // SLOWLOG reset at T
};

// An open loop from T - window until `stop`: each request at its planned time (alternately a
// new order and a signal), whether or not the earlier ones have completed.
asio::awaitable<void> offer(service& s, traffic& t, const storm_times& times, int rate,
                            const std::atomic<bool>& stop) {
    asio::steady_timer timer(co_await asio::this_coro::executor);
    auto period =
        std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(0.5 / rate));
    auto first = times.due_steady - std::chrono::duration_cast<steady::duration>(
                                        std::chrono::duration<double>(times.window));
    for (int i = 0; !stop; ++i) {
        auto planned = first + i * period;
        timer.expires_at(planned);
        co_await timer.async_wait(asio::use_awaitable);
        if (stop) break;
        bool is_start = i % 2 == 0;
        auto& log = is_start ? t.starts : t.signals;
        if (log.sent == log.capacity) {
            if (t.starts.sent == t.starts.capacity) break;
            continue;  // the waiter pool is used up: new orders only
        }
        int k = log.sent++;
        log.planned[static_cast<std::size_t>(k)] =
            std::chrono::duration<double>(planned - times.due_steady).count();
        auto& slot = log.latency_ms[static_cast<std::size_t>(k)];
        auto ex = s.executors[static_cast<std::size_t>(k) % s.executors.size()];
        t.outstanding.fetch_add(1);
        auto done = [&t](std::exception_ptr e) { t.done(e); };
        if (is_start)
            asio::co_spawn(ex, new_order(*s.eng, "t-" + std::to_string(k), slot, planned), done);
        else
            asio::co_spawn(
                ex, webhook(*s.eng, t.waiters[static_cast<std::size_t>(k)], k, slot, planned),
                done);
    }
}

// What the monitor saw: completed sleepers by time, the drain's end, and the counters at T
// and at the end.
struct storm_watch {
    std::vector<std::pair<double, std::uint64_t>> completed;  // seconds from T, count
    std::optional<double> drained_at;
    snapshot at_window, at_due, at_end;
    double end = 0;  // seconds from T when watching ended
};

asio::awaitable<void> watch(service& s, storm_watch& w, const storm_times& times, int n,
                            std::atomic<bool>& stop) {
    asio::steady_timer timer(co_await asio::this_coro::executor);
    timer.expires_at(times.due_steady - std::chrono::duration_cast<steady::duration>(
                                            std::chrono::duration<double>(times.window)));
    co_await timer.async_wait(asio::use_awaitable);
    w.at_window = co_await take_snapshot(s);
    timer.expires_at(times.due_steady);
    co_await timer.async_wait(asio::use_awaitable);
    w.at_due = co_await take_snapshot(s);
    if (times.profile) co_await s.probe_conn->exec("SLOWLOG", "RESET");
    const auto name = std::string(sleeper.name());
    for (;;) {
        co_await pause(std::chrono::milliseconds(50));
        double t = std::chrono::duration<double>(steady::now() - times.due_steady).count();
        auto c = co_await count_of(s, name, index_status::completed);
        w.completed.emplace_back(t, c);
        if (c >= static_cast<std::uint64_t>(n)) {
            w.drained_at = t;
            break;
        }
        if (t > times.cap) break;
    }
    w.at_end = co_await take_snapshot(s);
    w.end = std::chrono::duration<double>(w.at_end.at - times.due_steady).count();
    stop = true;
}

// The largest lateness of a 5 ms timer on an engine thread in one second, and how much CPU
// that thread used meanwhile: a thread held up while running (busy) used about as much as
// the lateness, one that was not given a core (descheduled) used little.
struct stall {
    double late_ms = 0;
    double ran_ms = 0;
};

double this_thread_cpu_ms() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return 1e3 * double(ts.tv_sec) + 1e-6 * double(ts.tv_nsec);
}

// How late a 5 ms timer fires on one engine thread, the worst by second from T - window:
// whether an engine thread was held up when requests were slow, and why.
asio::awaitable<void> loop_lag(std::vector<stall>& by_second, const storm_times& times,
                               const std::atomic<bool>& stop) {
    asio::steady_timer timer(co_await asio::this_coro::executor);
    auto origin = times.due_steady - std::chrono::duration_cast<steady::duration>(
                                         std::chrono::duration<double>(times.window));
    timer.expires_at(origin);
    co_await timer.async_wait(asio::use_awaitable);
    while (!stop.load(std::memory_order_relaxed)) {
        double cpu = this_thread_cpu_ms();
        timer.expires_after(std::chrono::milliseconds(5));
        co_await timer.async_wait(asio::use_awaitable);
        auto now = steady::now();
        auto second = static_cast<std::size_t>(std::chrono::duration<double>(now - origin).count());
        if (second >= by_second.size()) break;
        double late = std::chrono::duration<double, std::milli>(now - timer.expiry()).count();
        if (late > by_second[second].late_ms)
            by_second[second] = {late, this_thread_cpu_ms() - cpu};
    }
}

// ---- one round ----

struct latency_figures {
    double p50 = 0, p99 = 0;
    std::size_t samples = 0;
};

latency_figures latencies(const traffic_log& log, double from, double until) {
    std::vector<double> v;
    for (int k = 0; k < log.sent; ++k) {
        auto i = static_cast<std::size_t>(k);
        if (log.planned[i] >= from && log.planned[i] < until && !std::isnan(log.latency_ms[i]))
            v.push_back(log.latency_ms[i]);
    }
    if (v.empty()) return {};
    return {percentile(v, 0.5), percentile(v, 0.99), v.size()};
}

struct round_figures {
    single_steps a;        // before the storm
    single_steps a_after;  // after it
    double baseline = 0;   // their mean, flows/s
    double fill_s = 0;
    double memory_per_sleeper = 0;
    double drain_s = 0;  // T to the last completion (as the monitor saw it)
    double drain_per_s = 0;
    double last_fired_s = 0;
    double late_p50 = 0, late_p90 = 0, late_p99 = 0, late_max = 0, late_min = 0;
    int unfired = 0;
    cost storm_cost;  // from T to the drain's end
    cost quiet_cost;  // the window before T
    double window = 0;
    latency_figures start_without, start_during, signal_without, signal_during;
    int errors = 0;
};

std::vector<std::string> make_waiters(service& s, const options& o, int n) {
    std::vector<std::string> ids(static_cast<std::size_t>(n));
    auto make = [&s, &ids](int k) -> asio::awaitable<void> {
        auto h = co_await s.eng->start(waiter, "w-" + std::to_string(k));
        ids[static_cast<std::size_t>(k)] = h.id();
    };
    closed_loop(s, n, o.concurrency, make);
    await_count(s, waiter.name(), index_status::suspended, n, std::chrono::seconds(120));
    return ids;
}

void print_per_second(const storm_log& log, const storm_watch& w, int round) {
    std::vector<int> fired;
    for (int i = 0; i < log.size; ++i) {
        auto late = log.late_us[i].load(std::memory_order_relaxed);
        if (late == storm_log::unfired) continue;
        auto second = static_cast<std::size_t>(std::max<std::int64_t>(0, late / 1'000'000));
        if (fired.size() <= second) fired.resize(second + 1);
        ++fired[second];
    }
    std::printf("round %d: timers fired in each second from T:", round);
    for (int f : fired) std::printf(" %d", f);
    // Completions by second: the count at the last poll before each whole second.
    std::printf("\nround %d: sleepers completed in each second from T (polled every 50 ms):",
                round);
    std::uint64_t before = 0;
    for (int second = 1; !w.completed.empty(); ++second) {
        std::uint64_t at = 0;
        for (const auto& [t, c] : w.completed)
            if (t <= second) at = c;
        std::printf(" %llu", static_cast<unsigned long long>(at - before));
        before = at;
        if (second > w.completed.back().first) break;
    }
    std::printf("\n");
}

// The other traffic's p99 (both kinds) by second of its planned time, from T - window: where
// in the storm the slow requests were.
void print_traffic_by_second(const traffic& t, double window, double drain, int round) {
    std::printf("round %d: other traffic's p99 (ms) in each second from T - %.0f s:", round,
                window);
    for (double from = -window; from < drain; from += 1) {
        std::vector<double> v;
        for (const auto* log : {&t.starts, &t.signals})
            for (int k = 0; k < log->sent; ++k) {
                auto i = static_cast<std::size_t>(k);
                if (log->planned[i] >= from && log->planned[i] < from + 1 &&
                    !std::isnan(log->latency_ms[i]))
                    v.push_back(log->latency_ms[i]);
            }
        if (from >= 0 && from < 1) std::printf(" |");  // T
        if (v.empty())
            std::printf(" -");
        else
            std::printf(" %.0f", percentile(v, 0.99));
    }
    std::printf("\n");
}

void lateness_figures(const storm_log& log, round_figures& f) {
    std::vector<double> late;
    for (int i = 0; i < log.size; ++i) {
        auto us = log.late_us[i].load(std::memory_order_relaxed);
        if (us == storm_log::unfired)
            ++f.unfired;
        else
            late.push_back(double(us) / 1e6);
    }
    if (late.empty()) return;
    std::sort(late.begin(), late.end());
    f.late_p50 = percentile(late, 0.5);
    f.late_p90 = percentile(late, 0.9);
    f.late_p99 = percentile(late, 0.99);
    f.late_max = late.back();
    f.late_min = late.front();
    f.last_fired_s = late.back();
}

// The waiters' pool and the sleepers, made before T; T is set from the single steps' rate, far
// enough ahead for the fill (twice as long as the single steps took, plus 3 s) and the window.
struct storm_setup {
    storm_times times;
    std::vector<std::string> waiters;
};

storm_setup prepare_storm(service& s, const options& o, round_figures& f, int round) {
    // Enough waiters for the window and a storm three times as long as the single steps took
    // (past that, only new orders go on).
    double expected_storm = o.instances / f.a.per_s;
    int pool = static_cast<int>(o.rate * (o.window + 3 * expected_storm + 5));
    storm_setup out;
    out.waiters = make_waiters(s, o, pool);

    auto& times = out.times;
    times.window = o.window;
    times.cap = std::max(120.0, 20 * expected_storm);
    auto ahead = std::chrono::duration<double>(2 * expected_storm + 3 + o.window);
    auto now = s.clock.now();
    times.due = std::chrono::floor<std::chrono::milliseconds>(
        now + std::chrono::duration_cast<duration>(ahead));
    times.due_steady =
        steady::now() + std::chrono::duration_cast<steady::duration>(times.due - now);
    s.deps.log.reset(o.instances, times.due);
    std::int64_t due_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(times.due.time_since_epoch()).count();

    auto m0 = info_now(s);
    auto t_fill = steady::now();
    auto make = [&s, due_ms](int k) -> asio::awaitable<void> {
        co_await s.eng->start(sleeper, k, due_ms);
    };
    closed_loop(s, o.instances, o.concurrency, make);
    await_count(s, sleeper.name(), index_status::suspended, o.instances, std::chrono::seconds(600));
    f.fill_s = seconds_since(t_fill);
    f.memory_per_sleeper = (info_now(s).used_memory - m0.used_memory) / o.instances;
    double slack = std::chrono::duration<double>(times.due_steady - steady::now()).count();
    std::printf(
        "round %d: %d waiters; %d sleepers made in %.1f s (Redis used_memory +%.0f bytes each); "
        "T in %.1f s (steady clock %.3f s, for matching a profile)\n",
        round, pool, o.instances, f.fill_s, f.memory_per_sleeper, slack,
        std::chrono::duration<double>(times.due_steady.time_since_epoch()).count());
    std::fflush(stdout);
    if (slack < o.window + 0.5)
        throw std::runtime_error("the fill ran into the window before T: lower --window");
    // Emptied now: a reset at T that freed the fill's entries would hold Redis up.
    if (o.profile) run_on(s.bench(), [&s] { return read_slowlog(s); });
    return out;
}

// From T - window: the traffic and the monitor on the bench's thread, the lag probes on the
// engine's; until every sleeper completed (or the cap), then until the traffic has finished.
void run_storm(service& s, const storm_times& times, int n, int rate, traffic& t, storm_watch& w,
               std::vector<stall>& lag) {
    std::atomic<bool> stop{false};
    auto seconds = static_cast<std::size_t>(times.window + times.cap + 5);
    std::vector<std::vector<stall>> lags(s.executors.size(), std::vector<stall>(seconds));
    std::vector<std::future<void>> probes;
    for (std::size_t i = 0; i < s.executors.size(); ++i)
        probes.push_back(
            asio::co_spawn(s.executors[i], loop_lag(lags[i], times, stop), asio::use_future));
    auto offered = asio::co_spawn(s.bench(), offer(s, t, times, rate, stop), asio::use_future);
    auto watched = asio::co_spawn(s.bench(), watch(s, w, times, n, stop), asio::use_future);
    watched.get();
    offered.get();
    for (auto& p : probes) p.get();
    for (int i = 0; t.outstanding.load(std::memory_order_acquire) > 0 && i < 1200; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    lag.assign(seconds, stall{});
    for (const auto& part : lags)
        for (std::size_t i = 0; i < seconds; ++i)
            if (part[i].late_ms > lag[i].late_ms) lag[i] = part[i];
}

// How many of the traffic's requests were planned at or after `from` (seconds from T).
double sent_since(const traffic& t, double from, double until) {
    double n = 0;
    for (const auto* log : {&t.starts, &t.signals})
        for (int k = 0; k < log->sent; ++k) {
            double at = log->planned[static_cast<std::size_t>(k)];
            if (at >= from && at < until) ++n;
        }
    return n;
}

void print_storm(const round_figures& f, const storm_watch& w, const traffic& t,
                 const std::vector<stall>& lag, const storm_log& log, int round) {
    if (!t.first_error.empty())
        std::printf("round %d: first error: %s\n", round, t.first_error.c_str());
    if (t.signals.sent == t.signals.capacity)
        std::printf("round %d: the waiter pool (%d) ran out during the storm\n", round,
                    t.signals.capacity);
    std::printf(
        "round %d: storm: every sleeper completed %.2f s after T: %.0f timers/s (%.2fx the "
        "single steps' mean); last timer fired at +%.2f s, %d never fired\n",
        round, f.drain_s, f.drain_per_s, f.drain_per_s / f.baseline, f.last_fired_s, f.unfired);
    std::printf(
        "round %d: lateness (step start - T), s: min %.3f p50 %.2f p90 %.2f p99 %.2f max %.2f\n",
        round, f.late_min, f.late_p50, f.late_p90, f.late_p99, f.late_max);
    std::printf(
        "round %d: per instance completed in the storm (sleepers and traffic): %.0f us client "
        "CPU, %.0f us Redis CPU, %.1f Redis commands; CPU busy %.2f cores (other processes "
        "%.2f), busiest engine thread %.2f; %.1f Redis requests per socket write; Redis writes "
        "delayed by a slow fsync: %.0f\n",
        round, f.storm_cost.client_cpu_us, f.storm_cost.redis_cpu_us, f.storm_cost.commands,
        f.storm_cost.cores, f.storm_cost.others, f.storm_cost.busiest_part, f.storm_cost.batching,
        w.at_end.redis.delayed_fsyncs - w.at_due.redis.delayed_fsyncs);
    std::printf(
        "round %d: the window without the storm: CPU busy %.2f cores (other processes %.2f)\n",
        round, f.quiet_cost.cores, f.quiet_cost.others);
    print_per_second(log, w, round);
    print_traffic_by_second(t, f.window, f.drain_s, round);
    std::printf(
        "round %d: engine loop lag, largest by second from T - %.0f s (ms; from 10 ms, with the "
        "thread's CPU meanwhile):",
        round, f.window);
    for (double second = 0; second < f.window + f.drain_s; ++second) {
        if (second >= f.window && second < f.window + 1) std::printf(" |");
        const auto& worst = lag[static_cast<std::size_t>(second)];
        if (worst.late_ms >= 10)
            std::printf(" %.0f(ran %.0f)", worst.late_ms, worst.ran_ms);
        else
            std::printf(" %.0f", worst.late_ms);
    }
    std::printf(
        "\nround %d: new orders p50/p99 ms: without %.1f / %.1f (%zu), during %.1f / %.1f "
        "(%zu); signals: without %.1f / %.1f (%zu), during %.1f / %.1f (%zu); errors %d\n\n",
        round, f.start_without.p50, f.start_without.p99, f.start_without.samples,
        f.start_during.p50, f.start_during.p99, f.start_during.samples, f.signal_without.p50,
        f.signal_without.p99, f.signal_without.samples, f.signal_during.p50, f.signal_during.p99,
        f.signal_during.samples, f.errors);
    std::fflush(stdout);
}

// Redis's own slow events (latency-monitor-threshold 20 ms) from T - window on, in whole
// seconds from T ("command +9 s 102 ms"): whether Redis itself held requests up.
// On a cluster each primary's, named by its place ("node 2: command +9 s 102 ms").
std::string redis_spikes(service& s, time_point due, double window) {
    std::string out;
    auto t = std::chrono::duration<double>(due.time_since_epoch()).count();
    for (std::size_t node = 0; node < s.redis.nodes(); ++node) {
        std::istringstream latest(s.redis.cli(node, {"LATENCY", "LATEST"}));
        std::vector<std::string> lines;
        for (std::string line; std::getline(latest, line);) lines.push_back(line);
        std::string on_node =
            s.redis.is_cluster() ? "node " + std::to_string(node + 1) + ": " : std::string();
        for (std::size_t i = 0; i + 3 < lines.size(); i += 4) {
            std::istringstream history(s.redis.cli(node, {"LATENCY", "HISTORY", lines[i]}));
            for (double when = 0, ms = 0; history >> when >> ms;)
                if (when - t >= -window - 1) {
                    char text[96];
                    std::snprintf(text, sizeof text, "%s%s%s %+.0f s %.0f ms",
                                  out.empty() ? "" : ", ", on_node.c_str(), lines[i].c_str(),
                                  when - t, ms);
                    out += text;
                }
        }
    }
    return out;
}

void print_single_steps(const single_steps& a, const char* when, int n, int round) {
    std::printf(
        "round %d: %d single-step flows %s: %.0f/s; per flow %.0f us client CPU, %.0f us Redis "
        "CPU, %.1f Redis commands; CPU busy %.2f cores (other processes %.2f), busiest engine "
        "thread %.2f; %.1f Redis requests per socket write\n",
        round, n, when, a.per_s, a.per_flow.client_cpu_us, a.per_flow.redis_cpu_us,
        a.per_flow.commands, a.per_flow.cores, a.per_flow.others, a.per_flow.busiest_part,
        a.per_flow.batching);
    std::fflush(stdout);
}

// The single steps, before the storm's fill and again after the storm (on the store the storm
// left), so that a change in what else the machine runs moves the baseline too.
single_steps measure_single_steps(service& s, const options& o, const char* when,
                                  const std::string& prefix, int round) {
    auto a = run_single_steps(s, o, prefix);
    print_single_steps(a, when, o.instances, round);
    if (o.profile) print_profile(s, "single steps", o.instances, round);
    return a;
}

round_figures run_round(const options& o, int round) {
    service s(o.max_hot, o.cluster);
    s.redis.on_every_node({"CONFIG", "SET", "latency-monitor-threshold", "20"});
    if (o.profile) {
        s.redis.on_every_node({"CONFIG", "SET", "slowlog-log-slower-than", "0"});
        s.redis.on_every_node({"CONFIG", "SET", "slowlog-max-len", "4000000"});
    }
    round_figures f;
    f.window = o.window;
    f.a = measure_single_steps(s, o, "before the storm", "a-", round);

    auto setup = prepare_storm(s, o, f, round);
    setup.times.profile = o.profile;
    int start_cap = static_cast<int>(o.rate * (o.window + setup.times.cap + 5));
    traffic t(start_cap, std::move(setup.waiters));
    storm_watch w;
    std::vector<stall> lag;
    run_storm(s, setup.times, o.instances, o.rate, t, w, lag);

    if (!w.drained_at)
        std::printf("round %d: NOT DRAINED within %.0f s of T\n", round, setup.times.cap);
    f.drain_s = w.drained_at.value_or(w.end);
    f.drain_per_s = o.instances / f.drain_s;
    lateness_figures(s.deps.log, f);
    // Per instance completed in the window: the sleepers and the traffic sent meanwhile.
    f.storm_cost = cost_between(w.at_due, w.at_end, o.instances + sent_since(t, 0, 1e9));
    f.quiet_cost = cost_between(w.at_window, w.at_due, sent_since(t, -o.window, 0));
    f.start_without = latencies(t.starts, -o.window, 0);
    f.start_during = latencies(t.starts, 0, f.drain_s);
    f.signal_without = latencies(t.signals, -o.window, 0);
    f.signal_during = latencies(t.signals, 0, f.drain_s);
    f.errors = t.errors.load() + t.outstanding.load();
    auto spikes = redis_spikes(s, setup.times.due, o.window);
    if (o.profile) print_profile(s, "the storm", o.instances + sent_since(t, 0, 1e9), round);

    f.a_after = measure_single_steps(s, o, "after the storm", "b-", round);
    f.baseline = (f.a.per_s + f.a_after.per_s) / 2;
    print_storm(f, w, t, lag, s.deps.log, round);
    std::printf("round %d: Redis calls of 20 ms or more (LATENCY HISTORY), s from T: %s\n\n", round,
                spikes.empty() ? "none" : spikes.c_str());
    std::fflush(stdout);
    return f;
}

// "met in every round" / "not met in k of R rounds".
std::string verdict(const std::vector<round_figures>& rounds, bool (*met)(const round_figures&)) {
    long misses = std::ranges::count_if(rounds, [&](const auto& f) { return !met(f); });
    if (misses == 0) return "met in every round";
    return "NOT met in " + std::to_string(misses) + " of " + std::to_string(rounds.size()) +
           " rounds";
}

void print_summary(const options& o, const std::vector<round_figures>& rounds) {
    auto of = [&](auto figure) {
        std::vector<double> v;
        for (const auto& f : rounds) v.push_back(figure(f));
        return v;
    };
    std::printf(
        "%d instances on %s, %d clients for the closed loops, %d new orders/s and %d signals/s "
        "of other traffic, %.0f s of it without the storm\n\n",
        o.instances,
        o.cluster ? "a Redis Cluster of 3 primaries (no replicas)" : "one redis-server (AOF)",
        o.concurrency, o.rate, o.rate, o.window);
    print_table({
        {"single steps/s before", " %.0f |", of([](auto& f) { return f.a.per_s; })},
        {"after", " %.0f |", of([](auto& f) { return f.a_after.per_s; })},
        {"storm drained, timers/s", " %.0f |", of([](auto& f) { return f.drain_per_s; })},
        {"drain / single steps' mean", " %.2f |",
         of([](auto& f) { return f.drain_per_s / f.baseline; }), true},
        {"lateness p50 s", " %.2f |", of([](auto& f) { return f.late_p50; })},
        {"p99 s", " %.2f |", of([](auto& f) { return f.late_p99; })},
        {"max s", " %.2f |", of([](auto& f) { return f.late_max; })},
    });
    std::printf("\n");
    print_table({
        {"new order p99 ms, without", " %.1f |", of([](auto& f) { return f.start_without.p99; })},
        {"during", " %.1f |", of([](auto& f) { return f.start_during.p99; })},
        {"during / without", " %.2f |",
         of([](auto& f) { return f.start_during.p99 / f.start_without.p99; }), true},
        {"signal p99 ms, without", " %.1f |", of([](auto& f) { return f.signal_without.p99; })},
        {"during", " %.1f |", of([](auto& f) { return f.signal_during.p99; })},
        {"during / without", " %.2f |",
         of([](auto& f) { return f.signal_during.p99 / f.signal_without.p99; }), true},
    });
    // What else the machine ran, and how busy the engine and Redis were, in each phase.
    std::printf("\n");
    print_table({
        {"others' cores, steps before", " %.2f |", of([](auto& f) { return f.a.per_flow.others; })},
        {"storm", " %.2f |", of([](auto& f) { return f.storm_cost.others; })},
        {"steps after", " %.2f |", of([](auto& f) { return f.a_after.per_flow.others; })},
        {"bench+Redis cores, steps", " %.2f |", of([](auto& f) { return f.a.per_flow.cores; })},
        {"storm", " %.2f |", of([](auto& f) { return f.storm_cost.cores; })},
        {"CPU us/instance (client+Redis), steps", " %.0f |",
         of([](auto& f) { return f.a.per_flow.client_cpu_us + f.a.per_flow.redis_cpu_us; })},
        {"storm", " %.0f |",
         of([](auto& f) { return f.storm_cost.client_cpu_us + f.storm_cost.redis_cpu_us; })},
    });
    std::printf("\n| target | verdict |\n|---|---|\n");
    std::printf("| drained at >= 0.8x the single steps' rate | %s |\n",
                verdict(rounds, [](const round_figures& f) {
                    return f.drain_per_s >= 0.8 * f.baseline;
                }).c_str());
    std::printf("| new orders' p99 during the storm <= 3x without | %s |\n",
                verdict(rounds, [](const round_figures& f) {
                    return f.start_during.p99 <= 3 * f.start_without.p99;
                }).c_str());
    std::printf("| signals' p99 during the storm <= 3x without | %s |\n",
                verdict(rounds, [](const round_figures& f) {
                    return f.signal_during.p99 <= 3 * f.signal_without.p99;
                }).c_str());
    double worst = 0;
    for (const auto& f : rounds) worst = std::max(worst, f.late_max);
    std::printf("| no timer starved (largest lateness %.2f s) | %s |\n", worst,
                verdict(rounds, [](const round_figures& f) {
                    return f.unfired == 0 && f.errors == 0;
                }).c_str());
}

}  // namespace

int main(int argc, char** argv) {
    // Lifecycle lines would measure the terminal (as in the other benches).
    keel::log::configure({.min_level = keel::log::level::warn});
    try {
        auto o = parse(argc, argv);
        std::vector<round_figures> rounds;
        for (int r = 1; r <= o.rounds; ++r) rounds.push_back(run_round(o, r));
        print_summary(o, rounds);
        return 0;
    } catch (const std::exception& e) {
        std::cerr << "keel_storm_bench: " << e.what() << "\n";
        return 1;
    }
}
