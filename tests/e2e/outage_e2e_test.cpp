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

#include "order_traffic.hpp"
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

using keel::e2e::order_call;
using outcome = keel::e2e::order_outcome;

bool ok(const outcome& o) {
    return o.ok();
}

// A load balancer's readiness probe. /readyz PINGs Redis with a 1 s timeout, shorter than
// that of the requests queued before it, so while Redis is down requests also expire from
// the middle of the Redis client's queue.
struct probe_answer {
    int status = 0;  // 0: no HTTP answer
    std::string detail;

    std::string describe() const {
        return "GET /readyz: " + (status ? std::to_string(status) : std::string("no answer")) +
               " " + detail;
    }
};

std::vector<probe_answer> probe(const service_process& service, const std::atomic<bool>& stop) {
    std::vector<probe_answer> out;
    auto c = service.client(client_timeout);
    while (!stop) {
        probe_answer o;
        try {
            auto res = c.get("/readyz");
            o.status = keel::http::to_int(res.status);
            o.detail = res.body;
        } catch (const std::exception& e) {
            o.detail = e.what();
            c = service.client(client_timeout);
        }
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

    template <class Answer>
    void add(const Answer& o) {
        ++count;
        if (examples.size() < examples_kept) examples.push_back(o.describe());
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
        keel::e2e::order_traffic traffic(
            service, "o-" + std::to_string(round),
            {.clients = clients, .client_timeout = client_timeout, .pause_after_failure = 20ms});
        std::atomic<bool> stop{false};
        std::vector<probe_answer> probed;
        std::thread prober([&] { probed = probe(service, stop); });
        bool alive = stays_up(service, traffic_before);
        if (alive) {
            shut_down(redis);
            alive = stays_up(service, outage);
            redis.start();
            alive = alive && stays_up(service, traffic_after);
        }
        stop = true;
        prober.join();
        auto answers = traffic.stop();
        if (!redis.running()) redis.start();

        for (const auto& o : probed) {
            if (o.status == 0) no_answer.add(o);
            if (o.status != 0 && o.status != 200 && o.status != 503) wrong_status.add(o);
        }
        tally creates, payments;
        clock_type::duration slowest{};
        for (auto& o : answers) {
            auto& t = o.what == order_call::create ? creates : payments;
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
    for (auto what : {order_call::create, order_call::pay}) {
        for (const auto& o : all) {
            if (o.what != what || !ok(o)) continue;
            std::string last;
            auto found = poll_json(
                c, "/orders/" + o.order,
                [&](const json& order) {
                    return what == order_call::create ||
                           keel::e2e::payments_with(order, o.tx()) > 0;
                },
                remaining(deadline), &last);
            ++(what == order_call::create ? orders : paid);
            if (found) continue;
            ++(what == order_call::create ? lost_orders : lost_payments);
            if (lost.size() < examples_kept) lost.push_back(o.describe() + " -> " + last);
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
