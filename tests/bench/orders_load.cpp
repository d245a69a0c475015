// keel_orders_load: a load driver for keel-orders on loopback, and the cost of one order flow.
// Each round starts its own redis-server (AOF, fsync as chosen) and its own keel-orders, then
// pushes N orders through create -> pay -> deliver with C concurrent clients (a keep-alive
// connection each; each on a thread of its own, or with --driver loop all on one thread's
// event loop: flow_driver.hpp). It reports completed flows per second, the latency from the
// payment webhook's response to the order reading `shipped` (the signal-to-resume path of a
// durable process seen from outside; resolution: the poll interval), and per flow: CPU time
// (utime + stime) of keel-orders and of redis-server, the driver's own (getrusage), Redis
// commands by kind (INFO commandstats), bytes to and from Redis and bytes appended to the AOF;
// and the share of the machine's CPU time that was idle meanwhile, which tells the regime a
// round ran in (docs/benchmarks.md, "Two regimes of this VM").
//
// The driver polls (GET /orders/{id} until shipped, GET .../fulfillment until completed);
// read phases after the load price one poll of each kind, so that the figures are also given
// net of polls. Beside Keel, in the same round, the floor: the Redis work a flow cannot avoid
// (flow_floor.hpp), sent by a raw loop on keel::redis::connection to a redis-server of its
// own with the same fsync policy, and the flow's three requests answered by keel_http_floor,
// a bare Beast server that stores nothing (http_floor_server.cpp). The floor runs twice: as
// fast as its clients go, and (--floor-pace 1, the default) once more right after Keel's load
// at the rate Keel reached in it, since a server's CPU per request depends on how many
// requests each of its wake-ups finds. Figures are medians over the rounds; the ratios (Keel
// net of polls over the floor) are medians of the per-round ratios.
//
//   keel_orders_load [--orders 1000] [--concurrency 32] [--threads 2]
//                    [--aof always|everysec|off] [--rounds 1] [--floor 1] [--floor-pace 1]
//                    [--floor-flows 5000]
//                    [--reads 2000] [--census 0] [--poll-ms 1] [--max-seconds 300]
//                    [--keep-aof DIR] [--perf DIR] [--perf-args "-F 499 --call-graph dwarf,16384"]
//                    [--binary PATH] [--http-floor PATH] [--baseline PATH]
//                    [--baseline-threads T] [--driver threads|loop]
//                    [--redis-config NAME=VALUE]...
//
// --baseline PATH measures another keel-orders binary (an earlier build) in every round too,
// on servers of its own, and reports this build's figures as ratios to it; with
// --baseline-threads T the baseline runs with --threads T (the same binary with --threads 1
// and 2 in one run: `--threads 2 --baseline <this keel-orders> --baseline-threads 1`).
// --redis-config NAME=VALUE passes a directive to this build's redis-server only (the
// baseline's and the floor's keep Redis's defaults): with `--baseline <this keel-orders>`, a
// setting's cost is measured in the same rounds.
// --census N runs one more keel-orders load of N flows with SLOWLOG at threshold 0 and prints
// the top-level commands per flow by kind (scripts named by their keys and arguments), the
// commands each script runs, and Redis's time in each. --perf DIR records `perf record`
// profiles of keel-orders and redis-server during each round's load. --keep-aof DIR copies the
// AOF each side wrote (DIR/keel.aof, DIR/floor.aof) for flow_aof.py. tests/bench/flow_cost.sh
// runs every configuration of docs/benchmarks.md ("The cost of one order flow") and profiles.

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <keel/test/redis_server.hpp>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "flow_driver.hpp"
#include "flow_floor.hpp"
#include "flow_measure.hpp"
#include "service_process.hpp"

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using keel::http::status;
namespace asio = boost::asio;
using json = nlohmann::json;
namespace bench = keel::bench;

struct options {
    int orders = 1000;
    int concurrency = 32;
    int threads = 2;
    std::string aof = "always";
    int rounds = 1;
    bool floor = true;
    bool floor_pace = true;  // also the floor at Keel's rate
    int floor_flows = 5000;
    int reads = 2000;
    int census = 0;
    int poll_ms = 1;
    int max_seconds = 300;
    std::string perf_dir;
    std::string keep_aof;
    std::string perf_args = "-F 499 --call-graph dwarf,16384";
#ifdef KEEL_ORDERS_BINARY
    std::string binary = KEEL_ORDERS_BINARY;
#else
    std::string binary;
#endif
#ifdef KEEL_HTTP_FLOOR_BINARY
    std::string http_floor = KEEL_HTTP_FLOOR_BINARY;
#else
    std::string http_floor;
#endif
    std::string baseline;      // another keel-orders, measured in the same rounds
    int baseline_threads = 0;  // its --threads; 0: as this build's
    std::vector<std::string> redis_config;  // "--name", "value", ... for this build's Redis
    bench::driver_mode driver = bench::driver_mode::threads;
};

const char* usage =
    "usage: keel_orders_load [--orders N] [--concurrency C] [--threads T]\n"
    "                        [--aof always|everysec|off] [--rounds R] [--floor 0|1]\n"
    "                        [--floor-pace 0|1] [--floor-flows N] [--reads N] [--census N] "
    "[--poll-ms MS]\n"
    "                        [--max-seconds S] [--keep-aof DIR]\n"
    "                        [--perf DIR] [--perf-args ARGS] [--binary PATH]\n"
    "                        [--http-floor PATH]\n"
    "                        [--baseline PATH] [--baseline-threads T] [--driver threads|loop]\n"
    "                        [--redis-config NAME=VALUE]...\n";

std::optional<int> number(const char* text, int low, int high) {
    char* end = nullptr;
    long v = std::strtol(text, &end, 10);
    if (end == text || *end != '\0' || v < low || v > high) return std::nullopt;
    return static_cast<int>(v);
}

