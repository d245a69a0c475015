// keel_scale_bench: how keel-orders' cost grows with waiting work. Two redis-servers and two
// keel-orders side by side: A on a store that stays empty, B on one filled with N orders
// waiting for their payment (10,000 and 100,000 by default, then 1,000,000 with --million),
// each with its document, its fulfilment suspended on the payment signals and its payment
// timer (3 days). At each N it reports:
//
//   memory  Redis's used_memory per waiting order (the growth over the fills, divided by N),
//           by key kind (MEMORY USAGE, SAMPLES 0, of --samples orders; a shared index set's
//           usage over its entries), beside the floor: the same order in the least Redis
//           needs (scale_fill.hpp), written to a third redis-server, and its bare payload.
//   load    new orders through create -> pay -> shipped -> delivered -> completed, on A and
//           on B in turn (--rounds, the order alternating): flows/s and the payment
//           webhook's answer -> `shipped` p99 (polled every --poll-ms), as B over A per round.
//   RSS     keel-orders' resident memory, B over A: after its start, after the load, after
//           its restart.
//   restart B stopped and started again (and A, the same way): time until /readyz answers,
//           until a GET of an order answers, until a payment for a waiting order (on B one
//           of the N) shows as `paid` and `shipped`, and until the first and last of
//           --timer-orders orders whose payment timer fell due while it was down read
//           `expired` (made by a keel-orders with --payment-timeout 2s, stopped before).
//
// Filling B: every order goes through POST /orders (about 4,000 a second here, so a million
// take minutes). With --api-orders K only the first K do; the rest are copies of the first,
// written pipelined: its keys and index entries as keel-orders wrote them, the id replaced
// and the times moved (scale_fill.hpp), for stores too big to fill over HTTP. The bench then
// checks that a copy is indistinguishable: its keys, types, encodings, contents and index entries
// equal those of an order made over HTTP (ids and times masked), its MEMORY USAGE by kind equals
// theirs, and copies paid over HTTP ship and complete. See docs/benchmarks.md, "Waiting work at
// scale".
//
//   keel_scale_bench [--tiers 10000,100000] [--million] [--api-orders K]
//                    [--flows 2000] [--rounds 7] [--concurrency 32] [--threads 2]
//                    [--aof everysec|always|off] [--samples 1000] [--timer-orders 20]
//                    [--poll-ms 1] [--driver loop|threads] [--binary PATH]
//                    [--redis-config NAME=VALUE]...
//
// --redis-config passes a directive to every redis-server the bench starts (e.g.
// hash-max-listpack-value=256), to measure what a Redis setting changes.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
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
#include "flow_measure.hpp"
#include "rounds.hpp"
#include "scale_fill.hpp"
#include "service_process.hpp"

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using keel::http::status;
namespace asio = boost::asio;
using json = nlohmann::json;
namespace bench = keel::bench;
namespace e2e = keel::e2e;

struct options {
    std::vector<long> tiers{10'000, 100'000};
    long api_orders = 9'999'999;  // every order over HTTP
    int flows = 2000;
    int rounds = 7;
    int concurrency = 32;
    int threads = 2;
    std::string aof = "everysec";
    int samples = 1000;
    int timer_orders = 20;
    int poll_ms = 1;
    int fill_concurrency = 256;
    bench::driver_mode driver = bench::driver_mode::loop;
    std::vector<std::string> redis_config;  // "--name", "value", ... for every redis-server
#ifdef KEEL_ORDERS_BINARY
    std::string binary = KEEL_ORDERS_BINARY;
#else
    std::string binary;
#endif
};

const char* usage =
    "usage: keel_scale_bench [--tiers N,N,...] [--million] [--api-orders N] [--flows N]\n"
    "                        [--rounds R] [--concurrency C] [--threads T]\n"
    "                        [--aof everysec|always|off] [--samples N] [--timer-orders N]\n"
    "                        [--poll-ms MS] [--driver loop|threads] [--binary PATH]\n"
    "                        [--redis-config NAME=VALUE]...\n";

std::optional<long> number(const std::string& text, long low, long high) {
    char* end = nullptr;
    long v = std::strtol(text.c_str(), &end, 10);
    if (end == text.c_str() || *end != '\0' || v < low || v > high) return std::nullopt;
    return v;
}

