// keel_orders_load: a load driver for keel-orders on loopback. It starts its own
// redis-server (AOF, fsync as chosen) and its own keel-orders, then pushes N orders through
// create -> pay -> deliver with C concurrent clients (a thread and a keep-alive connection
// each). It reports completed flows per second and the latency from the payment webhook's
// response to the order reading `shipped`, which is the signal-to-resume path of a durable
// process seen from outside (resolution: the poll interval). Bounded in orders and time.
//
//   keel_orders_load [--orders 500] [--concurrency 32] [--threads 2] [--aof always|everysec|off]
//                    [--poll-ms 1] [--max-seconds 300] [--binary PATH]

#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <keel/test/redis_server.hpp>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "service_process.hpp"

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using keel::http::status;
using keel::http::testing::test_client;
using json = nlohmann::json;

struct options {
    int orders = 500;
    int concurrency = 32;
    int threads = 2;
    std::string aof = "always";
    int poll_ms = 1;
    int max_seconds = 300;
#ifdef KEEL_ORDERS_BINARY
    std::string binary = KEEL_ORDERS_BINARY;
#else
    std::string binary;
#endif
};

const char* usage =
    "usage: keel_orders_load [--orders N] [--concurrency C] [--threads T]\n"
    "                        [--aof always|everysec|off] [--poll-ms MS] [--max-seconds S]\n"
    "                        [--binary PATH]\n";

