// End-to-end tests of keel-orders on a network that lies: the service reaches a real
// redis-server through keel::test::fault_proxy while clients create and pay orders.
//
//   stall  Redis goes silent for 30 s (a half-open peer). The service notices, answers 503
//          with Retry-After (bursts of new connections beyond its connection limit too),
//          its memory stays bounded, and once the network heals it serves again.
//   resets Replies cut by RST again and again. Nothing the service acknowledged is lost.
//
// Afterwards, in both: every order answered 2xx exists, every payment answered 2xx is in
// its order, and every order, paid again now (the webhook is idempotent), ships: no
// fulfilment process is stuck.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <iostream>
#include <keel/test/fault_proxy.hpp>
#include <keel/test/redis_server.hpp>
#include <string>
#include <thread>
#include <vector>

#include "order_traffic.hpp"
#include "service_process.hpp"

namespace {

using namespace std::chrono_literals;
using keel::e2e::poll_json;
using keel::e2e::service_process;
using keel::http::testing::raw_connection;
using keel::http::testing::test_client;
using keel::test::fault_proxy;
using json = nlohmann::json;
using clock_type = std::chrono::steady_clock;

constexpr int clients = 4;
constexpr auto client_timeout = 15s;
// Connections the service admits (--http-max-connections); a burst opens more at once.
constexpr int max_connections = 32;
constexpr int burst = 96;
// How much the service's resident memory may grow during the stall.
constexpr std::int64_t rss_growth_limit_kib = 64 * 1024;

using outcome = keel::e2e::order_outcome;
using keel::e2e::order_call;
using keel::e2e::send_order_call;

bool ok(const outcome& o) {
    return o.ok();
}

// Clients driving the service on their own threads until stop().
class traffic : public keel::e2e::order_traffic {
  public:
    traffic(const service_process& service, const std::string& name)
        : order_traffic(service, name, {.clients = clients, .client_timeout = client_timeout}) {}
};

// `burst` connections opened at once, each sending one create: their statuses (0: none).
std::vector<outcome> open_burst(const service_process& service, int round) {
    std::vector<outcome> out(burst);
    std::vector<std::thread> threads;
    for (int i = 0; i < burst; ++i) {
        threads.emplace_back([&, i] {
            auto& o = out[static_cast<std::size_t>(i)];
            o.order = "burst-" + std::to_string(round) + "-" + std::to_string(i);
            try {
                raw_connection c("127.0.0.1", service.port(), 30s);
                auto body = json{
                    {"id", o.order},
                    {"email", "b@example.com"},
                    {"address", "1 Harbour Road"},
                    {"total",
                     10.0}}.dump();
                c.send(
                    "POST /orders HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                    "Connection: close\r\nContent-Length: " +
                    std::to_string(body.size()) + "\r\n\r\n" + body);
                if (auto res = c.read_response()) {
                    o.status = keel::http::to_int(res->status);
                    o.retry_after = res->header("Retry-After").has_value();
                }
            } catch (const std::exception& e) {
                o.detail = e.what();
            }
        });
    }
    for (auto& t : threads) t.join();
    return out;
}

// The answers a client may get while Redis cannot be reached: 2xx, 503 with Retry-After, 409.
void expect_honest_answers(const std::vector<outcome>& all) {
    int bad = 0;
    for (const auto& o : all) {
        bool fine = ok(o) || (o.status == 503 && o.retry_after) || o.status == 409;
        if (fine || ++bad > 5) continue;
        ADD_FAILURE() << o.describe();
    }
    EXPECT_EQ(bad, 0);
}

// Nothing acknowledged lost, nothing stuck: see the file comment.
void expect_nothing_lost_or_stuck(const service_process& service, const std::vector<outcome>& all) {
    auto c = service.client(client_timeout);
    int orders = 0, payments = 0;
    for (const auto& o : all) {
        if (!ok(o)) continue;
        std::string last;
        auto found = poll_json(
            c, "/orders/" + o.order,
            [&](const json& order) {
                return o.what != order_call::pay || keel::e2e::payments_with(order, o.tx()) > 0;
            },
            20s, &last);
        EXPECT_TRUE(found) << o.describe() << " -> " << last;
        ++(o.what == order_call::pay ? payments : orders);
    }
    for (const auto& o : all) {
        if (o.what != order_call::create || !ok(o)) continue;
        outcome paid;
        for (int i = 0; i < 100 && !ok(paid); ++i) {
            paid = send_order_call(c, order_call::pay, o.order);
            if (!ok(paid)) std::this_thread::sleep_for(100ms);
        }
        EXPECT_TRUE(ok(paid)) << o.order << ": " << paid.status << " " << paid.detail;
        std::string last;
        auto shipped = poll_json(
            c, "/orders/" + o.order,
            [](const json& order) { return order.value("status", "") == "shipped"; }, 20s, &last);
        EXPECT_TRUE(shipped) << "order " << o.order << " is stuck: " << last;
    }
    std::cout << "acknowledged " << orders << " orders and " << payments
              << " payments; all found, all shipped" << std::endl;
}

class orders_fault_e2e : public ::testing::Test {
  protected:
    void TearDown() override {
        if (HasFailure()) service.print_log();
    }