// One flag and its value; false when either is wrong.
bool parse_flag(options& o, const std::string& flag, const char* value) {
    std::optional<int> n;
    std::string text = value;
    if (flag == "--orders" && (n = number(value, 1, 1'000'000)))
        o.orders = *n;
    else if (flag == "--concurrency" && (n = number(value, 1, 1024)))
        o.concurrency = *n;
    else if (flag == "--threads" && (n = number(value, 1, 256)))
        o.threads = *n;
    else if (flag == "--baseline-threads" && (n = number(value, 1, 256)))
        o.baseline_threads = *n;
    else if (flag == "--rounds" && (n = number(value, 1, 100)))
        o.rounds = *n;
    else if (flag == "--floor" && (n = number(value, 0, 1)))
        o.floor = *n == 1;
    else if (flag == "--floor-pace" && (n = number(value, 0, 1)))
        o.floor_pace = *n == 1;
    else if (flag == "--floor-flows" && (n = number(value, 1, 10'000'000)))
        o.floor_flows = *n;
    else if (flag == "--reads" && (n = number(value, 0, 1'000'000)))
        o.reads = *n;
    else if (flag == "--census" && (n = number(value, 0, 100'000)))
        o.census = *n;
    else if (flag == "--poll-ms" && (n = number(value, 0, 1000)))
        o.poll_ms = *n;
    else if (flag == "--max-seconds" && (n = number(value, 1, 86'400)))
        o.max_seconds = *n;
    else if (flag == "--aof" && (text == "always" || text == "everysec" || text == "off"))
        o.aof = text;
    else if (flag == "--perf")
        o.perf_dir = text;
    else if (flag == "--keep-aof")
        o.keep_aof = text;
    else if (flag == "--perf-args")
        o.perf_args = text;
    else if (flag == "--binary")
        o.binary = text;
    else if (flag == "--http-floor")
        o.http_floor = text;
    else if (flag == "--baseline")
        o.baseline = text;
    else if (auto eq = text.find('=');
             flag == "--redis-config" && eq != std::string::npos && eq > 0) {
        o.redis_config.push_back("--" + text.substr(0, eq));
        o.redis_config.push_back(text.substr(eq + 1));
    } else if (auto mode = flag == "--driver" ? bench::parse_driver_mode(text) : std::nullopt)
        o.driver = *mode;
    else
        return false;
    return true;
}

std::optional<options> parse(int argc, char** argv) {
    options o;
    for (int i = 1; i < argc; ++i) {
        std::string flag = argv[i];
        if (flag == "--help" || flag == "-h") {
            std::cout << usage;
            std::exit(0);
        }
        if (i + 1 >= argc) {
            std::cerr << "missing value for " << flag << "\n" << usage;
            return std::nullopt;
        }
        const char* value = argv[++i];
        if (!parse_flag(o, flag, value)) {
            std::cerr << "bad option or value: " << flag << " " << value << "\n" << usage;
            return std::nullopt;
        }
    }
    if (o.binary.empty()) {
        std::cerr << "no keel-orders binary: pass --binary PATH\n";
        return std::nullopt;
    }
    if (o.floor && o.http_floor.empty()) {
        std::cerr << "no keel_http_floor binary: pass --http-floor PATH (or --floor 0)\n";
        return std::nullopt;
    }
    return o;
}

// ---- the load: whole flows over HTTP ----

struct flow_outcome {
    bool ok = false;
    double pay_to_shipped_ms = 0;
    double flow_ms = 0;  // the whole flow, create to completed
    std::string error;
};

// What a flow waits for: keel-orders' whole flow, or (the HTTP floor) only the answers to
// its three requests.
enum class flow_kind { durable, requests_only };

class load {
  public:
    // `pace`: flows started per second, evenly spaced (0: each client starts its next flow
    // as soon as its last one ends).
    load(const options& o, int orders, std::uint16_t port, flow_kind kind = flow_kind::durable,
         double pace = 0)
        : options_(o),
          orders_(orders),
          port_(port),
          kind_(kind),
          pace_(pace),
          deadline_(clock_type::now() + std::chrono::seconds(o.max_seconds)) {}

    void run() {
        started_ = clock_type::now();
        bench::run_clients(options_.driver, options_.concurrency,
                           [this](asio::any_io_executor ex, int) { return work(std::move(ex)); });
    }

    const std::vector<flow_outcome>& outcomes() const { return outcomes_; }
    // The GETs the driver sent while waiting for `shipped` and for `completed`.
    long order_polls() const { return order_polls_; }
    long fulfillment_polls() const { return fulfillment_polls_; }

  private:
    asio::awaitable<void> work(asio::any_io_executor ex) {
        bench::http_connection client(ex, port_);
        for (;;) {
            int n = next_.fetch_add(1);
            if (n >= orders_ || clock_type::now() > deadline_) co_return;
            if (pace_ > 0)
                co_await bench::sleep_until(started_ +
                                            std::chrono::duration_cast<clock_type::duration>(
                                                std::chrono::duration<double>(n / pace_)));
            flow_outcome out;
            auto began = clock_type::now();
            try {
                out = co_await flow(client, "load-" + std::to_string(n));
                out.flow_ms =
                    std::chrono::duration<double, std::milli>(clock_type::now() - began).count();
            } catch (const std::exception& e) {
                out.error = e.what();
                client = bench::http_connection(ex, port_);
            }
            std::lock_guard lock(mutex_);
            outcomes_.push_back(std::move(out));
        }
    }

    // Polls `target` until its JSON `status` is `wanted`; returns when it was first seen.
    asio::awaitable<std::optional<clock_type::time_point>> wait_status(
        bench::http_connection& client, const std::string& target, const std::string& wanted,
        std::chrono::milliseconds interval, std::atomic<long>& polls, std::string& last) {
        auto give_up = std::min(deadline_, clock_type::now() + 30s);
        while (clock_type::now() < give_up) {
            auto res = co_await client.get(target);
            ++polls;
            if (res.status == status::ok) {
                auto body = json::parse(res.body, nullptr, false);
                if (!body.is_discarded() && body.value("status", "") == wanted)
                    co_return clock_type::now();
            }
            last = std::to_string(keel::http::to_int(res.status)) + " " + res.body;
            if (interval.count() > 0) co_await bench::sleep_for(interval);
        }
        co_return std::nullopt;
    }

    asio::awaitable<flow_outcome> flow(bench::http_connection& client, const std::string& id) {
        flow_outcome out;
        // (Bodies as locals: g++ 12 cannot keep a braced list's array across a co_await.)
        json order{
            {"id", id}, {"email", id + "@example.com"}, {"address", "1 Load Lane"}, {"total", 9.5}};
        auto created = co_await client.post_json("/orders", order);
        if (created.status != status::created) {
            out.error = "create " + id + ": " + created.body;
            co_return out;
        }
        json payment{{"orderId", id}, {"transactionId", "tx-" + id}, {"amount", 9.5}};
        auto paid = co_await client.post_json("/webhooks/payment", payment);
        auto acknowledged = clock_type::now();
        if (paid.status != status::ok) {
            out.error = "pay " + id + ": " + paid.body;
            co_return out;
        }
        if (kind_ == flow_kind::requests_only) co_return co_await deliver(client, id);
        std::string last;
        auto shipped =
            co_await wait_status(client, "/orders/" + id, "shipped",
                                 std::chrono::milliseconds(options_.poll_ms), order_polls_, last);
        if (!shipped) {
            out.error = id + " never shipped; last " + last;
            co_return out;
        }
        out.pay_to_shipped_ms =
            std::chrono::duration<double, std::milli>(*shipped - acknowledged).count();
        if (auto delivered = co_await deliver(client, id); !delivered.ok) co_return delivered;
        auto completion_poll = std::chrono::milliseconds(std::max(options_.poll_ms, 5));
        if (!co_await wait_status(client, "/orders/" + id + "/fulfillment", "completed",
                                  completion_poll, fulfillment_polls_, last)) {
            out.error = id + " never completed; last " + last;
            co_return out;
        }
        out.ok = true;
        co_return out;
    }

    // The delivery webhook: ok when it was answered 200 (the requests-only flow's end).
    asio::awaitable<flow_outcome> deliver(bench::http_connection& client, const std::string& id) {
        flow_outcome out;
        json delivery{{"orderId", id}};
        auto delivered = co_await client.post_json("/webhooks/delivered", delivery);
        out.ok = delivered.status == status::ok;
        if (!out.ok) out.error = "deliver " + id + ": " + delivered.body;
        co_return out;
    }

    const options& options_;
    int orders_;
    std::uint16_t port_;
    flow_kind kind_;
    double pace_;
    clock_type::time_point started_;
    clock_type::time_point deadline_;
    std::atomic<int> next_{0};
    std::atomic<long> order_polls_{0};
    std::atomic<long> fulfillment_polls_{0};
    std::mutex mutex_;
    std::vector<flow_outcome> outcomes_;
};

// `reads` GETs of target(i) by `concurrency` clients; returns how many did not answer 200.
int read_phase(const options& o, std::uint16_t port, int reads,
               const std::function<std::string(int)>& target) {
    std::atomic<int> next{0};
    std::atomic<int> failed{0};
    bench::run_clients(o.driver, o.concurrency,
                       [&](asio::any_io_executor ex, int) -> asio::awaitable<void> {
                           bench::http_connection client(ex, port);
                           for (int i; (i = next.fetch_add(1)) < reads;)
                               if ((co_await client.get(target(i))).status != status::ok) ++failed;
                       });
    return failed;
}

double percentile(const std::vector<double>& sorted, double p) {
    if (sorted.empty()) return 0;
    auto rank = static_cast<std::size_t>(p * static_cast<double>(sorted.size() - 1) + 0.5);
    return sorted[std::min(rank, sorted.size() - 1)];
}

// ---- perf record, attached to a process for the load phase ----

class perf_recorder {
  public:
    perf_recorder(const options& o, pid_t pid, const std::string& name) {
        if (o.perf_dir.empty()) return;
        auto perf = keel::test::find_program("perf");
        if (perf.empty()) throw std::runtime_error("--perf: perf is not in PATH");
        std::vector<std::string> args{perf, "record", "-o", o.perf_dir + "/" + name + ".data"};
        std::istringstream extra(o.perf_args);
        for (std::string a; extra >> a;) args.push_back(a);
        args.insert(args.end(), {"-p", std::to_string(pid)});
        spawn(args, o.perf_dir + "/" + name + ".log");
    }
    ~perf_recorder() { stop(); }
    perf_recorder(const perf_recorder&) = delete;
    perf_recorder& operator=(const perf_recorder&) = delete;

    void stop() {
        if (pid_ <= 0) return;
        ::kill(pid_, SIGINT);
        ::waitpid(pid_, nullptr, 0);
        pid_ = -1;
    }

  private:
    void spawn(const std::vector<std::string>& args, const std::string& log) {
        std::vector<char*> argv;
        for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) throw std::runtime_error("--perf: cannot write " + log);
        std::fflush(nullptr);  // nothing buffered here is written twice by the child
        pid_ = ::fork();
        if (pid_ == 0) {
            ::dup2(fd, STDOUT_FILENO);
            ::dup2(fd, STDERR_FILENO);
            ::execv(argv[0], argv.data());
            ::_exit(127);
        }
        ::close(fd);
        std::this_thread::sleep_for(500ms);  // perf attaches before the load begins
    }

    pid_t pid_ = -1;
};

// ---- figures ----

// One round's figures by name: "<side>.<figure>", sides keel (as driven), net (keel net of
// the driver's polls), floor, read_order and read_fulfillment (per read); "ratio.<figure>".
using figures = std::map<std::string, double>;

// Per unit (a flow or a read): CPU in microseconds, bytes, commands.
void add_costs(figures& f, const std::string& side, const bench::phase_cost& p, double units) {
    if (units <= 0) return;
    f[side + ".service_cpu_us"] = p.service_cpu / units * 1e6;
    f[side + ".redis_cpu_us"] = p.redis.cpu_seconds / units * 1e6;
    f[side + ".driver_cpu_us"] = p.driver_cpu / units * 1e6;
    f[side + ".calls"] = p.redis.calls() / units;
    f[side + ".aof_bytes"] = p.redis.aof_bytes / units;
    f[side + ".net_in"] = p.redis.net_in / units;
    f[side + ".net_out"] = p.redis.net_out / units;
    f[side + ".reads"] = p.redis.reads / units;
    f[side + ".writes"] = p.redis.writes / units;
    for (const auto& [name, s] : p.redis.commands) {
        f[side + ".cmd." + name + ".calls"] = s.calls / units;
        f[side + ".cmd." + name + ".usec"] = s.usec / units;
    }
    if (p.redis.aof_rewrites > 0) f[side + ".aof_rewritten"] = 1;
    f[side + ".idle_pct"] = p.idle_share * 100;
}

double get(const figures& f, const std::string& key) {
    auto it = f.find(key);
    return it == f.end() ? 0 : it->second;
}

bool is_cost(const std::string& figure) {
    for (const auto* cost : {"service_cpu_us", "redis_cpu_us", "driver_cpu_us", "calls",
                             "aof_bytes", "net_in", "net_out", "reads", "writes"})
        if (figure == cost) return true;
    return figure.starts_with("cmd.");
}

// keel minus the polls' share, for every cost figure.
void add_net_of_polls(figures& f) {
    double order = get(f, "keel.order_polls");
    double fulfillment = get(f, "keel.fulfillment_polls");
    figures net;
    for (const auto& [key, value] : f) {
        if (!key.starts_with("keel.") || !is_cost(key.substr(5))) continue;
        auto rest = key.substr(5);
        net["net." + rest] = value - order * get(f, "read_order." + rest) -
                             fulfillment * get(f, "read_fulfillment." + rest);
    }
    f.insert(net.begin(), net.end());
}

// Keel net of polls (as driven when the polls were not priced) over the floor; for the CPU
// of the whole flow, keel-orders and its Redis over the floor's Redis and the HTTP floor.
void add_ratios(figures& f) {
    auto keel = [&](const std::string& figure) {
        return get(f, f.contains("net." + figure) ? "net." + figure : "keel." + figure);
    };
    for (const auto* name : {"redis_cpu_us", "calls", "aof_bytes", "net_in"}) {
        std::string figure = name;
        double floor = get(f, "floor." + figure);
        if (floor > 0) f["ratio." + figure] = keel(figure) / floor;
    }
    f["keel.flow_cpu_us"] = keel("service_cpu_us") + keel("redis_cpu_us");
    for (const auto* side : {"floor", "paced"}) {
        std::string s = side;
        if (get(f, s + ".http_cpu_us") <= 0) continue;
        double floor_cpu = get(f, s + ".redis_cpu_us") + get(f, s + ".http_cpu_us");
        f[s + ".flow_cpu_us"] = floor_cpu;
        f[(s == "floor" ? "ratio" : "ratio_paced") + std::string(".flow_cpu_us")] =
            get(f, "keel.flow_cpu_us") / floor_cpu;
        if (s == "paced" && get(f, "paced.redis_cpu_us") > 0)
            f["ratio_paced.redis_cpu_us"] = keel("redis_cpu_us") / get(f, "paced.redis_cpu_us");
    }
}

figures medians(const std::vector<figures>& rounds) {
    std::map<std::string, std::vector<double>> all;
    for (const auto& r : rounds)
        for (const auto& [key, _] : r) all[key];
    for (auto& [key, values] : all)
        for (const auto& r : rounds) values.push_back(get(r, key));
    figures out;
    for (auto& [key, values] : all) out[key] = bench::median(values);
    return out;
}

// ---- a round ----

keel::test::redis_server_options redis_options_of(const options& o) {
    keel::test::redis_server_options r;
    r.appendonly = o.aof != "off";
    if (r.appendonly) r.appendfsync = o.aof;
    return r;
}

keel::e2e::service_options service_options_of(const options& o, const std::string& url) {
    return {.binary = o.binary, .redis_url = url, .threads = o.threads, .log_level = "warn"};
}

// A flow this slow is a stall (a wake-up lost until a lease expires, say), not load: one in
// a round stretches its wall time, and with it flows/s and the CPU per flow.
constexpr double stalled_flow_ms = 1000;

struct load_result {
    std::vector<double> latencies;  // sorted
    double slowest_flow_ms = 0;
    int stalled_flows = 0;
    std::vector<std::string> errors;
    std::size_t not_run = 0;
    double wall = 0;
};

load_result summarise(const load& driver, int orders, double wall) {
    load_result r;
    r.wall = wall;
    for (const auto& f : driver.outcomes()) {
        if (f.ok) {
            r.latencies.push_back(f.pay_to_shipped_ms);
            r.slowest_flow_ms = std::max(r.slowest_flow_ms, f.flow_ms);
            if (f.flow_ms > stalled_flow_ms) ++r.stalled_flows;
        } else
            r.errors.push_back(f.error);
    }
    std::sort(r.latencies.begin(), r.latencies.end());
    r.not_run = static_cast<std::size_t>(orders) - driver.outcomes().size();
    return r;
}

// The AOF that `redis` appended to (Redis 7: appendonlydir/*.incr.aof) copied to DIR/<name>.aof.
void keep_aof(const options& o, const keel::test::redis_server& redis, const std::string& name) {
    namespace fs = std::filesystem;
    if (o.keep_aof.empty()) return;
    fs::create_directories(o.keep_aof);
    for (const auto& f : fs::directory_iterator(fs::path(redis.dir()) / "appendonlydir"))
        if (f.path().string().ends_with(".incr.aof"))
            fs::copy_file(f.path(), fs::path(o.keep_aof) / (name + ".aof"),
                          fs::copy_options::overwrite_existing);
}

// The read phases: one poll of each kind, priced per read.
void price_polls(const options& o, keel::e2e::service_process& service, bench::phase_meter& meter,
                 int orders, figures& f) {
    auto order = [orders](int i) { return "/orders/load-" + std::to_string(i % orders); };
    auto fulfillment = [&](int i) { return order(i) + "/fulfillment"; };
    for (const auto& [side, target] :
         {std::pair{std::string("read_order"), std::function<std::string(int)>(order)},
          std::pair{std::string("read_fulfillment"),
                    std::function<std::string(int)>(fulfillment)}}) {
        meter.start();
        int failed = read_phase(o, service.port(), o.reads, target);
        add_costs(f, side, meter.stop(), o.reads);
        if (failed > 0) throw std::runtime_error(side + ": " + std::to_string(failed) + " failed");
    }
}

// Keel's side of a round: the load, then the read phases. False when a flow failed.
bool keel_round(const options& o, figures& f) {
    auto settings = redis_options_of(o);
    settings.extra_args = o.redis_config;
    keel::test::redis_server redis(settings);
    keel::e2e::service_process service(service_options_of(o, redis.url()));
    bench::redis_probe probe(redis.url());
    bench::phase_meter meter(probe, service.pid());
    load driver(o, o.orders, service.port());
    bench::phase_cost cost;
    {
        perf_recorder keel_perf(o, service.pid(), "keel-orders");
        perf_recorder redis_perf(o, probe.server_pid(), "redis-server");
        meter.start();
        driver.run();
        cost = meter.stop();
    }
    auto r = summarise(driver, o.orders, cost.wall_seconds);
    double completed = static_cast<double>(r.latencies.size());
    f["keel.completed"] = completed;
    f["keel.flows_s"] = completed / r.wall;
    f["keel.p50_ms"] = percentile(r.latencies, 0.50);
    f["keel.p99_ms"] = percentile(r.latencies, 0.99);
    f["keel.max_ms"] = r.latencies.empty() ? 0 : r.latencies.back();
    f["keel.slowest_flow_ms"] = r.slowest_flow_ms;
    f["keel.stalled_flows"] = r.stalled_flows;
    if (r.stalled_flows > 0)
        std::printf("  %d flow(s) took over %.0f ms, the slowest %.0f ms: a stall, not load\n",
                    r.stalled_flows, stalled_flow_ms, r.slowest_flow_ms);
    f["keel.order_polls"] = static_cast<double>(driver.order_polls()) / completed;
    f["keel.fulfillment_polls"] = static_cast<double>(driver.fulfillment_polls()) / completed;
    add_costs(f, "keel", cost, completed);
    for (std::size_t i = 0; i < r.errors.size() && i < 5; ++i)
        std::printf("  error: %s\n", r.errors[i].c_str());
    bool ok = r.errors.empty() && r.not_run == 0;
    keep_aof(o, redis, "keel");
    if (ok && o.reads > 0) price_polls(o, service, meter, o.orders, f);
    int code = service.stop();
    bool clean = code >= 0 && WIFEXITED(code) && WEXITSTATUS(code) == 0;
    if (!clean) std::printf("  the service did not stop cleanly (status %d)\n", code);
    if (!ok || !clean) service.print_log();
    return ok && clean;
}

// The HTTP half of the floor: the flow's three requests against keel_http_floor (a bare
// Beast server that answers them as keel-orders does and stores nothing), its CPU per flow
// as <side>.http_cpu_us. `probe` is the floor's Redis, idle meanwhile. False when one failed.
bool http_floor_phase(const options& o, bench::redis_probe& probe, const std::string& side,
                      double pace, figures& f) {
    keel::e2e::service_process server(
        {.binary = o.http_floor, .redis_url = "unused", .threads = 1, .log_level = "warn"});
    bench::phase_meter meter(probe, server.pid());
    load driver(o, o.floor_flows, server.port(), flow_kind::requests_only, pace);
    meter.start();
    driver.run();
    auto cost = meter.stop();
    auto r = summarise(driver, o.floor_flows, cost.wall_seconds);
    double completed = static_cast<double>(r.latencies.size());
    if (completed > 0) {
        f[side + ".http_flows_s"] = completed / r.wall;
        f[side + ".http_cpu_us"] = cost.service_cpu / completed * 1e6;
        f[side + ".http_driver_cpu_us"] = cost.driver_cpu / completed * 1e6;
    }
    for (std::size_t i = 0; i < r.errors.size() && i < 5; ++i)
        std::printf("  HTTP floor error: %s\n", r.errors[i].c_str());
    server.stop();
    return r.errors.empty() && r.not_run == 0;
}

// The floor's side of a round, its figures under `side`: as fast as its clients go (pace 0,
// side "floor"), or at `pace` flows per second (side "paced": Keel's rate in the round).
// False when a flow failed.
bool floor_round(const options& o, const std::string& side, double pace, figures& f) {
    keel::test::redis_server redis(redis_options_of(o));
    bench::redis_probe probe(redis.url());
    bench::flow_floor floor({.redis_url = redis.url(),
                             .flows = o.floor_flows,
                             .concurrency = o.concurrency,
                             .pace = pace});
    bench::phase_meter meter(probe, -1);
    meter.start();
    auto out = floor.run();
    auto cost = meter.stop();
    keep_aof(o, redis, side);
    double completed = out.completed;
    f[side + ".completed"] = completed;
    f[side + ".flows_s"] = completed / out.wall_seconds;
    f[side + ".requests"] = static_cast<double>(out.requests) / completed;
    f[side + ".writes"] = static_cast<double>(out.writes) / completed;
    add_costs(f, side, cost, completed);
    if (out.failed > 0)
        std::printf("  %s: %d failed: %s\n", side.c_str(), out.failed, out.first_error.c_str());
    bool http_ok = http_floor_phase(o, probe, side, pace, f);
    return http_ok && out.failed == 0 && out.completed == o.floor_flows;
}

// ---- the census: top-level commands by kind, from SLOWLOG ----

// The last segment of a key ("keel:{4}:i:order/o-1/fulfillment:meta" -> "meta").
std::string suffix(const std::string& key) {
    auto colon = key.rfind(':');
    return colon == std::string::npos ? key : key.substr(colon + 1);
}

bool numeric(const std::string& s) {
    return !s.empty() &&
           std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A script named by what it is given: its keys (by their last segment) and arguments.
std::string script_label(const std::vector<std::string>& a) {
    std::size_t nkeys = a.size() > 2 ? std::stoul(a[2]) : 0;
    std::vector<std::string> keys, argv;
    for (std::size_t i = 3; i < a.size(); ++i) (i < 3 + nkeys ? keys : argv).push_back(a[i]);
    std::size_t total = argv.size();
    if (!argv.empty() && argv.back().starts_with("... (")) {  // SLOWLOG keeps 32 arguments
        total = argv.size() - 1 + std::stoul(argv.back().substr(5));
    }
    auto first = keys.empty() ? std::string() : suffix(keys[0]);
    auto arg = [&](std::size_t i) { return i < argv.size() ? argv[i] : std::string(); };
    if (nkeys == 3 && first == "doc") return "entity lock: acquire (+ read)";
    if (nkeys == 2 && first == "doc") return "entity save";
    if (nkeys == 1 && first == "lock")
        return total == 1 ? "entity lock: release" : "entity lock: renew";
    if (nkeys == 3 && first == "meta") return "process: append (step commit)";
    // A commit that writes entity documents too (context::update) has two keys more each.
    if (nkeys > 3 && nkeys % 2 == 1 && first == "meta" && suffix(keys[3]) == "doc")
        return "process: append + entity write";
    if (nkeys > 8 && nkeys % 2 == 0 && first == "meta" && suffix(keys[8]) == "doc")
        return arg(1).starts_with("/") ? "process: start + entity write"
                                       : "process: commit (general) + entity write";
    if (nkeys == 8 && first == "meta") {
        if (total == 1) return "process: load";
        if (total == 3) return "process: release lease";
        if (total == 5 && arg(2).starts_with("/")) return "process: deliver";
        // acquire.lua: id, worker, now (ms), ttl, load; renew.lua: id, worker, epoch, now, ttl.
        if (total >= 5 && numeric(arg(2)) && arg(2).size() >= 12)
            return arg(4).empty() ? "process: acquire lease" : "process: take (lease + instance)";
        if (total == 5) return "process: renew lease";
        if (total >= 19) return "process: commit (general)";
        if (total >= 6 && arg(1).starts_with("/")) return "process: start";
    }
    // A fan-out's keys are subscription sets ("<prefix>:{<shard>}:sub:<signal key>").
    if (!keys.empty() && keys[0].find("}:sub:") != std::string::npos)
        return nkeys > 1 ? "process: fan-out (every shard, one server)"
                         : "process: fan-out (per shard)";
    if (nkeys == 1 && first == "wake") {
        if (total == 4) return "process: claim due (wake loop, per shard)";
        if (total == 8) return "process: list (per shard)";
    }
    return "script " + (a.size() > 1 ? a[1].substr(0, 8) : "?") + " keys " + std::to_string(nkeys);
}

std::string command_label(const std::vector<std::string>& a) {
    if (a.empty()) return "?";
    std::string name = a[0];
    std::transform(name.begin(), name.end(), name.begin(), ::toupper);
    if (name == "EVALSHA" || name == "EVAL") return script_label(a);
    if (a.size() > 1 && a[1].find(":fan_out:") != std::string::npos) return name + " fan-out memo";
    if (a.size() > 1 && suffix(a[1]) == "doc") return name + " document";
    if (a.size() > 1 && suffix(a[1]) == "wake") return name + " wake index (next due)";
    return name;
}

struct census_row {
    double calls = 0;
    double usec = 0;                        // as SLOWLOG measured it
    double inside = 0;                      // commands the script ran
    double inside_usec = 0;                 // ... their own time, as SLOWLOG measured it
    std::map<std::string, double> by_name;  // ... by command
};

bool is_script(const std::string& label) {
    return label.starts_with("process:") || label.starts_with("entity") ||
           label.starts_with("script");
}

// Top-level commands by label; the commands a script ran (recorded just before it) go to it.
std::map<std::string, census_row> tally(const std::vector<bench::slowlog_entry>& entries) {
    std::map<std::string, census_row> by;
    std::vector<const bench::slowlog_entry*> inside;
    for (const auto& e : entries) {
        if (e.in_script) {
            inside.push_back(&e);
            continue;
        }
        auto label = command_label(e.args);
        if (label != "SLOWLOG" && label != "CONFIG" && label != "INFO") {
            auto& row = by[label];
            row.calls += 1;
            row.usec += e.usec;
            row.inside += static_cast<double>(inside.size());
            for (const auto* n : inside) {
                row.by_name[command_label({n->args[0]})] += 1;
                row.inside_usec += n->usec;
            }
        }
        inside.clear();
    }
    return by;
}

// Takes `polls` calls out of a row (each poll is one such call), its time in proportion.
void take_out(census_row& row, long polls) {
    if (row.calls <= 0) return;
    double keep = std::max(0.0, row.calls - static_cast<double>(polls)) / row.calls;
    row.usec *= keep;
    row.inside *= keep;
    row.inside_usec *= keep;
    for (auto& [_, n] : row.by_name) n *= keep;
    row.calls *= keep;
}

// SLOWLOG's own cost per command it records inside a script, in microseconds: what the
// scripts took in the census beyond what commandstats measured without SLOWLOG.
double slowlog_cost(const std::map<std::string, census_row>& by, double flows, const figures& m) {
    double usec = 0, inside = 0;
    for (const auto& [label, row] : by)
        if (is_script(label)) usec += row.usec, inside += row.inside;
    double measured = get(m, "net.cmd.evalsha.usec") * flows;
    if (measured <= 0 || inside <= 0) return 0;
    return std::max(0.0, (usec - measured) / inside);
}

void print_census(const std::map<std::string, census_row>& by, double flows, double k) {
    std::vector<std::pair<std::string, census_row>> rows(by.begin(), by.end());
    auto cost = [k](const census_row& r) { return r.usec - k * r.inside; };
    std::sort(rows.begin(), rows.end(),
              [&](const auto& a, const auto& b) { return cost(a.second) > cost(b.second); });
    double calls = 0, total = 0, scripts = 0;
    for (const auto& [label, r] : rows) {
        calls += r.calls;
        total += cost(r);
        if (is_script(label)) scripts += r.calls;
    }
    std::printf("  %-42s %7s %8s %9s %6s\n", "top-level command", "calls", "inside", "redis us",
                "share");
    for (const auto& [label, r] : rows) {
        if (r.calls <= 0) continue;
        std::printf("  %-42s %7.2f %8.1f %9.1f %5.1f%%\n", label.c_str(), r.calls / flows,
                    r.inside / r.calls, cost(r) / flows, 100 * cost(r) / total);
        if (!is_script(label)) continue;
        std::string inside;
        for (const auto& [name, n] : r.by_name) {
            char buf[64];
            std::snprintf(buf, sizeof buf, " %s %.2f", name.c_str(), n / r.calls);
            inside += buf;
        }
        std::printf("  %-42s   runs per call:%s\n", "", inside.c_str());
        std::printf("  %-42s   their own time %.1f us per call, the script's beyond them %.1f us\n",
                    "", r.inside_usec / r.calls, (cost(r) - r.inside_usec) / r.calls);
    }
    std::printf("  %-42s %7.2f %8s %9.1f  (%.2f of them scripts)\n", "total", calls / flows, "",
                total / flows, scripts / flows);
    std::printf("census_summary top_level_per_flow=%.2f scripts_per_flow=%.2f\n", calls / flows,
                scripts / flows);
}

// One more load with SLOWLOG on: top-level commands per flow by kind, net of the driver's
// polls (each poll is one top-level command: a GET of the order's document, or the load of
// its process). "redis us" has SLOWLOG's own cost taken out (see slowlog_cost).
void census(const options& o, const figures& m) {
    keel::test::redis_server redis(redis_options_of(o));
    keel::e2e::service_process service(service_options_of(o, redis.url()));
    bench::redis_probe probe(redis.url());
    bench::start_slowlog(probe);
    load driver(o, o.census, service.port());
    driver.run();
    auto by = tally(bench::read_slowlog(probe));
    service.stop();
    take_out(by["GET document"], driver.order_polls());
    take_out(by["process: load"], driver.fulfillment_polls());
    double flows = static_cast<double>(o.census);
    double k = slowlog_cost(by, flows, m);
    std::printf(
        "\ncensus of %d flows (SLOWLOG at threshold 0), per flow, net of the driver's "
        "polls (%ld + %ld taken out);\n\"inside\": commands a script runs per call; "
        "SLOWLOG's cost, %.2f us per command recorded inside a script, taken out\n",
        o.census, driver.order_polls(), driver.fulfillment_polls(), k);
    print_census(by, flows, k);
}

// ---- the report ----

void print_row(const figures& m, const char* label, const std::string& figure, bool net, bool floor,
               const char* ratio = nullptr) {
    auto value = [&](const std::string& side) {
        auto key = side + "." + figure;
        char buf[32] = "-";
        if (m.contains(key)) std::snprintf(buf, sizeof buf, "%.1f", get(m, key));
        return std::string(buf);
    };
    std::printf("  %-32s %12s %12s %12s", label, value("keel").c_str(),
                net ? value("net").c_str() : "", floor ? value("floor").c_str() : "");
    if (ratio && m.contains(std::string("ratio.") + ratio))
        std::printf(" %9.2f", get(m, std::string("ratio.") + ratio));
    std::printf("\n");
}

void print_commands(const figures& m) {
    std::map<std::string, bool> names;
    for (const auto& [key, _] : m) {
        auto at = key.find(".cmd.");
        if (at == std::string::npos || !key.ends_with(".calls")) continue;
        names[key.substr(at + 5, key.size() - at - 5 - 6)] = true;
    }
    std::printf("\nRedis commands per flow by kind, in scripts or not (calls / usec):\n");
    std::printf("  %-20s %22s %22s %22s\n", "command", "keel-orders", "net of polls", "floor");
    auto cell = [&](const std::string& side, const std::string& name) {
        char buf[64] = "-";
        if (!m.contains(side + ".calls")) return std::string(buf);
        std::snprintf(buf, sizeof buf, "%.2f / %.1f", get(m, side + ".cmd." + name + ".calls"),
                      get(m, side + ".cmd." + name + ".usec"));
        return std::string(buf);
    };
    for (const auto& [name, _] : names)
        std::printf("  %-20s %22s %22s %22s\n", name.c_str(), cell("keel", name).c_str(),
                    cell("net", name).c_str(), cell("floor", name).c_str());
}

void print_report(const options& o, const figures& m) {
    std::printf("\nmedians of %d round(s), per flow unless said:\n", o.rounds);
    std::printf("  %-32s %12s %12s %12s %9s\n", "", "keel-orders", "net of polls", "floor",
                "keel/floor");
    print_row(m, "completed flows/s", "flows_s", false, true);
    std::printf("  %-32s p50 %.2f ms  p99 %.2f ms  max %.2f ms  (poll every %d ms)\n",
                "payment ack -> shipped", get(m, "keel.p50_ms"), get(m, "keel.p99_ms"),
                get(m, "keel.max_ms"), o.poll_ms);
    std::printf("  %-32s GET order %.2f, GET fulfilment %.2f\n", "driver polls per flow",
                get(m, "keel.order_polls"), get(m, "keel.fulfillment_polls"));
    std::printf("  %-32s %11.0f%%", "CPUs idle (all of them)", get(m, "keel.idle_pct"));
    if (m.contains("paced.idle_pct"))
        std::printf("   the paced floor's Redis half: %.0f%%", get(m, "paced.idle_pct"));
    std::printf("\n");
    print_row(m, "keel-orders CPU (us)", "service_cpu_us", true, false);
    print_row(m, "redis-server CPU (us)", "redis_cpu_us", true, true, "redis_cpu_us");
    print_row(m, "HTTP floor server CPU (us)", "http_cpu_us", false, true);
    print_row(m, "service + Redis CPU, net (us)", "flow_cpu_us", false, true, "flow_cpu_us");
    if (m.contains("paced.flows_s")) {
        std::printf("  the floor at Keel's rate (%.1f flows/s):\n", get(m, "paced.flows_s"));
        std::printf("  %-32s %12.1f %12.1f %12.1f %9.2f\n", "redis-server CPU (us)",
                    get(m, "keel.redis_cpu_us"), get(m, "net.redis_cpu_us"),
                    get(m, "paced.redis_cpu_us"), get(m, "ratio_paced.redis_cpu_us"));
        std::printf("  %-32s %12s %12s %12.1f\n", "HTTP floor server CPU (us)", "", "",
                    get(m, "paced.http_cpu_us"));
        std::printf("  %-32s %12s %12.1f %12.1f %9.2f\n", "service + Redis CPU, net (us)", "",
                    get(m, "keel.flow_cpu_us"), get(m, "paced.flow_cpu_us"),
                    get(m, "ratio_paced.flow_cpu_us"));
    }
    print_row(m, "driver CPU (us)", "driver_cpu_us", true, true);
    print_row(m, "Redis commands (all)", "calls", true, true, "calls");
    print_row(m, "commands sent by the floor", "requests", false, true);
    print_row(m, "AOF bytes", "aof_bytes", false, true, "aof_bytes");
    print_row(m, "bytes sent to Redis", "net_in", true, true, "net_in");
    print_row(m, "bytes from Redis", "net_out", true, true);
    print_row(m, "Redis's reads of requests", "reads", true, true);
    print_row(m, "Redis's writes of replies", "writes", true, true);
    if (m.contains("read_order.service_cpu_us"))
        std::printf(
            "  %-32s GET order: keel-orders %.1f us, redis %.1f us; GET fulfilment: "
            "keel-orders %.1f us, redis %.1f us\n",
            "one poll costs", get(m, "read_order.service_cpu_us"),
            get(m, "read_order.redis_cpu_us"), get(m, "read_fulfillment.service_cpu_us"),
            get(m, "read_fulfillment.redis_cpu_us"));
    if (get(m, "keel.aof_rewritten") > 0 || get(m, "floor.aof_rewritten") > 0)
        std::printf("  (an AOF rewrite happened during a phase: AOF bytes are not valid)\n");
    print_commands(m);
}

void print_baseline(const options& o, const figures& m) {
    if (o.baseline.empty()) return;
    std::printf("\nagainst the baseline %s (medians; costs net of polls):\n", o.baseline.c_str());
    std::printf("  %-26s %12s %12s %9s\n", "", "baseline", "this build", "ratio");
    auto row = [&](const char* label, const std::string& side, const char* name) {
        std::printf("  %-26s %12.1f %12.1f %9.3f\n", label, get(m, "base:" + side + name),
                    get(m, side + name), get(m, std::string("vs_base.") + name));
    };
    std::string net = m.contains("net.service_cpu_us") ? "net." : "keel.";
    row("completed flows/s", "keel.", "flows_s");
    row("ack -> shipped p50 ms", "keel.", "p50_ms");
    row("ack -> shipped p99 ms", "keel.", "p99_ms");
    row("keel-orders CPU us", net, "service_cpu_us");
    row("redis-server CPU us", net, "redis_cpu_us");
    row("driver CPU us", net, "driver_cpu_us");
    row("Redis commands", net, "calls");
    row("AOF bytes", "keel.", "aof_bytes");
    row("Redis's reads of requests", net, "reads");
    row("Redis's writes of replies", net, "writes");
    std::printf("  %-26s %12.1f %12.1f %9.3f\n", "keel-orders + Redis CPU us",
                get(m, "base:" + net + "service_cpu_us") + get(m, "base:" + net + "redis_cpu_us"),
                get(m, net + "service_cpu_us") + get(m, net + "redis_cpu_us"),
                (get(m, net + "service_cpu_us") + get(m, net + "redis_cpu_us")) /
                    std::max(1e-9, get(m, "base:" + net + "service_cpu_us") +
                                       get(m, "base:" + net + "redis_cpu_us")));
}

void print_summary(const options& o, const figures& m) {
    std::printf("\nsummary aof=%s threads=%d rounds=%d orders=%d concurrency=%d driver=%s",
                o.aof.c_str(), o.threads, o.rounds, o.orders, o.concurrency,
                std::string(bench::to_string(o.driver)).c_str());
    for (const auto& key : {"keel.flows_s",
                            "keel.p50_ms",
                            "keel.p99_ms",
                            "keel.slowest_flow_ms",
                            "keel.stalled_flows",
                            "keel.idle_pct",
                            "keel.order_polls",
                            "keel.fulfillment_polls",
                            "keel.service_cpu_us",
                            "net.service_cpu_us",
                            "keel.redis_cpu_us",
                            "net.redis_cpu_us",
                            "keel.driver_cpu_us",
                            "net.driver_cpu_us",
                            "keel.calls",
                            "net.calls",
                            "keel.aof_bytes",
                            "net.net_in",
                            "net.reads",
                            "net.writes",
                            "floor.flows_s",
                            "floor.redis_cpu_us",
                            "floor.driver_cpu_us",
                            "floor.calls",
                            "floor.requests",
                            "floor.aof_bytes",
                            "floor.net_in",
                            "floor.http_flows_s",
                            "floor.http_cpu_us",
                            "keel.flow_cpu_us",
                            "floor.flow_cpu_us",
                            "ratio.flow_cpu_us",
                            "paced.flows_s",
                            "paced.redis_cpu_us",
                            "paced.http_cpu_us",
                            "paced.flow_cpu_us",
                            "paced.idle_pct",
                            "ratio_paced.redis_cpu_us",
                            "ratio_paced.flow_cpu_us",
                            "ratio.redis_cpu_us",
                            "ratio.calls",
                            "ratio.aof_bytes",
                            "ratio.net_in",
                            "base:keel.flows_s",
                            "base:keel.p99_ms",
                            "base:net.service_cpu_us",
                            "base:net.redis_cpu_us",
                            "base:net.calls",
                            "vs_base.service_cpu_us",
                            "vs_base.redis_cpu_us",
                            "vs_base.calls",
                            "vs_base.flows_s"})
        std::printf(" %s=%.2f", key, get(m, key));
    std::printf("\n");
}

// The baseline binary's side of a round, as Keel's, its figures under "base:".
bool baseline_round(const options& o, figures& f) {
    options b = o;
    b.binary = o.baseline;
    if (o.baseline_threads) b.threads = o.baseline_threads;
    b.perf_dir.clear();
    b.keep_aof.clear();
    b.redis_config.clear();
    figures g;
    bool ok = keel_round(b, g);
    if (b.reads > 0) add_net_of_polls(g);
    for (const auto& [key, value] : g) f["base:" + key] = value;
    return ok;
}

// This build over the baseline's: costs net of polls where priced, speed as driven.
void add_vs_baseline(figures& f) {
    for (const auto* name : {"service_cpu_us", "redis_cpu_us", "driver_cpu_us", "calls",
                             "aof_bytes", "net_in", "reads", "writes"}) {
        std::string side = f.contains(std::string("net.") + name) ? "net." : "keel.";
        double base = get(f, "base:" + side + name);
        if (base > 0) f[std::string("vs_base.") + name] = get(f, side + name) / base;
    }
    for (const auto* name : {"flows_s", "p50_ms", "p99_ms"}) {
        double base = get(f, std::string("base:keel.") + name);
        if (base > 0)
            f[std::string("vs_base.") + name] = get(f, std::string("keel.") + name) / base;
    }
}

bool run_round(const options& o, int round, figures& f) {
    bool keel_first = round % 2 == 1;  // alternate, so that drift hits both sides alike
    bool ok = true;
    if (o.floor && !keel_first) ok = floor_round(o, "floor", 0, f) && ok;
    if (!o.baseline.empty() && !keel_first) ok = baseline_round(o, f) && ok;
    ok = keel_round(o, f) && ok;
    // The floor at Keel's rate: how much a server spends per request depends on how many
    // requests each wake-up finds, so CPU per flow compares at equal load.
    if (o.floor && o.floor_pace && get(f, "keel.flows_s") > 0)
        ok = floor_round(o, "paced", get(f, "keel.flows_s"), f) && ok;
    if (!o.baseline.empty() && keel_first) ok = baseline_round(o, f) && ok;
    if (o.floor && keel_first) ok = floor_round(o, "floor", 0, f) && ok;
    if (o.reads > 0) add_net_of_polls(f);
    add_ratios(f);
    if (!o.baseline.empty()) add_vs_baseline(f);
    std::printf(
        "round %d: keel %.0f flows %.1f/s, p50 %.2f ms p99 %.2f ms, keel-orders %.0f us, "
        "redis %.0f us per flow",
        round, get(f, "keel.completed"), get(f, "keel.flows_s"), get(f, "keel.p50_ms"),
        get(f, "keel.p99_ms"), get(f, "keel.service_cpu_us"), get(f, "keel.redis_cpu_us"));
    if (f.contains("net.redis_cpu_us"))
        std::printf(" (net of polls %.0f)", get(f, "net.redis_cpu_us"));
    std::printf(", CPUs %.0f%% idle", get(f, "keel.idle_pct"));
    if (o.floor)
        std::printf("; floor %.0f flows %.1f/s, redis %.0f us, HTTP %.0f us per flow",
                    get(f, "floor.completed"), get(f, "floor.flows_s"),
                    get(f, "floor.redis_cpu_us"), get(f, "floor.http_cpu_us"));
    if (f.contains("paced.flows_s"))
        std::printf("; paced floor %.1f/s, redis %.0f us, HTTP %.0f us per flow",
                    get(f, "paced.flows_s"), get(f, "paced.redis_cpu_us"),
                    get(f, "paced.http_cpu_us"));
    if (!o.baseline.empty())
        std::printf("; baseline %.1f flows/s, keel-orders %.0f us, redis %.0f us per flow",
                    get(f, "base:keel.flows_s"), get(f, "base:keel.service_cpu_us"),
                    get(f, "base:keel.redis_cpu_us"));
    std::printf("\n");
    std::fflush(stdout);
    return ok;
}

}  // namespace

int main(int argc, char** argv) {
    auto parsed = parse(argc, argv);
    if (!parsed) return 2;
    const options& o = *parsed;
    try {
        std::printf(
            "keel-orders load: %d orders, %d clients (driver: %s), service --threads %d, redis "
            "AOF %s, %d round(s)%s\n",
            o.orders, o.concurrency, std::string(bench::to_string(o.driver)).c_str(), o.threads,
            o.aof.c_str(), o.rounds, o.floor ? ", beside the floor" : "");
        std::vector<figures> rounds;
        bool ok = true;
        for (int r = 1; r <= o.rounds; ++r) ok = run_round(o, r, rounds.emplace_back()) && ok;
        auto m = medians(rounds);
        print_report(o, m);
        print_baseline(o, m);
        if (o.census > 0) census(o, m);
        print_summary(o, m);
        return ok ? 0 : 1;
    } catch (const std::exception& e) {
        std::cerr << "keel_orders_load: " << e.what() << "\n";
        return 1;
    }
}