std::optional<options> parse(int argc, char** argv) {
    options o;
    auto number = [](const char* text, int low, int high) -> std::optional<int> {
        char* end = nullptr;
        long v = std::strtol(text, &end, 10);
        if (end == text || *end != '\0' || v < low || v > high) return std::nullopt;
        return static_cast<int>(v);
    };
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
        std::optional<int> n;
        if (flag == "--orders" && (n = number(value, 1, 1'000'000)))
            o.orders = *n;
        else if (flag == "--concurrency" && (n = number(value, 1, 1024)))
            o.concurrency = *n;
        else if (flag == "--threads" && (n = number(value, 1, 256)))
            o.threads = *n;
        else if (flag == "--poll-ms" && (n = number(value, 0, 1000)))
            o.poll_ms = *n;
        else if (flag == "--max-seconds" && (n = number(value, 1, 86'400)))
            o.max_seconds = *n;
        else if (flag == "--aof" &&
                 (std::string(value) == "always" || std::string(value) == "everysec" ||
                  std::string(value) == "off"))
            o.aof = value;
        else if (flag == "--binary")
            o.binary = value;
        else {
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

struct flow_outcome {
    bool ok = false;
    double pay_to_shipped_ms = 0;
    std::string error;
};

class load {
  public:
    load(const options& o, std::uint16_t port)
        : options_(o),
          port_(port),
          deadline_(clock_type::now() + std::chrono::seconds(o.max_seconds)) {}

    void run() {
        std::vector<std::thread> workers;
        for (int i = 0; i < options_.concurrency; ++i) workers.emplace_back([this] { work(); });
        for (auto& w : workers) w.join();
    }

    const std::vector<flow_outcome>& outcomes() const { return outcomes_; }

  private:
    void work() {
        test_client client("127.0.0.1", port_, 10s);
        for (;;) {
            int n = next_.fetch_add(1);
            if (n >= options_.orders || clock_type::now() > deadline_) return;
            flow_outcome out;
            try {
                out = flow(client, "load-" + std::to_string(n));
            } catch (const std::exception& e) {
                out.error = e.what();
                client = test_client("127.0.0.1", port_, 10s);
            }
            std::lock_guard lock(mutex_);
            outcomes_.push_back(std::move(out));
        }
    }

    // Polls `target` until its JSON `status` is `wanted`; returns when it was first seen.
    std::optional<clock_type::time_point> wait_status(test_client& client,
                                                      const std::string& target,
                                                      const std::string& wanted,
                                                      std::chrono::milliseconds interval,
                                                      std::string& last) {
        auto give_up = std::min(deadline_, clock_type::now() + 30s);
        while (clock_type::now() < give_up) {
            auto res = client.get(target);
            if (res.status == status::ok) {
                auto body = json::parse(res.body, nullptr, false);
                if (!body.is_discarded() && body.value("status", "") == wanted)
                    return clock_type::now();
            }
            last = std::to_string(keel::http::to_int(res.status)) + " " + res.body;
            if (interval.count() > 0) std::this_thread::sleep_for(interval);
        }
        return std::nullopt;
    }

    flow_outcome flow(test_client& client, const std::string& id) {
        flow_outcome out;
        auto created = client.post_json("/orders", {{"id", id},
                                                    {"email", id + "@example.com"},
                                                    {"address", "1 Load Lane"},
                                                    {"total", 9.5}});
        if (created.status != status::created) {
            out.error = "create " + id + ": " + created.body;
            return out;
        }
        json payment{{"orderId", id}, {"transactionId", "tx-" + id}, {"amount", 9.5}};
        auto paid = client.post_json("/webhooks/payment", payment);
        auto acknowledged = clock_type::now();
        if (paid.status != status::ok) {
            out.error = "pay " + id + ": " + paid.body;
            return out;
        }
        std::string last;
        auto shipped = wait_status(client, "/orders/" + id, "shipped",
                                   std::chrono::milliseconds(options_.poll_ms), last);
        if (!shipped) {
            out.error = id + " never shipped; last " + last;
            return out;
        }
        out.pay_to_shipped_ms =
            std::chrono::duration<double, std::milli>(*shipped - acknowledged).count();
        auto delivered = client.post_json("/webhooks/delivered", {{"orderId", id}});
        if (delivered.status != status::ok) {
            out.error = "deliver " + id + ": " + delivered.body;
            return out;
        }
        auto completion_poll = std::chrono::milliseconds(std::max(options_.poll_ms, 5));
        if (!wait_status(client, "/orders/" + id + "/fulfillment", "completed", completion_poll,
                         last)) {
            out.error = id + " never completed; last " + last;
            return out;
        }
        out.ok = true;
        return out;
    }

    const options& options_;
    std::uint16_t port_;
    clock_type::time_point deadline_;
    std::atomic<int> next_{0};
    std::mutex mutex_;
    std::vector<flow_outcome> outcomes_;
};

double percentile(const std::vector<double>& sorted, double p) {
    if (sorted.empty()) return 0;
    auto rank = static_cast<std::size_t>(p * static_cast<double>(sorted.size() - 1) + 0.5);
    return sorted[std::min(rank, sorted.size() - 1)];
}

}  // namespace

int main(int argc, char** argv) {
    auto parsed = parse(argc, argv);
    if (!parsed) return 2;
    const options& o = *parsed;
    try {
        keel::test::redis_server_options redis_options;
        redis_options.appendonly = o.aof != "off";
        if (redis_options.appendonly) redis_options.appendfsync = o.aof;
        keel::test::redis_server redis(redis_options);
        keel::e2e::service_process service({.binary = o.binary,
                                            .redis_url = redis.url(),
                                            .threads = o.threads,
                                            .log_level = "warn"});

        load driver(o, service.port());
        auto started = clock_type::now();
        driver.run();
        double wall = std::chrono::duration<double>(clock_type::now() - started).count();

        std::vector<double> latencies;
        std::vector<std::string> errors;
        for (const auto& f : driver.outcomes()) {
            if (f.ok)
                latencies.push_back(f.pay_to_shipped_ms);
            else
                errors.push_back(f.error);
        }
        std::sort(latencies.begin(), latencies.end());
        auto completed = latencies.size();
        auto not_run = static_cast<std::size_t>(o.orders) - driver.outcomes().size();

        std::printf("keel-orders load: %d orders, %d clients, service --threads %d, redis AOF %s\n",
                    o.orders, o.concurrency, o.threads, o.aof.c_str());
        std::printf("  %-28s %zu / %d (%zu failed, %zu not run)\n", "flows completed", completed,
                    o.orders, errors.size(), not_run);
        std::printf("  %-28s %.2f s\n", "wall time", wall);
        std::printf("  %-28s %.1f\n", "completed flows/s", static_cast<double>(completed) / wall);
        std::printf("  %-28s p50 %.2f ms   p99 %.2f ms   max %.2f ms   (poll every %d ms)\n",
                    "payment ack -> shipped", percentile(latencies, 0.50),
                    percentile(latencies, 0.99), latencies.empty() ? 0.0 : latencies.back(),
                    o.poll_ms);
        for (std::size_t i = 0; i < errors.size() && i < 5; ++i)
            std::printf("  error: %s\n", errors[i].c_str());
        int code = service.stop();
        bool clean = code >= 0 && WIFEXITED(code) && WEXITSTATUS(code) == 0;
        if (!errors.empty() || not_run > 0 || !clean) {
            if (!clean) std::printf("  the service did not stop cleanly (status %d)\n", code);
            service.print_log();
            return 1;
        }
        return 0;
    } catch (const std::exception& e) {
        std::cerr << "keel_orders_load: " << e.what() << "\n";
        return 1;
    }
}