    keel::test::redis_server redis{{.appendonly = true, .tcp = true}};
    fault_proxy proxy{redis.port()};
    service_process service{keel::e2e::service_options{
        .binary = KEEL_ORDERS_BINARY,
        .redis_url = proxy.url(),
        .threads = 2,
        .extra_args = {"--http-max-connections", std::to_string(max_connections)},
    }};
};

TEST_F(orders_fault_e2e, a_30_second_stall_is_answered_503_in_bounded_memory_then_heals) {
#ifdef KEEL_SANITIZED
    GTEST_SKIP() << "measures the service's memory, which ASan's quarantine inflates";
#endif
    service.start();
    traffic before(service, "before");
    std::this_thread::sleep_for(2s);
    auto rss_before = keel::e2e::rss_kib(service.pid());
    auto warm = before.stop();

    traffic during(service, "during");
    proxy.stall();
    auto stalled_at = clock_type::now();
    std::vector<outcome> bursts;
    std::thread bursting([&] {  // at 2 s, 12 s and 22 s into the stall
        for (int round = 0; round < 3; ++round) {
            std::this_thread::sleep_until(stalled_at + 2s + round * 10s);
            auto b = open_burst(service, round);
            bursts.insert(bursts.end(), b.begin(), b.end());
        }
    });
    std::int64_t rss_peak = rss_before;
    while (clock_type::now() - stalled_at < 30s) {
        rss_peak = std::max(rss_peak, keel::e2e::rss_kib(service.pid()));
        std::this_thread::sleep_for(250ms);
    }
    bursting.join();
    proxy.heal();
    auto healed_at = clock_type::now();
    auto c = service.client(client_timeout);
    bool serving = keel::e2e::eventually(
        [&] { return ok(send_order_call(c, order_call::create, "after-heal")); }, 20s, 100ms);
    auto recovery = clock_type::now() - healed_at;
    auto stalled = during.stop();

    std::cout << "RSS " << rss_before << " KiB before, peak " << rss_peak
              << " KiB during the stall; serving again "
              << std::chrono::duration_cast<std::chrono::milliseconds>(recovery).count()
              << " ms after the network healed" << std::endl;
    ASSERT_TRUE(service.running());
    EXPECT_TRUE(serving);
    EXPECT_LT(rss_peak - rss_before, rss_growth_limit_kib);
    int burst_503 = 0, burst_other = 0;
    for (const auto& o : bursts) (o.status == 503 && o.retry_after ? burst_503 : burst_other)++;
    std::cout << "bursts: " << burst_503 << " answered 503 with Retry-After, " << burst_other
              << " otherwise" << std::endl;
    EXPECT_EQ(burst_other, 0);
    EXPECT_GT(burst_503, 0);
    expect_honest_answers(stalled);
    warm.insert(warm.end(), stalled.begin(), stalled.end());
    expect_nothing_lost_or_stuck(service, warm);
}

TEST_F(orders_fault_e2e, replies_reset_mid_way_lose_nothing_acknowledged) {
    service.start();
    traffic load(service, "resets");
    for (int i = 0; i < 32; ++i) {
        std::this_thread::sleep_for(250ms);
        proxy.reset_mid_reply();
    }
    std::this_thread::sleep_for(1s);
    auto all = load.stop();
    ASSERT_TRUE(service.running());
    std::cout << "connections cut mid-reply: " << proxy.stats().cuts << std::endl;
    EXPECT_GE(proxy.stats().cuts, 10u);
    expect_honest_answers(all);
    expect_nothing_lost_or_stuck(service, all);
}

}  // namespace
