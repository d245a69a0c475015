// keel_soak: keel-orders under steady order traffic for a long time, with a fault every few
// minutes, reported per window. Not part of the test suite: run it by hand (see README.md).
//
// The service reaches a real redis-server (AOF everysec) through keel::test::fault_proxy.
// Clients create, pay and report delivered one order after another at a steady pace. Faults
// take turns: Redis restarted (SIGTERM, then started on its AOF), the network to Redis stalled
// for 10 s (a half-open peer), the service killed with SIGKILL and started again. Per window:
// flows completed (deliveries that reached their flow), p99 of the answered requests, 503s,
// the service's peak RSS, Redis's used_memory at the window's end. At the end every order
// acknowledged is read back: lost orders, lost payments (answered 2xx, not recorded) and
// doubled payments (recorded twice), counted in the window that acknowledged them.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <keel/test/fault_proxy.hpp>
#include <keel/test/redis_server.hpp>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "order_traffic.hpp"
#include "service_process.hpp"

namespace {

using namespace std::chrono_literals;
using keel::e2e::order_call;
using keel::e2e::order_outcome;
using clock_type = std::chrono::steady_clock;

struct settings {
    std::chrono::minutes length{30};
    std::chrono::minutes window{5};
    std::chrono::seconds fault_every{240};
    int clients = 4;
    std::chrono::milliseconds pace{100};
};

settings parse(int argc, char** argv) {
    settings s;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string flag = argv[i];
        long v = std::stol(argv[i + 1]);
        if (flag == "--minutes")
            s.length = std::chrono::minutes(v);
        else if (flag == "--window-minutes")
            s.window = std::chrono::minutes(v);
        else if (flag == "--fault-every-seconds")
            s.fault_every = std::chrono::seconds(v);
        else if (flag == "--clients")
            s.clients = static_cast<int>(v);
        else if (flag == "--pace-ms")
            s.pace = std::chrono::milliseconds(v);
        else
            throw std::invalid_argument("unknown flag " + flag);
    }
    return s;
}

std::int64_t redis_used_memory(const keel::test::redis_server& redis) {
    auto info = redis.cli({"INFO", "memory"});
    auto at = info.find("used_memory:");
    return at == std::string::npos ? -1 : std::stoll(info.substr(at + 12));
}

struct window_figures {
    int created = 0, paid = 0, completed = 0, unavailable = 0, other = 0, no_answer = 0;
    std::vector<double> latencies_ms;
    std::int64_t rss_peak_kib = 0;
    std::int64_t redis_bytes = 0;
    int lost_orders = 0, lost_payments = 0, doubled_payments = 0, stuck = 0;
    std::vector<std::string> faults;

    void add(const order_outcome& o) {
        if (o.ok()) {
            latencies_ms.push_back(std::chrono::duration<double, std::milli>(o.took).count());
            if (o.what == order_call::create) ++created;
            if (o.what == order_call::pay) ++paid;
            if (o.what == order_call::deliver && keel::e2e::reached_flow(o)) ++completed;
        } else if (o.status == 503) {
            ++unavailable;
        } else if (o.status == 0) {
            ++no_answer;
        } else if (o.status != 409) {
            ++other;
        }
    }
    double p99() {
        if (latencies_ms.empty()) return 0;
        std::sort(latencies_ms.begin(), latencies_ms.end());
        return latencies_ms[latencies_ms.size() * 99 / 100];
    }
};

// Reads every acknowledged order back (several clients at once) and charges what is missing
// or doubled to the window that acknowledged it.
void verify(const keel::e2e::service_process& service,
            const std::vector<std::pair<std::size_t, order_outcome>>& acknowledged,
            std::vector<window_figures>& windows) {
    std::mutex mutex;
    std::atomic<std::size_t> next{0};
    std::vector<std::thread> readers;
    for (int r = 0; r < 4; ++r)
        readers.emplace_back([&] {
            auto c = service.client(15s);
            for (std::size_t i = next++; i < acknowledged.size(); i = next++) {
                const auto& [w, o] = acknowledged[i];
                std::string last;
                auto order = keel::e2e::poll_json(
                    c, "/orders/" + o.order,
                    [&](const nlohmann::json& j) {
                        if (o.what == order_call::pay)
                            return keel::e2e::payments_with(j, o.tx()) > 0;
                        if (o.what == order_call::deliver)
                            return j.value("status", "") == "delivered";
                        return true;
                    },
                    20s, &last, 50ms);
                std::lock_guard lock(mutex);
                auto& f = windows[w];
                if (!order) {
                    ++(o.what == order_call::create ? f.lost_orders
                       : o.what == order_call::pay  ? f.lost_payments
                                                    : f.stuck);
                    std::cerr << "not as acknowledged: " << o.describe() << " -> " << last << "\n";
                } else if (o.what == order_call::pay &&
                           keel::e2e::payments_with(*order, o.tx()) > 1) {
                    ++f.doubled_payments;
                }
            }
        });
    for (auto& t : readers) t.join();
}

}  // namespace