std::optional<options> parse(int argc, char** argv) {
    options o;
    for (int i = 1; i < argc; ++i) {
        std::string flag = argv[i];
        if (flag == "--help" || flag == "-h") {
            std::cout << usage;
            std::exit(0);
        }
        if (flag == "--million") {
            if (o.tiers.back() < 1'000'000) o.tiers.push_back(1'000'000);
            continue;
        }
        if (i + 1 >= argc) {
            std::cerr << "missing value for " << flag << "\n" << usage;
            return std::nullopt;
        }
        std::string value = argv[++i];
        std::optional<long> n;
        bool ok = true;
        if (flag == "--tiers") {
            o.tiers.clear();
            std::istringstream in(value);
            for (std::string part; ok && std::getline(in, part, ',');) {
                n = number(part, 2, 9'999'999);
                ok = n && (o.tiers.empty() || *n > o.tiers.back());
                if (ok) o.tiers.push_back(*n);
            }
            ok = ok && !o.tiers.empty();
        } else if (flag == "--api-orders" && (n = number(value, 1, 9'999'999)))
            o.api_orders = *n;
        else if (flag == "--flows" && (n = number(value, 1, 1'000'000)))
            o.flows = static_cast<int>(*n);
        else if (flag == "--rounds" && (n = number(value, 1, 100)))
            o.rounds = static_cast<int>(*n);
        else if (flag == "--concurrency" && (n = number(value, 1, 1024)))
            o.concurrency = static_cast<int>(*n);
        else if (flag == "--threads" && (n = number(value, 1, 64)))
            o.threads = static_cast<int>(*n);
        else if (flag == "--samples" && (n = number(value, 1, 1'000'000)))
            o.samples = static_cast<int>(*n);
        else if (flag == "--timer-orders" && (n = number(value, 1, 10'000)))
            o.timer_orders = static_cast<int>(*n);
        else if (flag == "--poll-ms" && (n = number(value, 0, 1000)))
            o.poll_ms = static_cast<int>(*n);
        else if (flag == "--aof" && (value == "always" || value == "everysec" || value == "off"))
            o.aof = value;
        else if (flag == "--binary")
            o.binary = value;
        else if (auto eq = value.find('=');
                 flag == "--redis-config" && eq != std::string::npos && eq > 0) {
            o.redis_config.push_back("--" + value.substr(0, eq));
            o.redis_config.push_back(value.substr(eq + 1));
        } else if (auto mode = flag == "--driver" ? bench::parse_driver_mode(value) : std::nullopt)
            o.driver = *mode;
        else
            ok = false;
        if (!ok) {
            std::cerr << "bad option or value: " << flag << " " << value << "\n" << usage;
            return std::nullopt;
        }
    }
    if (o.binary.empty()) {
        std::cerr << "no keel-orders binary: pass --binary PATH\n";
        return std::nullopt;
    }
    return o;
}

double seconds_since(clock_type::time_point t) {
    return std::chrono::duration<double>(clock_type::now() - t).count();
}

double ms_between(clock_type::time_point from, clock_type::time_point to) {
    return std::chrono::duration<double, std::milli>(to - from).count();
}

keel::test::redis_server_options redis_options(const std::string& aof,
                                               const std::vector<std::string>& config) {
    keel::test::redis_server_options r;
    r.appendonly = aof != "off";
    if (r.appendonly) r.appendfsync = aof;
    // A rewrite of a million orders' AOF would fall into whichever phase it happened in.
    r.extra_args = {"--auto-aof-rewrite-percentage", "0"};
    r.extra_args.insert(r.extra_args.end(), config.begin(), config.end());
    return r;
}

e2e::service_options service_options(const options& o, const std::string& url,
                                     std::vector<std::string> extra = {}) {
    e2e::service_options s{
        .binary = o.binary, .redis_url = url, .threads = o.threads, .log_level = "warn"};
    s.extra_args = std::move(extra);
    s.ready_timeout = 600s;  // a restart with a million waiting instances is what is measured
    return s;
}

json order_body(const std::string& id) {
    return {{"id", id}, {"email", id + "@example.com"}, {"address", "1 Load Lane"}, {"total", 9.5}};
}

// ---- HTTP: creating orders, whole flows ----

// POST /orders for waiting_order_id(n), n in [first, last); returns the wall time.
double create_orders(const options& o, std::uint16_t port, long first, long last) {
    std::atomic<long> next{first};
    std::atomic<long> failed{0};
    std::string first_error;
    std::mutex mutex;
    auto started = clock_type::now();
    bench::run_clients(o.driver, o.concurrency,
                       [&](asio::any_io_executor ex, int) -> asio::awaitable<void> {
                           bench::http_connection client(ex, port);
                           for (long n; (n = next.fetch_add(1)) < last;) {
                               auto body = order_body(bench::waiting_order_id(n));
                               auto res = co_await client.post_json("/orders", body);
                               if (res.status == status::created) continue;
                               std::lock_guard lock(mutex);
                               if (failed++ == 0) first_error = res.body;
                           }
                       });
    if (failed > 0)
        throw std::runtime_error(std::to_string(failed.load()) +
                                 " creates failed, the first: " + first_error);
    return seconds_since(started);
}

// Polls `target` until its JSON `status` is `wanted`; returns when it was first seen.
asio::awaitable<clock_type::time_point> wait_status(bench::http_connection& client,
                                                    std::string target, std::string wanted,
                                                    int interval_ms) {
    auto give_up = clock_type::now() + 30s;
    std::string last;
    while (clock_type::now() < give_up) {
        auto res = co_await client.get(target);
        if (res.status == status::ok) {
            auto body = json::parse(res.body, nullptr, false);
            if (!body.is_discarded() && body.value("status", "") == wanted)
                co_return clock_type::now();
        }
        last = res.body;
        if (interval_ms > 0) co_await bench::sleep_for(std::chrono::milliseconds(interval_ms));
    }
    throw std::runtime_error(target + " never read " + wanted + "; last " + last);
}

// One order through create -> pay -> shipped -> delivered -> completed, as keel_orders_load
// drives it; returns the payment webhook's answer -> `shipped` in ms.
asio::awaitable<double> one_flow(bench::http_connection& client, std::string id, int poll_ms) {
    auto order = order_body(id);
    auto created = co_await client.post_json("/orders", order);
    if (created.status != status::created)
        throw std::runtime_error("create " + id + ": " + created.body);
    json payment{{"orderId", id}, {"transactionId", "tx-" + id}, {"amount", 9.5}};
    auto paid = co_await client.post_json("/webhooks/payment", payment);
    auto acknowledged = clock_type::now();
    if (paid.status != status::ok) throw std::runtime_error("pay " + id + ": " + paid.body);
    auto shipped = co_await wait_status(client, "/orders/" + id, "shipped", poll_ms);
    json delivery{{"orderId", id}};
    auto delivered = co_await client.post_json("/webhooks/delivered", delivery);
    if (delivered.status != status::ok)
        throw std::runtime_error("deliver " + id + ": " + delivered.body);
    co_await wait_status(client, "/orders/" + id + "/fulfillment", "completed",
                         std::max(poll_ms, 5));
    co_return ms_between(acknowledged, shipped);
}

struct load_result {
    double service_cpu_us = 0;  // keel-orders' CPU per completed flow
    double redis_cpu_us = 0;    // redis-server's
    double redis_calls = 0;     // Redis commands per flow (those scripts run included)
    int completed = 0;
    int failed = 0;
    double wall = 0;
    double flows_s = 0;
    double p50_ms = 0;
    double p99_ms = 0;
    std::string first_error;
};

load_result run_load(const options& o, e2e::service_process& service, bench::redis_probe& probe,
                     const std::string& prefix) {
    auto port = service.port();
    bench::phase_meter meter(probe, service.pid());
    meter.start();
    std::atomic<int> next{0};
    std::mutex mutex;
    std::vector<double> latencies;
    load_result r;
    auto started = clock_type::now();
    bench::run_clients(
        o.driver, o.concurrency, [&](asio::any_io_executor ex, int) -> asio::awaitable<void> {
            bench::http_connection client(ex, port);
            for (int n; (n = next.fetch_add(1)) < o.flows;) {
                std::optional<double> ms;
                std::string error;
                try {
                    ms = co_await one_flow(client, prefix + std::to_string(n), o.poll_ms);
                } catch (const std::exception& e) {
                    error = e.what();
                }
                if (!ms) client = bench::http_connection(ex, port);
                std::lock_guard lock(mutex);
                if (ms) {
                    latencies.push_back(*ms);
                } else if (r.failed++ == 0) {
                    r.first_error = error;
                }
            }
        });
    r.wall = seconds_since(started);
    auto cost = meter.stop();
    r.completed = static_cast<int>(latencies.size());
    if (r.completed > 0) {
        r.service_cpu_us = cost.service_cpu / r.completed * 1e6;
        r.redis_cpu_us = cost.redis.cpu_seconds / r.completed * 1e6;
        r.redis_calls = cost.redis.calls() / r.completed;
    }
    r.flows_s = r.completed / r.wall;
    if (!latencies.empty()) {
        r.p50_ms = bench::percentile(latencies, 0.50);
        r.p99_ms = bench::percentile(latencies, 0.99);
    }
    return r;
}

// ---- the restart ----

struct restart_result {
    double ready_ms = 0;        // spawn -> /readyz 200
    double first_get_ms = 0;    // spawn -> GET /orders/<waiting> 200
    double paid_ms = 0;         // spawn -> the payment's order reads paid (or shipped)
    double shipped_ms = 0;      // spawn -> it reads shipped
    double first_timer_ms = 0;  // spawn -> the first timer order reads expired
    double last_timer_ms = 0;   // spawn -> every one does
    double payment_sent_ms = 0;
    std::int64_t rss_kib = 0;  // after all that
};

std::string order_status(keel::http::testing::test_client& client, const std::string& id) {
    auto res = client.get("/orders/" + id);
    if (res.status != status::ok) return "";
    auto body = json::parse(res.body, nullptr, false);
    return body.is_discarded() ? "" : body.value("status", "");
}

// Orders whose payment timers fall due while `service` is down: made by a keel-orders with
// --payment-timeout 2s on the same store, which is stopped once they all wait; returns when
// they are due.
std::vector<std::string> due_while_down(const options& o, const std::string& url,
                                        const std::string& tag, bench::redis_probe& probe,
                                        const std::string& doc_key_of_w) {
    std::vector<std::string> ids;
    e2e::service_process helper(service_options(o, url, {"--payment-timeout", "2s"}));
    auto client = helper.client();
    auto made = clock_type::now();
    for (int i = 0; i < o.timer_orders; ++i) {
        ids.push_back("t" + tag + "-" + std::to_string(i));
        auto res = client.post_json("/orders", order_body(ids.back()));
        if (res.status != status::created)
            throw std::runtime_error("timer order " + ids.back() + ": " + res.body);
    }
    for (const auto& id : ids) {
        auto waiting = e2e::poll_json(
            client, "/orders/" + id + "/fulfillment",
            [](const json& j) { return j.value("status", "") == "suspended"; }, 10s);
        if (!waiting) throw std::runtime_error("timer order " + id + " never suspended");
    }
    helper.stop();
    if (seconds_since(made) > 1.8)
        std::printf(
            "  warning: the timer orders took %.1f s to make; their timers may have "
            "fired before the restart\n",
            seconds_since(made));
    std::this_thread::sleep_until(made + 2s + 300ms);
    // Still `created`: no timer fired before the restart.
    std::string doc_key = doc_key_of_w;
    for (const auto& id : ids) {
        auto key = doc_key;
        key.replace(key.find("<id>"), 4, id);
        auto reply = probe.command(keel::redis::command("GET", key));
        std::string doc(reply.text().value_or(""));
        if (doc.find("\"status\":\"created\"") == std::string::npos)
            throw std::runtime_error("timer order " + id + " changed before the restart: " + doc);
    }
    return ids;
}

restart_result measure_restart(const options& o, e2e::service_process& service,
                               const std::string& url, bench::redis_probe& probe,
                               const std::string& doc_key, const std::string& waiting_id,
                               const std::string& tag) {
    restart_result r;
    service.stop();
    auto timers = due_while_down(o, url, tag, probe, doc_key);
    auto t0 = clock_type::now();
    service.start();
    r.ready_ms = ms_between(t0, clock_type::now());
    auto client = service.client();
    if (client.get("/orders/" + waiting_id).status != status::ok)
        throw std::runtime_error("restart: GET of " + waiting_id + " failed");
    r.first_get_ms = ms_between(t0, clock_type::now());
    json payment{{"orderId", waiting_id}, {"transactionId", "tx-" + waiting_id}, {"amount", 9.5}};
    auto paid = client.post_json("/webhooks/payment", payment);
    if (paid.status != status::ok)
        throw std::runtime_error("restart: payment of " + waiting_id + ": " + paid.body);
    r.payment_sent_ms = ms_between(t0, clock_type::now());
    std::vector<bool> fired(timers.size(), false);
    std::size_t fired_count = 0;
    auto give_up = clock_type::now() + 60s;
    while ((r.shipped_ms == 0 || fired_count < timers.size()) && clock_type::now() < give_up) {
        if (r.shipped_ms == 0) {
            auto s = order_status(client, waiting_id);
            if ((s == "paid" || s == "shipped") && r.paid_ms == 0)
                r.paid_ms = ms_between(t0, clock_type::now());
            if (s == "shipped") r.shipped_ms = ms_between(t0, clock_type::now());
        }
        for (std::size_t i = 0; i < timers.size(); ++i) {
            if (fired[i] || order_status(client, timers[i]) != "expired") continue;
            fired[i] = true;
            if (fired_count++ == 0) r.first_timer_ms = ms_between(t0, clock_type::now());
            if (fired_count == timers.size()) r.last_timer_ms = ms_between(t0, clock_type::now());
            break;  // the others on the next pass: the first one's time stays sharp
        }
        std::this_thread::sleep_for(2ms);
    }
    if (r.shipped_ms == 0 || fired_count < timers.size())
        throw std::runtime_error("restart: " + waiting_id +
                                 " shipped: " + (r.shipped_ms > 0 ? "yes" : "no") +
                                 ", timers fired " + std::to_string(fired_count) + " of " +
                                 std::to_string(timers.size()));
    r.rss_kib = e2e::rss_kib(service.pid());
    return r;
}

// ---- memory ----

struct memory_figures {
    long waiting = 0;
    double per_order = 0;        // used_memory's growth over the fills, less the clients' buffers'
                                 // (clients.normal: the service's and the fill's connections), / N
    double raw_per_order = 0;    // used_memory's growth / N, the buffers included
    double floor_per_order = 0;  // the floor's, the same way
    double floor_payload = 0;
    std::vector<std::pair<std::string, double>> kinds;  // MEMORY USAGE by kind, per order
    double kinds_sum = 0;
    double api_sample_sum = 0;                  // the same sum over orders made over HTTP only
    double clone_sample_sum = 0;                // ... and over copies only
    std::map<std::string, double> stats_grown;  // MEMORY STATS' growth over the fills
    long api_samples = 0;
    long clone_samples = 0;
    long keys = 0;
};

// MEMORY USAGE of every kind of key, over `samples` orders spread over [0, waiting); the
// shared index sets' usage over their entries. `api` orders (n < api) and copies apart too.
void break_down(const options& o, bench::redis_probe& probe, const bench::order_template& t,
                long waiting, long api, memory_figures& m) {
    auto kinds = t.own_kinds();
    std::vector<double> all(kinds.size()), from_api(kinds.size()), copies(kinds.size());
    long n_all = 0, n_api = 0, n_copies = 0;
    long step = std::max(1L, waiting / o.samples);
    for (long n = 0; n < waiting; n += step) {
        auto id = bench::waiting_order_id(n);
        ++n_all;
        bool made_over_http = n < api;
        ++(made_over_http ? n_api : n_copies);
        for (std::size_t k = 0; k < kinds.size(); ++k) {
            double usage = bench::memory_usage(probe, t.own_key(k, id));
            all[k] += usage;
            (made_over_http ? from_api : copies)[k] += usage;
        }
    }
    m.api_samples = n_api;
    m.clone_samples = n_copies;
    m.kinds.clear();
    m.kinds_sum = m.api_sample_sum = m.clone_sample_sum = 0;
    for (std::size_t k = 0; k < kinds.size(); ++k) {
        m.kinds.emplace_back(kinds[k], all[k] / double(n_all));
        m.kinds_sum += all[k] / double(n_all);
        if (n_api > 0) m.api_sample_sum += from_api[k] / double(n_api);
        if (n_copies > 0) m.clone_sample_sum += copies[k] / double(n_copies);
    }
    for (const auto& s : t.shared()) {
        auto card_cmd = s.type == "zset" ? "ZCARD" : s.type == "set" ? "SCARD" : "HLEN";
        double card = static_cast<double>(
            probe.command(keel::redis::command(card_cmd, s.key)).integer().value_or(1));
        double per_entry = bench::memory_usage(probe, s.key) / std::max(1.0, card);
        m.kinds.emplace_back(s.key + " (one entry, " + s.type + ")", per_entry);
        m.kinds_sum += per_entry;
        m.api_sample_sum += per_entry;
        m.clone_sample_sum += per_entry;
    }
    auto keyspace = probe.info("keyspace");
    auto at = keyspace.find("db0:keys=");
    m.keys = at == std::string::npos ? 0 : std::atol(keyspace.c_str() + at + 9);
}

// Waits until `key` (the operators' index of suspended fulfilments) holds `count` entries.
void wait_for_index(bench::redis_probe& probe, const std::string& key, long count) {
    auto give_up = clock_type::now() + 120s;
    long seen = 0;
    while (clock_type::now() < give_up) {
        seen = static_cast<long>(
            probe.command(keel::redis::command("ZCARD", key)).integer().value_or(0));
        if (seen >= count) return;
        std::this_thread::sleep_for(20ms);
    }
    throw std::runtime_error(key + " holds " + std::to_string(seen) + " of " +
                             std::to_string(count) + " waiting instances");
}

// ---- the report ----

struct tier_result {
    long n = 0;
    double api_rate = 0;    // orders/s over HTTP in this tier's fill (0: none)
    double clone_rate = 0;  // copies/s
    memory_figures memory;
    std::vector<double> flows_ratio, p99_ratio, p50_ratio;
    std::vector<double> flows_a, flows_b, p99_a, p99_b;
    std::vector<double> service_cpu_ratio, redis_cpu_ratio, cpu_a, cpu_b, redis_a, redis_b;
    std::vector<double> calls_a, calls_b;
    int failed = 0;
    std::int64_t rss_start_a = 0, rss_start_b = 0, rss_fill_a = 0, rss_fill_b = 0;
    std::int64_t rss_load_a = 0, rss_load_b = 0;
    restart_result restart_a, restart_b;
};

const char* verdict(bool ok) {
    return ok ? "holds" : "DOES NOT HOLD";
}

void print_tier(const tier_result& t) {
    const auto& m = t.memory;
    std::printf("\n### %ld waiting orders\n\n", t.n);
    std::printf(
        "fill: %s%s\n",
        t.api_rate > 0 ? ("over HTTP " + std::to_string(int(t.api_rate)) + " orders/s; ").c_str()
                       : "",
        t.clone_rate > 0 ? ("copies " + std::to_string(int(t.clone_rate)) + " orders/s").c_str()
                         : "");
    std::printf("\n| Redis memory per waiting order | bytes |\n|---|---:|\n");
    for (const auto& [kind, bytes] : m.kinds) std::printf("| %s | %.0f |\n", kind.c_str(), bytes);
    std::printf("| sum of MEMORY USAGE above | %.0f |\n", m.kinds_sum);
    std::printf("| the rest (the keyspace's table, allocator) | %.0f |\n",
                m.per_order - m.kinds_sum);
    std::printf("| used_memory growth / waiting orders | %.0f |\n", m.raw_per_order);
    std::printf("| **the same less the clients' buffers (clients.normal)** | **%.0f** |\n",
                m.per_order);
    for (const auto* name : {"db.0.overhead.hashtable.main", "clients.normal"})
        if (auto it = m.stats_grown.find(name); it != m.stats_grown.end())
            std::printf("| (MEMORY STATS %s growth / waiting orders) | %.0f |\n", name,
                        it->second / double(m.waiting));
    std::printf("| floor in Redis (used_memory growth less clients.normal / orders) | %.0f |\n",
                m.floor_per_order);
    std::printf("| floor payload (bytes of the state, no Redis) | %.0f |\n", m.floor_payload);
    auto sum_of = [](long samples, double sum) {
        return samples > 0 ? std::to_string(std::lround(sum)) + " B (" + std::to_string(samples) +
                                 " sampled)"
                           : std::string("none");
    };
    std::printf(
        "\nkeys in B: %ld (the load's finished orders included); MEMORY USAGE sums: "
        "orders made over HTTP %s, copies %s\n",
        m.keys, sum_of(m.api_samples, m.api_sample_sum).c_str(),
        sum_of(m.clone_samples, m.clone_sample_sum).c_str());
    std::printf(
        "memory per waiting order %.0f B: %s (<= 1,600 B); %.2fx the floor in Redis, "
        "%.2fx the payload: %s (<= 2x the floor)\n",
        m.per_order, verdict(m.per_order <= 1600), m.per_order / m.floor_per_order,
        m.per_order / m.floor_payload, verdict(m.per_order <= 2 * m.floor_per_order));
    std::printf(
        "\n| load, %zu rounds | empty store (A) | %ld waiting (B) | B/A per round: "
        "median (range) |\n|---|---:|---:|---:|\n",
        t.flows_ratio.size(), t.n);
    std::printf("| completed flows/s (median) | %.1f | %.1f | %s |\n", bench::median(t.flows_a),
                bench::median(t.flows_b), bench::median_and_range(t.flows_ratio).c_str());
    std::printf("| payment answer -> shipped p99 ms (median) | %.2f | %.2f | %s |\n",
                bench::median(t.p99_a), bench::median(t.p99_b),
                bench::median_and_range(t.p99_ratio).c_str());
    std::printf("| ... p50 | | | %s |\n", bench::median_and_range(t.p50_ratio).c_str());
    std::printf("| keel-orders CPU per flow, us | %.0f | %.0f | %s |\n", bench::median(t.cpu_a),
                bench::median(t.cpu_b), bench::median_and_range(t.service_cpu_ratio).c_str());
    std::printf("| redis-server CPU per flow, us | %.0f | %.0f | %s |\n", bench::median(t.redis_a),
                bench::median(t.redis_b), bench::median_and_range(t.redis_cpu_ratio).c_str());
    std::printf("| Redis commands per flow | %.1f | %.1f | |\n", bench::median(t.calls_a),
                bench::median(t.calls_b));
    double fr = bench::median(t.flows_ratio), pr = bench::median(t.p99_ratio);
    std::printf("flows/s B/A %.2f: %s (>= 0.9); p99 B/A %.2f: %s (<= 1.2); failed flows %d\n", fr,
                verdict(fr >= 0.9), pr, verdict(pr <= 1.2), t.failed);
    auto rss_row = [](const char* when, std::int64_t a, std::int64_t b) {
        std::printf("| %s | %.1f | %.1f | %.3f |\n", when, a / 1024.0, b / 1024.0,
                    double(b) / double(a));
    };
    std::printf("\n| keel-orders RSS, MiB | A | B | B/A |\n|---|---:|---:|---:|\n");
    rss_row("after its start, before the fill", t.rss_start_a, t.rss_start_b);
    rss_row("after the fill (A idle)", t.rss_fill_a, t.rss_fill_b);
    rss_row("after the load rounds", t.rss_load_a, t.rss_load_b);
    rss_row("after its restart (and the checks)", t.restart_a.rss_kib, t.restart_b.rss_kib);
    double worst = 0;
    for (double r : {double(t.rss_load_b) / double(t.rss_load_a),
                     double(t.restart_b.rss_kib) / double(t.restart_a.rss_kib)})
        worst = std::max(worst, std::abs(r - 1));
    std::printf("service memory within %.1f%% of A's: %s (within 10%%)\n", worst * 100,
                verdict(worst <= 0.10));
    std::printf("\n| restart, ms from the start of the process | A | B |\n|---|---:|---:|\n");
    auto row = [](const char* what, double a, double b) {
        std::printf("| %s | %.0f | %.0f |\n", what, a, b);
    };
    row("/readyz answers 200", t.restart_a.ready_ms, t.restart_b.ready_ms);
    row("GET /orders/{waiting} answers", t.restart_a.first_get_ms, t.restart_b.first_get_ms);
    row("payment webhook answered", t.restart_a.payment_sent_ms, t.restart_b.payment_sent_ms);
    row("that order reads paid", t.restart_a.paid_ms, t.restart_b.paid_ms);
    row("... and shipped", t.restart_a.shipped_ms, t.restart_b.shipped_ms);
    row("first due timer fired (order expired)", t.restart_a.first_timer_ms,
        t.restart_b.first_timer_ms);
    row("every due timer fired", t.restart_a.last_timer_ms, t.restart_b.last_timer_ms);
    const auto& b = t.restart_b;
    std::printf(
        "restart serving %.0f ms: %s (<= 1 s); first resume %.0f ms: %s (<= 2 s); "
        "first due timer %.0f ms: %s (<= 2 s)\n",
        b.first_get_ms, verdict(b.first_get_ms <= 1000), b.paid_ms, verdict(b.paid_ms <= 2000),
        b.first_timer_ms, verdict(b.first_timer_ms <= 2000));
    std::fflush(stdout);
}

// ---- the checks that a copy is what keel-orders writes ----

void check_copies(const options& o, const bench::order_template& t, bench::redis_probe& probe,
                  e2e::service_process& service, long api, long waiting) {
    if (waiting <= api) {
        std::printf("\ncopies: none (every order was made over HTTP)\n");
        return;
    }
    // Neither was paid at a restart (those were the last order of each tier).
    auto made = t.describe(probe, bench::waiting_order_id(api - 2));
    auto copy = t.describe(probe, bench::waiting_order_id(waiting - 2));
    std::printf(
        "\ncopy check: %s made over HTTP and %s copied, keys and index entries (ids "
        "and times masked): %s\n",
        bench::waiting_order_id(api - 2).c_str(), bench::waiting_order_id(waiting - 2).c_str(),
        made == copy ? "identical" : "DIFFERENT");
    std::printf("%s", made.c_str());
    if (made != copy) {
        std::printf("the copy:\n%s", copy.c_str());
        throw std::runtime_error("a copy differs from an order made over HTTP");
    }
    // Copies paid over HTTP ship and complete.
    auto client = service.client();
    int count = std::min<long>(o.timer_orders, waiting - api - 2);
    auto started = clock_type::now();
    for (int i = 0; i < count; ++i) {
        long n = api + (waiting - api - 2) * i / std::max(1, count);
        if (std::find(o.tiers.begin(), o.tiers.end(), n + 1) != o.tiers.end()) ++n;  // paid
        auto id = bench::waiting_order_id(n);
        json payment{{"orderId", id}, {"transactionId", "tx-" + id}, {"amount", 9.5}};
        auto paid = client.post_json("/webhooks/payment", payment);
        std::string last;
        if (paid.status != status::ok ||
            !e2e::poll_json(
                client, "/orders/" + id,
                [](const json& j) { return j.value("status", "") == "shipped"; }, 30s, &last))
            throw std::runtime_error("copy " + id + " did not ship: " + paid.body + " " + last);
        auto delivered = client.post_json("/webhooks/delivered", json{{"orderId", id}});
        if (delivered.status != status::ok ||
            !e2e::poll_json(
                client, "/orders/" + id + "/fulfillment",
                [](const json& j) { return j.value("status", "") == "completed"; }, 30s, &last))
            throw std::runtime_error("copy " + id + " did not complete: " + last);
    }
    std::printf("copies paid over HTTP: %d of %d shipped and completed (%.1f s)\n", count, count,
                seconds_since(started));
}

}  // namespace

int main(int argc, char** argv) {
    auto parsed = parse(argc, argv);
    if (!parsed) return 2;
    const options& o = *parsed;
    try {
        std::printf("keel_scale_bench: tiers");
        for (auto n : o.tiers) std::printf(" %ld", n);
        std::printf(
            ", %ld over HTTP then copies; load %d flows x %d rounds per side, %d clients "
            "(driver %s), keel-orders --threads %d, redis AOF %s\n",
            o.api_orders, o.flows, o.rounds, o.concurrency,
            std::string(bench::to_string(o.driver)).c_str(), o.threads, o.aof.c_str());
        keel::test::redis_server redis_a(redis_options(o.aof, o.redis_config));
        keel::test::redis_server redis_b(redis_options(o.aof, o.redis_config));
        keel::test::redis_server redis_floor(redis_options("off", o.redis_config));
        e2e::service_process service_a(service_options(o, redis_a.url()));
        e2e::service_process service_b(service_options(o, redis_b.url()));
        bench::redis_probe probe_a(redis_a.url());
        bench::redis_probe probe_b(redis_b.url());
        bench::redis_probe probe_floor(redis_floor.url());
        auto rss_start_a = e2e::rss_kib(service_a.pid());
        auto rss_start_b = e2e::rss_kib(service_b.pid());

        // The template: the first order, alone in B's store.
        double grown = 0;  // used_memory's growth over the fills
        std::map<std::string, double> stats_grown;
        double before = bench::used_memory(probe_b);
        auto stats_before = bench::memory_stats(probe_b);
        double floor_before = bench::used_memory(probe_floor);
        double floor_clients_before = bench::memory_stats(probe_floor)["clients.normal"];
        create_orders(o, service_b.port(), 0, 1);
        {
            auto client = service_b.client();
            auto first = bench::waiting_order_id(0);
            if (!e2e::poll_json(client, "/orders/" + first + "/fulfillment",
                                [](const json& j) { return j.value("status", "") == "suspended"; }))
                throw std::runtime_error("the first order's fulfilment never suspended");
        }
        bench::order_template tmpl(probe_b, bench::waiting_order_id(0));
        std::string index_key, doc_key;
        for (const auto& s : tmpl.shared())
            if (s.key.find("idx:suspended") != std::string::npos) index_key = s.key;
        for (const auto& k : tmpl.own_kinds())
            if (k.ends_with(":doc")) doc_key = k;
        if (index_key.empty() || doc_key.empty())
            throw std::runtime_error("the template has no index entry or no document");
        std::printf("template %s: %zu keys of its own, entries in %zu shared keys\n",
                    tmpl.id().c_str(), tmpl.own_kinds().size(), tmpl.shared().size());

        long filled = 1;
        std::vector<tier_result> results;
        for (std::size_t tier = 0; tier < o.tiers.size(); ++tier) {
            long n = o.tiers[tier];
            tier_result t;
            t.n = n;
            if (tier > 0) {
                before = bench::used_memory(probe_b);
                stats_before = bench::memory_stats(probe_b);
            }
            long api_to = std::min(n, std::max(o.api_orders, 1L));
            if (filled < api_to) {
                double s = create_orders(o, service_b.port(), filled, api_to);
                t.api_rate = double(api_to - filled) / s;
                filled = api_to;
                wait_for_index(probe_b, index_key, filled);
            }
            if (filled < n) {
                double s = bench::pipelined_fill(
                    redis_b.url(), filled, n, o.fill_concurrency,
                    [&](long i) { return tmpl.writes_for(bench::waiting_order_id(i), i); });
                t.clone_rate = double(n - filled) / s;
                filled = n;
                wait_for_index(probe_b, index_key, filled);
            }
            grown += bench::used_memory(probe_b) - before;
            for (const auto& [name, value] : bench::memory_stats(probe_b))
                stats_grown[name] += value - stats_before[name];
            t.memory.stats_grown = stats_grown;
            bench::pipelined_fill(
                redis_floor.url(), tier == 0 ? 0 : o.tiers[tier - 1], n, o.fill_concurrency,
                [&](long i) { return tmpl.floor_writes_for(bench::waiting_order_id(i), i); });
            t.memory.waiting = n;
            t.memory.raw_per_order = grown / double(n);
            t.memory.per_order = (grown - stats_grown["clients.normal"]) / double(n);
            auto floor_stats = bench::memory_stats(probe_floor);
            t.memory.floor_per_order = (bench::used_memory(probe_floor) - floor_before -
                                        (floor_stats["clients.normal"] - floor_clients_before)) /
                                       double(n);
            t.memory.floor_payload = static_cast<double>(tmpl.floor_payload_bytes());
            break_down(o, probe_b, tmpl, n, o.api_orders, t.memory);
            std::printf(
                "\n%ld waiting: %.0f B per order (floor %.0f B), fill %.0f/s over HTTP, "
                "%.0f/s copies\n",
                n, t.memory.per_order, t.memory.floor_per_order, t.api_rate, t.clone_rate);
            t.rss_start_a = rss_start_a;
            t.rss_start_b = rss_start_b;
            t.rss_fill_a = e2e::rss_kib(service_a.pid());
            t.rss_fill_b = e2e::rss_kib(service_b.pid());

            for (int r = 1; r <= o.rounds; ++r) {
                auto tag = std::to_string(n) + "-" + std::to_string(r) + "-";
                load_result a, b;
                if (r % 2 == 1) {
                    a = run_load(o, service_a, probe_a, "a" + tag);
                    b = run_load(o, service_b, probe_b, "b" + tag);
                } else {
                    b = run_load(o, service_b, probe_b, "b" + tag);
                    a = run_load(o, service_a, probe_a, "a" + tag);
                }
                t.failed += a.failed + b.failed;
                if (!a.first_error.empty())
                    std::printf("  A: %d failed, the first: %s\n", a.failed, a.first_error.c_str());
                if (!b.first_error.empty())
                    std::printf("  B: %d failed, the first: %s\n", b.failed, b.first_error.c_str());
                t.flows_a.push_back(a.flows_s);
                t.flows_b.push_back(b.flows_s);
                t.p99_a.push_back(a.p99_ms);
                t.p99_b.push_back(b.p99_ms);
                t.flows_ratio.push_back(b.flows_s / a.flows_s);
                t.p99_ratio.push_back(b.p99_ms / a.p99_ms);
                t.p50_ratio.push_back(b.p50_ms / a.p50_ms);
                t.service_cpu_ratio.push_back(b.service_cpu_us / a.service_cpu_us);
                t.redis_cpu_ratio.push_back(b.redis_cpu_us / a.redis_cpu_us);
                t.calls_a.push_back(a.redis_calls);
                t.calls_b.push_back(b.redis_calls);
                t.cpu_a.push_back(a.service_cpu_us);
                t.cpu_b.push_back(b.service_cpu_us);
                t.redis_a.push_back(a.redis_cpu_us);
                t.redis_b.push_back(b.redis_cpu_us);
                std::printf(
                    "  round %d: A %.1f flows/s p99 %.2f ms (%.0f + %.0f us), B %.1f "
                    "flows/s p99 %.2f ms (%.0f + %.0f us): B/A %.2f, p99 %.2f\n",
                    r, a.flows_s, a.p99_ms, a.service_cpu_us, a.redis_cpu_us, b.flows_s, b.p99_ms,
                    b.service_cpu_us, b.redis_cpu_us, t.flows_ratio.back(), t.p99_ratio.back());
                std::fflush(stdout);
            }
            t.rss_load_a = e2e::rss_kib(service_a.pid());
            t.rss_load_b = e2e::rss_kib(service_b.pid());

            // A waiting order on A too, for its restart's payment.
            auto a_waiting = "a-waiting-" + std::to_string(n);
            {
                auto client = service_a.client();
                client.post_json("/orders", order_body(a_waiting));
                if (!e2e::poll_json(
                        client, "/orders/" + a_waiting + "/fulfillment",
                        [](const json& j) { return j.value("status", "") == "suspended"; }))
                    throw std::runtime_error(a_waiting + " never suspended");
            }
            auto tag = std::to_string(n);
            t.restart_a = measure_restart(o, service_a, redis_a.url(), probe_a, doc_key, a_waiting,
                                          "a" + tag);
            // On B, the payment goes to the last order of the tier (a copy when there are any).
            t.restart_b = measure_restart(o, service_b, redis_b.url(), probe_b, doc_key,
                                          bench::waiting_order_id(n - 1), "b" + tag);
            print_tier(t);
            results.push_back(std::move(t));
        }
        check_copies(o, tmpl, probe_b, service_b, std::min(o.api_orders, o.tiers.back()),
                     o.tiers.back());
        std::printf("\nsummary");
        for (const auto& t : results)
            std::printf(
                " | N=%ld mem=%.0fB floor=%.0fB x%.2f flows_ratio=%.2f p99_ratio=%.2f "
                "rss_ratio=%.3f restart_ready=%.0fms resume=%.0fms timer=%.0fms",
                t.n, t.memory.per_order, t.memory.floor_per_order,
                t.memory.per_order / t.memory.floor_per_order, bench::median(t.flows_ratio),
                bench::median(t.p99_ratio),
                double(t.restart_b.rss_kib) / double(t.restart_a.rss_kib), t.restart_b.ready_ms,
                t.restart_b.paid_ms, t.restart_b.first_timer_ms);
        std::printf("\n");
        return 0;
    } catch (const std::exception& e) {
        std::cerr << "keel_scale_bench: " << e.what() << "\n";
        return 1;
    }
}
