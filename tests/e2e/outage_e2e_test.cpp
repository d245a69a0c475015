// End-to-end test of keel-orders through Redis outages under load: four clients create and
// pay orders, and a readiness probe polls /readyz, while Redis is shut down (SHUTDOWN
// NOSAVE) and, some seconds later, started again on its AOF; five rounds. Requests that
// expired while Redis was down once crashed the service (a stack overflow in the Redis
// client), so the service must still run after every round; while Redis is away it must
// answer 503 with Retry-After (or 409 for a busy order), never 500 and never drop a
// connection; and nothing it acknowledged may be lost: every order it created exists and
// every payment it answered 2xx ends up in its order.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <keel/test/redis_server.hpp>
#include <string>
#include <thread>
#include <vector>

#include "service_process.hpp"

namespace {

using namespace std::chrono_literals;
using keel::e2e::poll_json;
using keel::e2e::service_process;
using keel::http::testing::test_client;
using json = nlohmann::json;
using clock_type = std::chrono::steady_clock;

constexpr int rounds = 5;
constexpr int clients = 4;
constexpr auto traffic_before = 2s;
// Longer than the service's Redis request timeout (5 s, the connection_options default, which
// keel-orders has no flag for), so that the clients' requests queued when Redis went away
// expire while it is still down.
constexpr auto outage = 6s;
constexpr auto traffic_after = 3s;
// Above the longest a request may take while Redis is down: it can wait out the 5 s Redis
// request timeout more than once (the order's lock, then the save, the start or the emit).
constexpr auto client_timeout = 15s;
constexpr std::size_t examples_kept = 8;

enum class call { create, pay, ready };

struct outcome {
    call what = call::create;
    std::string order;
    std::string tx;
    int status = 0;  // 0: no HTTP answer
    bool retry_after = false;
    std::string detail;  // the body, or why there was no answer
    clock_type::duration took{};
};

bool ok(const outcome& o) {
    return o.status >= 200 && o.status < 300;
}

std::string describe(const outcome& o) {
    static constexpr const char* names[] = {"create ", "payment ", "GET /readyz"};
    return names[static_cast<int>(o.what)] + o.order + ": " +
           (o.status ? std::to_string(o.status) : std::string("no answer")) + " " + o.detail;
}

outcome send(test_client& c, call what, const std::string& order, const std::string& tx) {
    outcome o{.what = what, .order = order, .tx = tx};
    auto start = clock_type::now();
    try {
        auto res = what == call::create
                       ? c.post_json("/orders", {{"id", order},
                                                 {"email", order + "@example.com"},
                                                 {"address", "1 Harbour Road"},
                                                 {"total", 10.0}})
                       : c.post_json("/webhooks/payment",
                                     {{"orderId", order}, {"transactionId", tx}, {"amount", 10.0}});
        o.status = keel::http::to_int(res.status);
        o.retry_after = res.header("Retry-After").has_value();
        o.detail = res.body;
    } catch (const std::exception& e) {
        o.detail = e.what();
    }
    o.took = clock_type::now() - start;
    return o;
}

// One client: creates an order, pays it when the create succeeded, and so on until `stop`.
std::vector<outcome> drive(const service_process& service, const std::string& prefix,
                           const std::atomic<bool>& stop) {
    std::vector<outcome> out;
    auto c = service.client(client_timeout);
    for (int n = 0; !stop; ++n) {
        auto order = prefix + "-" + std::to_string(n);
        out.push_back(send(c, call::create, order, {}));
        if (ok(out.back())) out.push_back(send(c, call::pay, order, "tx-" + order));
        if (out.back().status == 0) c = service.client(client_timeout);
        if (!ok(out.back())) std::this_thread::sleep_for(20ms);
    }
    return out;
}

// A load balancer's readiness probe. /readyz PINGs Redis with a 1 s timeout, shorter than
// that of the requests queued before it, so while Redis is down requests also expire from
// the middle of the Redis client's queue.
std::vector<outcome> probe(const service_process& service, const std::atomic<bool>& stop) {
    std::vector<outcome> out;
    auto c = service.client(client_timeout);
    while (!stop) {
        outcome o{.what = call::ready};
        auto start = clock_type::now();
        try {
            auto res = c.get("/readyz");
            o.status = keel::http::to_int(res.status);
            o.detail = res.body;
        } catch (const std::exception& e) {
            o.detail = e.what();
            c = service.client(client_timeout);
        }
        o.took = clock_type::now() - start;
        out.push_back(std::move(o));
        std::this_thread::sleep_for(200ms);
    }
    return out;
}

// Waits `how_long`; false as soon as the service has exited.
bool stays_up(service_process& service, clock_type::duration how_long) {
    auto until = clock_type::now() + how_long;
    while (clock_type::now() < until) {
        if (!service.running()) return false;
        std::this_thread::sleep_for(50ms);
    }
    return service.running();
}

// `redis-cli shutdown nosave`; the harness's stop() then reaps the exited server (its
// SIGTERM finds nothing left to stop) so that start() runs it again on the same AOF.
void shut_down(keel::test::redis_server& redis) {
    auto said = redis.cli({"SHUTDOWN", "NOSAVE"});
    if (!said.empty()) std::cout << "redis-cli SHUTDOWN NOSAVE: " << said << "\n";
    redis.stop();
}

struct tally {
    int ok = 0;
    int unavailable = 0;
    int conflict = 0;
    int other = 0;
    int no_answer = 0;
};

std::ostream& operator<<(std::ostream& out, const tally& t) {
    return out << t.ok << " ok, " << t.unavailable << " 503, " << t.conflict << " 409, " << t.other
               << " other, " << t.no_answer << " no answer";
}

// Answers that break a rule: how many, and the first few.
struct breach {
    int count = 0;
    std::vector<std::string> examples;