int main(int argc, char** argv) try {
    auto s = parse(argc, argv);
    keel::test::redis_server redis({.appendonly = true, .appendfsync = "everysec", .tcp = true});
    keel::test::fault_proxy proxy(redis.port());
    keel::e2e::service_process service(keel::e2e::service_options{
        .binary = KEEL_ORDERS_BINARY, .redis_url = proxy.url(), .threads = 2});
    service.start();

    std::cout << "keel_soak: " << s.length.count() << " min, windows of " << s.window.count()
              << " min, a fault every " << s.fault_every.count() << " s, " << s.clients
              << " clients pacing " << s.pace.count() << " ms; service log " << service.log_path()
              << std::endl;
    keel::e2e::order_traffic traffic(
        service, "soak",
        {.clients = s.clients, .client_timeout = 15s, .pace = s.pace, .deliver = true});

    const auto start = clock_type::now();
    const std::size_t window_count = static_cast<std::size_t>(s.length / s.window);
    std::vector<window_figures> windows(window_count);
    std::vector<std::pair<std::size_t, order_outcome>> acknowledged;
    auto next_fault = start + s.fault_every;
    int fault_turn = 0;
    for (std::size_t w = 0; w < window_count; ++w) {
        auto& f = windows[w];
        const auto window_end = start + s.window * static_cast<int>(w + 1);
        while (clock_type::now() < window_end) {
            std::this_thread::sleep_for(5s);
            f.rss_peak_kib = std::max(f.rss_peak_kib, keel::e2e::rss_kib(service.pid()));
            for (auto& o : traffic.take()) {
                f.add(o);
                if (o.ok()) acknowledged.emplace_back(w, std::move(o));
            }
            if (clock_type::now() < next_fault) continue;
            switch (fault_turn++ % 3) {
                case 0:
                    f.faults.push_back("Redis restarted");
                    redis.restart();
                    break;
                case 1:
                    f.faults.push_back("10 s stall");
                    proxy.stall();
                    std::this_thread::sleep_for(10s);
                    proxy.heal();
                    break;
                case 2:
                    f.faults.push_back("service killed");
                    service.kill9();
                    service.start();
                    break;
            }
            std::cout << "  fault at "
                      << std::chrono::duration_cast<std::chrono::seconds>(clock_type::now() - start)
                             .count()
                      << " s: " << f.faults.back() << std::endl;
            next_fault = clock_type::now() + s.fault_every;
        }
        f.redis_bytes = redis_used_memory(redis);
        std::cout << "  window " << w + 1 << ": " << f.completed << " flows completed, p99 "
                  << f.p99() << " ms, RSS peak " << f.rss_peak_kib / 1024 << " MiB, Redis "
                  << f.redis_bytes / (1024 * 1024) << " MiB" << std::endl;
    }
    for (auto& o : traffic.stop())
        if (o.ok()) acknowledged.emplace_back(window_count - 1, std::move(o));
    std::cout << "reading back " << acknowledged.size() << " acknowledged requests" << std::endl;
    verify(service, acknowledged, windows);

    std::printf(
        "\n| minutes | flows completed | p99 ms | 503 | other | no answer | service RSS peak MiB "
        "| Redis used_memory MiB | lost orders | lost payments | doubled payments | "
        "stuck | faults |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    int bad = 0;
    for (std::size_t w = 0; w < window_count; ++w) {
        auto& f = windows[w];
        std::string faults;
        for (const auto& x : f.faults) faults += (faults.empty() ? "" : ", ") + x;
        auto from = s.window.count() * static_cast<long>(w);
        std::printf(
            "| %ld-%ld | %d | %.1f | %d | %d | %d | %.1f | %.1f | %d | %d | %d | %d | %s |\n", from,
            from + s.window.count(), f.completed, f.p99(), f.unavailable, f.other, f.no_answer,
            f.rss_peak_kib / 1024.0, f.redis_bytes / (1024.0 * 1024.0), f.lost_orders,
            f.lost_payments, f.doubled_payments, f.stuck, faults.empty() ? "-" : faults.c_str());
        bad += f.lost_orders + f.lost_payments + f.doubled_payments + f.stuck + f.other;
    }
    return bad == 0 ? 0 : 1;
} catch (const std::exception& e) {
    std::cerr << "keel_soak: " << e.what() << "\n";
    return 2;
}