    void add(const outcome& o) {
        ++count;
        if (examples.size() < examples_kept) examples.push_back(describe(o));
    }
};

std::string joined(const std::vector<std::string>& lines) {
    std::string out;
    for (const auto& l : lines) out += "\n  " + l;
    return out;
}

std::chrono::milliseconds remaining(clock_type::time_point deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now());
    return std::max(left, 1ms);
}

bool has_payment(const json& order, const std::string& tx) {
    if (!order.contains("payments") || !order["payments"].is_array()) return false;
    for (const auto& p : order["payments"])
        if (p.is_object() && p.value("transactionId", "") == tx) return true;
    return false;
}

TEST(orders_outage_e2e, survives_redis_shutdowns_under_load_and_loses_nothing_acknowledged) {
    keel::test::redis_server redis({.appendonly = true, .appendfsync = "always"});
    service_process service(keel::e2e::service_options{
        .binary = KEEL_ORDERS_BINARY,
        .redis_url = redis.url(),
        .threads = 2,
    });

    std::vector<outcome> all;
    breach wrong_status, missing_retry_after, no_answer;
    int died_in = 0;
    for (int round = 1; round <= rounds; ++round) {
        std::atomic<bool> stop{false};
        std::vector<std::vector<outcome>> results(clients + 1);
        std::vector<std::thread> threads;
        for (int i = 0; i < clients; ++i) {
            auto prefix = "o-" + std::to_string(round) + "-" + std::to_string(i);
            threads.emplace_back([&, i, prefix] {
                results[static_cast<std::size_t>(i)] = drive(service, prefix, stop);
            });
        }
        threads.emplace_back([&] { results.back() = probe(service, stop); });
        bool alive = stays_up(service, traffic_before);
        if (alive) {
            shut_down(redis);
            alive = stays_up(service, outage);
            redis.start();
            alive = alive && stays_up(service, traffic_after);
        }
        stop = true;
        for (auto& t : threads) t.join();
        if (!redis.running()) redis.start();

        tally creates, payments;
        clock_type::duration slowest{};
        for (auto& r : results) {
            for (auto& o : r) {
                if (o.what == call::ready) {
                    if (o.status == 0) no_answer.add(o);
                    if (o.status != 0 && o.status != 200 && o.status != 503) wrong_status.add(o);
                    continue;
                }
                auto& t = o.what == call::create ? creates : payments;
                slowest = std::max(slowest, o.took);
                if (ok(o)) {
                    ++t.ok;
                } else if (o.status == 503) {
                    ++t.unavailable;
                    if (!o.retry_after) missing_retry_after.add(o);
                } else if (o.status == 409) {
                    ++t.conflict;
                } else if (o.status == 0) {
                    ++t.no_answer;
                    no_answer.add(o);
                } else {
                    ++t.other;
                    wrong_status.add(o);
                }
                all.push_back(std::move(o));
            }
        }
        std::cout << "round " << round << ": creates " << creates << "; payments " << payments
                  << "; slowest answer "
                  << std::chrono::duration_cast<std::chrono::milliseconds>(slowest).count() << " ms"
                  << std::endl;
        if (!service.running()) {
            died_in = round;
            break;
        }
    }

    EXPECT_EQ(wrong_status.count, 0)
        << "creates and payments must be answered 2xx, 503 or 409, /readyz 200 or 503:"
        << joined(wrong_status.examples);
    EXPECT_EQ(missing_retry_after.count, 0)
        << "every 503 must carry Retry-After:" << joined(missing_retry_after.examples);
    ASSERT_EQ(died_in, 0) << "the service died in round " << died_in << "; its log follows";
    EXPECT_EQ(no_answer.count, 0) << "the service stayed up, so every request deserved an answer:"
                                  << joined(no_answer.examples);

    // Orders first (one GET each), then payments, which the fulfilment process records as a
    // durable step after the webhook's answer, retried with backoff while Redis was away (an
    // instance whose lease outlived a crash is taken over after the 10 s lease TTL).
    auto c = service.client(client_timeout);
    auto deadline = clock_type::now() + 30s;
    int orders = 0, paid = 0, lost_orders = 0, lost_payments = 0;
    std::vector<std::string> lost;
    for (auto what : {call::create, call::pay}) {
        for (const auto& o : all) {
            if (o.what != what || !ok(o)) continue;
            std::string last;
            auto found = poll_json(
                c, "/orders/" + o.order,
                [&](const json& order) { return what == call::create || has_payment(order, o.tx); },
                remaining(deadline), &last);
            ++(what == call::create ? orders : paid);
            if (found) continue;
            ++(what == call::create ? lost_orders : lost_payments);
            if (lost.size() < examples_kept) lost.push_back(describe(o) + " -> " + last);
        }
    }
    std::cout << "acknowledged: " << orders << " orders, " << paid << " payments; lost "
              << lost_orders << " orders, " << lost_payments << " payments" << std::endl;
    ::testing::Test::RecordProperty("orders_acknowledged", orders);
    ::testing::Test::RecordProperty("payments_acknowledged", paid);
    EXPECT_EQ(lost_orders, 0) << "orders answered 2xx that do not exist:" << joined(lost);
    EXPECT_EQ(lost_payments, 0) << "payments answered 2xx that were not recorded:" << joined(lost);
}

}  // namespace
