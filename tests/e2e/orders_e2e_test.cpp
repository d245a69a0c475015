// End-to-end tests of keel-orders: the real binary on a real redis-server, driven over
// HTTP as a client and a payment provider would. They check the service's documented
// contract (flows, idempotent webhooks, signatures, input errors) and that durable
// processes survive a kill -9 of the service and a crash of Redis. Every wait polls with a
// deadline; each test has its own Redis and its own service.

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <keel/framework/redis/slot.hpp>
#include <keel/process/store.hpp>
#include <keel/test/redis_cluster.hpp>
#include <keel/test/redis_server.hpp>
#include <latch>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "service_process.hpp"

namespace {

using namespace std::chrono_literals;
using keel::e2e::poll_json;
using keel::e2e::service_process;
using keel::http::status;
using keel::http::testing::test_client;
using keel::http::testing::test_response;
using json = nlohmann::json;
using clock_type = std::chrono::steady_clock;

std::string hmac_sha256_hex(const std::string& secret, const std::string& body) {
    std::array<unsigned char, EVP_MAX_MD_SIZE> mac{};
    unsigned int size = 0;
    HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
         reinterpret_cast<const unsigned char*>(body.data()), body.size(), mac.data(), &size);
    static constexpr char digits[] = "0123456789abcdef";
    std::string hex;
    for (unsigned int i = 0; i < size; ++i) {
        hex += digits[mac[i] >> 4];
        hex += digits[mac[i] & 0xf];
    }
    return hex;
}

json body_of(const test_response& res) {
    auto body = json::parse(res.body, nullptr, false);
    if (body.is_discarded()) {
        ADD_FAILURE() << "not JSON: " << res.body;
    }
    return body;
}

std::string describe(const test_response& res) {
    return std::to_string(keel::http::to_int(res.status)) + " " + res.body;
}

bool is_problem(const test_response& res) {
    auto type = res.header("Content-Type");
    return type && type->starts_with("application/problem+json");
}

std::chrono::milliseconds remaining(clock_type::time_point deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now());
    return std::max(left, 1ms);
}

std::string fulfillment_of(const std::string& order) {
    return "order/" + order + "/fulfillment";
}

test_response create_order(test_client& c, const std::string& id, double total = 42.5) {
    return c.post_json("/orders", {{"id", id},
                                   {"email", id + "@example.com"},
                                   {"address", "1 Harbour Road"},
                                   {"total", total}});
}

json payment(const std::string& order, const std::string& tx, double amount = 42.5) {
    return {{"orderId", order}, {"transactionId", tx}, {"amount", amount}};
}

test_response pay(test_client& c, const std::string& order, const std::string& tx,
                  double amount = 42.5) {
    return c.post_json("/webhooks/payment", payment(order, tx, amount));
}

test_response deliver(test_client& c, const std::string& order) {
    return c.post_json("/webhooks/delivered", {{"orderId", order}});
}

// A webhook sender's retry loop: sends until the service answers 200 (a refused
// connection or a 5xx while Redis restarts is retried).
test_response send_until_ok(test_client& c, const std::string& target, const json& body,
                            std::chrono::milliseconds timeout = 20s) {
    std::optional<test_response> last;
    std::string error;
    keel::e2e::eventually(
        [&] {
            last = c.post_json(target, body);
            return last->status == status::ok;
        },
        timeout, 20ms, &error);
    if (!last) throw std::runtime_error("no answer from " + target + ": " + error);
    return *last;
}

// A first delivery must reach the one process instance waiting for it.
void expect_webhook_ok(const test_response& res, bool duplicate, const std::string& what) {
    ASSERT_EQ(res.status, status::ok) << what << ": " << describe(res);
    auto b = body_of(res);
    EXPECT_EQ(b.value("received", false), true) << what << ": " << res.body;
    EXPECT_EQ(b.value("duplicate", !duplicate), duplicate) << what << ": " << res.body;
    ASSERT_TRUE(b.contains("delivered") && b["delivered"].is_number_integer())
        << what << ": " << res.body;
    if (!duplicate) {
        EXPECT_EQ(b["delivered"].get<int>(), 1) << what << ": " << res.body;
    }
}

std::optional<json> wait_order_status(test_client& c, const std::string& id,
                                      const std::string& wanted,
                                      std::chrono::milliseconds timeout = 10s) {
    std::string last;
    auto found = poll_json(
        c, "/orders/" + id, [&](const json& o) { return o.value("status", "") == wanted; }, timeout,
        &last);
    if (!found) {
        ADD_FAILURE() << "order " << id << " never reached " << wanted << "; " << last;
    }
    return found;
}

// Waits until the fulfilment process has finished (completed, failed or cancelled).
std::optional<json> wait_fulfillment_done(test_client& c, const std::string& id,
                                          std::chrono::milliseconds timeout = 10s) {
    static const std::set<std::string> final_states{"completed", "failed", "cancelled"};
    std::string last;
    auto found = poll_json(
        c, "/orders/" + id + "/fulfillment",
        [](const json& p) { return final_states.contains(p.value("status", "")); }, timeout, &last);
    if (!found) {
        ADD_FAILURE() << "fulfilment of " << id << " did not finish; " << last;
    }
    return found;
}

std::optional<json> wait_fulfillment_status(test_client& c, const std::string& id,
                                            const std::string& wanted,
                                            std::chrono::milliseconds timeout = 10s) {
    std::string last;
    auto found = poll_json(
        c, "/orders/" + id + "/fulfillment",
        [&](const json& p) { return p.value("status", "") == wanted; }, timeout, &last);
    if (!found) {
        ADD_FAILURE() << "fulfilment of " << id << " never " << wanted << "; " << last;
    }
    return found;
}

json get_order(test_client& c, const std::string& id) {
    auto res = c.get("/orders/" + id);
    EXPECT_EQ(res.status, status::ok) << describe(res);
    return body_of(res);
}

void expect_one_payment(const json& order, const std::string& tx, double amount = 42.5) {
    ASSERT_TRUE(order.contains("payments") && order["payments"].is_array()) << order.dump();
    ASSERT_EQ(order["payments"].size(), 1u) << order.dump();
    EXPECT_EQ(order["payments"][0].value("transactionId", ""), tx) << order.dump();
    EXPECT_DOUBLE_EQ(order["payments"][0].value("amount", 0.0), amount) << order.dump();
}

class orders_e2e : public ::testing::Test {
  protected:
    void start(std::vector<std::string> extra_args = {},
               keel::test::redis_server_options redis_options = {},
               std::vector<std::string> extra_env = {}, std::string log_level = "warn") {
        redis = std::make_unique<keel::test::redis_server>(std::move(redis_options));
        service = std::make_unique<service_process>(keel::e2e::service_options{
            .binary = KEEL_ORDERS_BINARY,
            .redis_url = redis->url(),
            .log_level = std::move(log_level),
            .extra_args = std::move(extra_args),
            .extra_env = std::move(extra_env),
        });
    }
    test_client client() { return service->client(); }

    // Declared in this order so that the service stops before its Redis does.
    std::unique_ptr<keel::test::redis_server> redis;
    std::unique_ptr<service_process> service;
};

TEST_F(orders_e2e, full_order_flow_from_creation_to_delivery) {
    start();
    auto c = client();

    auto created = create_order(c, "o-1");
    ASSERT_EQ(created.status, status::created) << describe(created);
    auto ids = body_of(created);
    EXPECT_EQ(ids.value("order", ""), "o-1");
    EXPECT_EQ(ids.value("process", ""), fulfillment_of("o-1"));

    auto order = get_order(c, "o-1");
    EXPECT_EQ(order.value("id", ""), "o-1");
    EXPECT_EQ(order.value("email", ""), "o-1@example.com");
    EXPECT_EQ(order.value("address", ""), "1 Harbour Road");
    EXPECT_DOUBLE_EQ(order.value("total", 0.0), 42.5);
    EXPECT_EQ(order.value("status", ""), "created");
    EXPECT_EQ(order.value("payments", json::array()), json::array());

    expect_webhook_ok(pay(c, "o-1", "tx-1"), false, "payment");
    std::string last;
    auto paid = poll_json(
        c, "/orders/o-1",
        [](const json& o) {
            auto s = o.value("status", "");
            return s == "paid" || s == "shipped";
        },
        10s, &last);
    ASSERT_TRUE(paid) << last;
    ASSERT_TRUE(wait_order_status(c, "o-1", "shipped"));

    auto waiting = c.get("/orders/o-1/fulfillment");
    ASSERT_EQ(waiting.status, status::ok) << describe(waiting);
    auto w = body_of(waiting);
    EXPECT_EQ(w.value("id", ""), fulfillment_of("o-1"));
    EXPECT_TRUE(w.value("status", "") == "running" || w.value("status", "") == "suspended")
        << w.dump();
    EXPECT_TRUE(w.contains("result") && w["result"].is_null()) << w.dump();

    expect_webhook_ok(deliver(c, "o-1"), false, "delivery");
    auto done = wait_fulfillment_done(c, "o-1");
    ASSERT_TRUE(done);
    EXPECT_EQ(done->value("status", ""), "completed") << done->dump();
    EXPECT_EQ((*done)["result"], json({{"status", "completed"}})) << done->dump();

    auto final_order = get_order(c, "o-1");
    EXPECT_EQ(final_order.value("status", ""), "delivered");
    expect_one_payment(final_order, "tx-1");

    int exit_status = service->stop();
    EXPECT_TRUE(WIFEXITED(exit_status) && WEXITSTATUS(exit_status) == 0)
        << "SIGTERM should stop the service cleanly; waitpid status " << exit_status;
}

TEST_F(orders_e2e, a_retried_payment_webhook_records_one_payment) {
    start();
    auto c = client();
    ASSERT_EQ(create_order(c, "o-dup").status, status::created);

    for (int i = 0; i < 5; ++i)
        expect_webhook_ok(pay(c, "o-dup", "tx-dup"), i > 0, "attempt " + std::to_string(i + 1));
    ASSERT_TRUE(wait_order_status(c, "o-dup", "shipped"));
    expect_one_payment(get_order(c, "o-dup"), "tx-dup");
    auto process = c.get("/orders/o-dup/fulfillment");
    auto p = body_of(process);
    EXPECT_TRUE(p.value("status", "") == "running" || p.value("status", "") == "suspended")
        << "dispatched once and waiting for delivery: " << p.dump();

    // The same webhook five times at once: one of them is the first, the rest duplicates.
    ASSERT_EQ(create_order(c, "o-race").status, status::created);
    std::latch go(5);
    std::vector<test_response> answers(5);
    std::vector<std::string> errors(5);
    std::vector<std::thread> senders;
    for (int i = 0; i < 5; ++i) {
        senders.emplace_back([&, i] {
            try {
                auto own = service->client();
                go.arrive_and_wait();
                answers[static_cast<std::size_t>(i)] = pay(own, "o-race", "tx-race");
            } catch (const std::exception& e) {
                errors[static_cast<std::size_t>(i)] = e.what();
            }
        });
    }
    for (auto& t : senders) t.join();
    int firsts = 0;
    for (std::size_t i = 0; i < answers.size(); ++i) {
        ASSERT_TRUE(errors[i].empty()) << errors[i];
        ASSERT_EQ(answers[i].status, status::ok) << describe(answers[i]);
        if (!body_of(answers[i]).value("duplicate", true)) ++firsts;
    }
    EXPECT_EQ(firsts, 1);
    ASSERT_TRUE(wait_order_status(c, "o-race", "shipped"));
    expect_one_payment(get_order(c, "o-race"), "tx-race");
}

TEST_F(orders_e2e, payment_failure_ends_the_flow) {
    start();
    auto c = client();
    ASSERT_EQ(create_order(c, "o-fail").status, status::created);
    expect_webhook_ok(c.post_json("/webhooks/payment-failed", {{"orderId", "o-fail"}}), false,
                      "payment failed");
    auto done = wait_fulfillment_done(c, "o-fail");
    ASSERT_TRUE(done);
    EXPECT_EQ(done->value("status", ""), "completed") << done->dump();
    EXPECT_EQ((*done)["result"], json({{"status", "payment_failed"}})) << done->dump();
    auto order = get_order(c, "o-fail");
    EXPECT_EQ(order.value("status", ""), "payment_failed");
    EXPECT_EQ(order.value("payments", json::array()), json::array());
}

TEST_F(orders_e2e, unpaid_order_expires_at_the_payment_timeout) {
    start({"--payment-timeout", "1s"});
    auto c = client();
    ASSERT_EQ(create_order(c, "o-late").status, status::created);
    auto done = wait_fulfillment_done(c, "o-late", 15s);
    ASSERT_TRUE(done);
    EXPECT_EQ(done->value("status", ""), "completed") << done->dump();
    EXPECT_EQ((*done)["result"], json({{"status", "payment_timeout"}})) << done->dump();
    auto order = get_order(c, "o-late");
    EXPECT_EQ(order.value("status", ""), "expired");
    EXPECT_EQ(order.value("payments", json::array()), json::array());
}

// An operator cancels an order's fulfilment: the order still says "created", but nothing
// will ship it. Its payment is refused (409, "refund it") and not kept on the order, and so
// is the webhook's retry; before, it was answered 200 {"delivered": 0} and recorded.
TEST_F(orders_e2e, a_payment_for_an_order_whose_fulfilment_was_cancelled_is_refused) {
    start({"--admin-token", "t0ken"});
    auto c = client();
    ASSERT_EQ(create_order(c, "o-void").status, status::created);
    ASSERT_TRUE(wait_fulfillment_status(c, "o-void", "suspended"));
    keel::http::headers auth;
    auth.set("Authorization", "Bearer t0ken");
    auto cancelled = c.post_json("/admin/cancel/" + fulfillment_of("o-void"), json::object(), auth);
    ASSERT_EQ(cancelled.status, status::ok) << describe(cancelled);
    for (int attempt = 0; attempt < 2; ++attempt) {
        auto res = pay(c, "o-void", "tx-void");
        EXPECT_EQ(res.status, status::conflict) << describe(res);
        EXPECT_NE(res.body.find("refund it"), std::string::npos) << res.body;
        auto order = get_order(c, "o-void");
        EXPECT_EQ(order.value("status", ""), "created") << order.dump();
        EXPECT_EQ(order.value("payments", json::array()), json::array()) << order.dump();
    }
}

TEST_F(orders_e2e, creating_an_order_twice_returns_the_same_process) {
    start();
    auto c = client();
    auto first = create_order(c, "o-twice");
    ASSERT_EQ(first.status, status::created) << describe(first);
    auto again = create_order(c, "o-twice");
    ASSERT_EQ(again.status, status::ok) << describe(again);
    EXPECT_EQ(body_of(again).value("process", ""), body_of(first).value("process", ""));
    EXPECT_EQ(body_of(again).value("process", ""), fulfillment_of("o-twice"));

    auto anonymous = c.post_json(
        "/orders", {{"email", "x@example.com"}, {"address", "2 Quay Street"}, {"total", 10}});
    ASSERT_EQ(anonymous.status, status::created) << describe(anonymous);
    auto ids = body_of(anonymous);
    ASSERT_TRUE(ids.contains("order") && ids["order"].is_string()) << ids.dump();
    auto generated = ids["order"].get<std::string>();
    EXPECT_FALSE(generated.empty());
    EXPECT_EQ(ids.value("process", ""), fulfillment_of(generated));
    EXPECT_EQ(get_order(c, generated).value("status", ""), "created");
}

TEST_F(orders_e2e, email_verification_with_a_wrong_code_and_a_resend) {
    start();
    auto c = client();
    auto created = c.post_json("/users", {{"id", "u-1"}, {"email", "ada@example.com"}});
    ASSERT_EQ(created.status, status::created) << describe(created);

    std::string last;
    auto first = poll_json(
        c, "/users/u-1/outbox", [](const json& o) { return o.value("codes", json()).size() == 1; },
        10s, &last);
    ASSERT_TRUE(first) << last;
    json code = (*first)["codes"][0];
    ASSERT_TRUE(code.is_string() || code.is_number_integer()) << first->dump();

    json wrong;
    if (code.is_string()) {
        auto s = code.get<std::string>();
        for (auto& ch : s) ch = (ch >= '0' && ch <= '8') ? static_cast<char>(ch + 1) : '0';
        wrong = s;
    } else {
        wrong = code.get<long long>() + 1;
    }
    auto rejected =
        c.post_json("/webhooks/verification-code", {{"userId", "u-1"}, {"code", wrong}});
    ASSERT_EQ(rejected.status, status::ok) << describe(rejected);

    auto resent = c.post_json("/users/u-1/resend", json::object());
    ASSERT_TRUE(keel::http::to_int(resent.status) >= 200 && keel::http::to_int(resent.status) < 300)
        << describe(resent);
    auto second = poll_json(
        c, "/users/u-1/outbox", [](const json& o) { return o.value("codes", json()).size() == 2; },
        10s, &last);
    ASSERT_TRUE(second) << last;
    EXPECT_EQ((*second)["codes"][0], code) << "oldest first: " << second->dump();
    json latest = (*second)["codes"][1];

    auto accepted =
        c.post_json("/webhooks/verification-code", {{"userId", "u-1"}, {"code", latest}});
    ASSERT_EQ(accepted.status, status::ok) << describe(accepted);

    auto done = poll_json(
        c, "/users/u-1/verification",
        [](const json& v) { return v.value("status", "") == "completed"; }, 10s, &last);
    ASSERT_TRUE(done) << last;
    EXPECT_EQ(done->value("id", ""), "verify/u-1/email") << done->dump();
    const auto& result = (*done)["result"];
    ASSERT_TRUE(result.is_object()) << done->dump();
    EXPECT_EQ(result.value("verified", false), true) << done->dump();
    EXPECT_TRUE(result.contains("reason")) << done->dump();
    EXPECT_EQ(result.value("attempts", -1), 2)
        << "the wrong code and the right one: " << done->dump();
}

TEST_F(orders_e2e, webhooks_must_be_signed_when_a_secret_is_set) {
    start({"--webhook-secret", "s3cret"});
    auto c = client();
    ASSERT_EQ(create_order(c, "o-sig").status, status::created);
    std::string body = payment("o-sig", "tx-sig").dump();

    keel::http::headers plain{{"Content-Type", "application/json"}};
    auto unsigned_res = c.request(keel::http::method::post, "/webhooks/payment", body, plain);
    EXPECT_EQ(unsigned_res.status, status::unauthorized) << describe(unsigned_res);
    EXPECT_TRUE(is_problem(unsigned_res)) << describe(unsigned_res);

    keel::http::headers forged{{"Content-Type", "application/json"},
                               {"X-Signature", "sha256=" + hmac_sha256_hex("guess", body)}};
    auto forged_res = c.request(keel::http::method::post, "/webhooks/payment", body, forged);
    EXPECT_EQ(forged_res.status, status::unauthorized) << describe(forged_res);

    keel::http::headers signed_headers{
        {"Content-Type", "application/json"},
        {"X-Signature", "sha256=" + hmac_sha256_hex("s3cret", body)}};
    auto accepted = c.request(keel::http::method::post, "/webhooks/payment", body, signed_headers);
    expect_webhook_ok(accepted, false, "signed payment");
    ASSERT_TRUE(wait_order_status(c, "o-sig", "shipped"));
    expect_one_payment(get_order(c, "o-sig"), "tx-sig");
}

TEST_F(orders_e2e, the_signal_route_emits_by_path_when_turned_on) {
    start({"--signal-route", "true"});
    auto c = client();
    ASSERT_EQ(create_order(c, "o-op").status, status::created);
    keel::http::headers h{{"Content-Type", "application/json"}, {"Idempotency-Key", "op-1"}};
    std::string body = json{{"transactionId", "tx-op"}, {"amount", 42.5}}.dump();
    auto sent =
        c.request(keel::http::method::post, "/webhooks/signals/payment/o-op/received", body, h);
    ASSERT_EQ(sent.status, status::ok) << describe(sent);
    EXPECT_EQ(body_of(sent), (json{{"delivered", 1}, {"duplicate", false}}));
    ASSERT_TRUE(wait_order_status(c, "o-op", "shipped"));
    expect_one_payment(get_order(c, "o-op"), "tx-op");

    auto wrong = c.request(keel::http::method::post, "/webhooks/signals/payment/o-op/received",
                           R"({"transactionId": 1})", h);
    EXPECT_EQ(wrong.status, status::bad_request) << describe(wrong);
    auto unknown = c.request(keel::http::method::post, "/webhooks/signals/nothing/here", "{}", h);
    EXPECT_EQ(unknown.status, status::not_found) << describe(unknown);
}

TEST_F(orders_e2e, the_signal_route_is_off_by_default) {
    start();
    auto c = client();
    keel::http::headers h{{"Content-Type", "application/json"}};
    auto res = c.request(keel::http::method::post, "/webhooks/signals/payment/o-1/failed", "", h);
    EXPECT_EQ(res.status, status::not_found) << describe(res);
}

constexpr int many = 50;

std::string nth(int i) {
    return "o-" + std::to_string(i);
}
std::string tx_of(int i) {
    return "tx-" + std::to_string(i);
}

void create_and_wait_suspended(test_client& c) {
    for (int i = 0; i < many; ++i) {
        auto res = create_order(c, nth(i));
        ASSERT_EQ(res.status, status::created) << nth(i) << ": " << describe(res);
    }
    auto deadline = clock_type::now() + 15s;
    for (int i = 0; i < many; ++i)
        ASSERT_TRUE(wait_fulfillment_status(c, nth(i), "suspended", remaining(deadline)));
}

void expect_all_complete_with_one_payment(test_client& c) {
    auto deadline = clock_type::now() + 20s;
    for (int i = 0; i < many; ++i)
        ASSERT_TRUE(wait_order_status(c, nth(i), "shipped", remaining(deadline)));
    for (int i = 0; i < many; ++i) {
        auto res = send_until_ok(c, "/webhooks/delivered", {{"orderId", nth(i)}});
        ASSERT_EQ(res.status, status::ok) << nth(i) << ": " << describe(res);
    }
    for (int i = 0; i < many; ++i) {
        auto done = wait_fulfillment_done(c, nth(i), remaining(deadline));
        ASSERT_TRUE(done);
        EXPECT_EQ((*done)["result"], json({{"status", "completed"}})) << done->dump();
    }
    for (int i = 0; i < many; ++i) {
        auto order = get_order(c, nth(i));
        EXPECT_EQ(order.value("status", ""), "delivered") << order.dump();
        expect_one_payment(order, tx_of(i));
    }
}

TEST_F(orders_e2e, suspended_orders_survive_kill_9_of_the_service) {
    start();
    auto c = client();
    ASSERT_NO_FATAL_FAILURE(create_and_wait_suspended(c));

    service->kill9();
    service->start();

    c = client();
    for (int i = 0; i < many; ++i) expect_webhook_ok(pay(c, nth(i), tx_of(i)), false, nth(i));
    ASSERT_FALSE(HasFailure()) << "the payments did not reach the restarted instances";
    ASSERT_NO_FATAL_FAILURE(expect_all_complete_with_one_payment(c));
}

// Redis at its maxmemory (noeviction) answers but refuses every write: a create is 503 with
// Retry-After, /readyz says "not ready" with Redis's reason, /metrics counts the refusals,
// and the service logs one warn line naming the reason at the first refused request. Given
// memory again, it serves without a restart: the engine's heartbeat is a write of a kind that
// was refused, so its success ends the refusal within a heartbeat (5 s).
TEST_F(orders_e2e,
       a_redis_that_refuses_writes_is_named_on_readyz_and_metrics_until_it_accepts_them) {
    start();
    auto c = client();
    ASSERT_EQ(create_order(c, "o-before").status, status::created);
    redis->cli({"CONFIG", "SET", "maxmemory", "1"});
    auto refused = create_order(c, "o-refused");
    EXPECT_EQ(refused.status, status::service_unavailable) << describe(refused);
    EXPECT_TRUE(refused.header("Retry-After")) << describe(refused);
    auto ready = c.get("/readyz");
    EXPECT_EQ(ready.status, status::service_unavailable) << describe(ready);
    EXPECT_NE(ready.body.find("refusing writes: OOM"), std::string::npos) << ready.body;
    auto metrics = c.get("/metrics").body;
    EXPECT_EQ(metrics.find("keel_redis_refused_writes_total{reason=\"oom\"} 0"), std::string::npos);
    EXPECT_NE(metrics.find("keel_redis_refused_writes_total{reason=\"oom\"}"), std::string::npos)
        << metrics;
    for (int i = 0; i < 20; ++i) create_order(c, "o-more-" + std::to_string(i));
    auto log = service->log();
    std::size_t warnings = 0;
    for (auto at = log.find("Redis refuses writes (OOM)"); at != std::string::npos;
         at = log.find("Redis refuses writes (OOM)", at + 1))
        ++warnings;
    EXPECT_EQ(warnings, 1u) << log;
    EXPECT_EQ(log.find("waiting will not cure"), std::string::npos) << "a full Redis is an outage";

    redis->cli({"CONFIG", "SET", "maxmemory", "0"});
    std::string last;
    EXPECT_TRUE(keel::e2e::eventually(
        [&] {
            auto r = c.get("/readyz");
            last = describe(r);
            return r.status == status::ok;
        },
        15s, 100ms))
        << last;
    EXPECT_EQ(create_order(c, "o-after").status, status::created);
}

// Redis answering a script with an error that waiting will not cure (here: a subscription key
// someone overwrote with a string) is a 503 like an outage, but the connection sees a healthy
// server, so the store logs it as an error that says so. The other orders are served.
TEST_F(orders_e2e, a_script_error_from_redis_is_logged_as_an_error_and_answered_503) {
    start();
    auto c = client();
    ASSERT_EQ(create_order(c, "o-broken").status, status::created);
    ASSERT_EQ(create_order(c, "o-fine").status, status::created);
    auto key = redis->cli({"--scan", "--pattern", "keel:*:sub:/payment/o-broken/received"});
    ASSERT_FALSE(key.empty());
    redis->cli({"DEL", key});
    redis->cli({"SET", key, "not a subscription"});
    for (int i = 0; i < 3; ++i) {
        auto refused = pay(c, "o-broken", "tx-" + std::to_string(i));
        EXPECT_EQ(refused.status, status::service_unavailable) << describe(refused);
    }
    auto log = service->log();
    std::size_t lines = 0;
    for (auto at = log.find("error that waiting will not cure"); at != std::string::npos;
         at = log.find("error that waiting will not cure", at + 1))
        ++lines;
    EXPECT_EQ(lines, 1u) << "once in 10 s: " << log;
    auto at = log.find("error that waiting will not cure");
    auto begin = log.rfind('\n', at);
    auto line = log.substr(begin == std::string::npos ? 0 : begin + 1);
    line = line.substr(0, line.find('\n'));
    EXPECT_NE(line.find(" error [process] "), std::string::npos) << line;
    EXPECT_NE(line.find("WRONGTYPE"), std::string::npos) << line;
    expect_webhook_ok(pay(c, "o-fine", "tx-fine"), false, "payment");
    EXPECT_TRUE(wait_order_status(c, "o-fine", "shipped"));
}

// A service started while its Redis is down serves once Redis answers, without a restart:
// meanwhile it is alive, not ready (naming Redis) and answers 503, and its process store,
// whose shard count only Redis knows, opens at the first call after Redis is back.
TEST_F(orders_e2e, a_service_started_before_its_redis_serves_once_redis_answers) {
    redis = std::make_unique<keel::test::redis_server>();
    redis->stop();
    service = std::make_unique<service_process>(keel::e2e::service_options{
        .binary = KEEL_ORDERS_BINARY,
        .redis_url = redis->url(),
        .ready =
            [](std::uint16_t port, std::string& last) {
                try {
                    auto r = test_client("127.0.0.1", port).get("/healthz");
                    last = describe(r);
                    return r.status == status::ok;
                } catch (const std::exception& e) {  // not listening yet
                    last = e.what();
                    return false;
                }
            },
    });
    auto c = client();
    auto ready = c.get("/readyz");
    EXPECT_EQ(ready.status, status::service_unavailable) << describe(ready);
    EXPECT_NE(ready.body.find("redis not connected"), std::string::npos) << ready.body;
    auto refused = create_order(c, "o-early");
    EXPECT_EQ(refused.status, status::service_unavailable) << describe(refused);

    redis->start();
    std::string last;
    EXPECT_TRUE(keel::e2e::eventually(
        [&] {
            auto r = c.get("/readyz");
            last = describe(r);
            return r.status == status::ok;
        },
        15s, 100ms))
        << last;
    auto created = create_order(c, "o-late");
    ASSERT_EQ(created.status, status::created) << describe(created);
    EXPECT_TRUE(poll_json(c, "/orders/o-late/fulfillment", [](const json& j) {
        return j.value("status", "") == "suspended";
    })) << service->log();
}

TEST_F(orders_e2e, acknowledged_payments_survive_a_redis_crash) {
    start({}, {.appendonly = true, .appendfsync = "always"});
    auto c = client();
    ASSERT_NO_FATAL_FAILURE(create_and_wait_suspended(c));

    for (int i = 0; i < many / 2; ++i) expect_webhook_ok(pay(c, nth(i), tx_of(i)), false, nth(i));

    // Settled first (shipped, suspended until delivery), so that no instance holds a lease
    // when Redis dies: a lease held then would only be taken over after its 30 s TTL.
    auto settled = clock_type::now() + 15s;
    for (int i = 0; i < many / 2; ++i)
        ASSERT_TRUE(wait_order_status(c, nth(i), "shipped", remaining(settled)));

    // SIGKILL: with appendfsync always, every write Redis acknowledged is on disk.
    redis->kill();
    redis->start();

    for (int i = many / 2; i < many; ++i) {
        auto res = send_until_ok(c, "/webhooks/payment", payment(nth(i), tx_of(i)));
        ASSERT_EQ(res.status, status::ok) << nth(i) << ": " << describe(res);
        EXPECT_TRUE(body_of(res).contains("duplicate")) << res.body;
    }
    // The payments acknowledged before the crash are remembered: a retry is a duplicate.
    for (int i = 0; i < many / 2; ++i)
        expect_webhook_ok(send_until_ok(c, "/webhooks/payment", payment(nth(i), tx_of(i))), true,
                          "retry of " + nth(i));
    ASSERT_NO_FATAL_FAILURE(expect_all_complete_with_one_payment(c));
}

// keel-orders on a Redis Cluster (3 primaries, 3 replicas) with --redis-wait-replicas 1:
// orders are created and paid while the slots of two process-store shards move to another
// primary, and no caller sees an error (the fan-out of a payment signal reaches keys that
// are mid-migration: the store retries it until the slot has moved); every flow completes
// with one payment, and a retried payment is a duplicate.
TEST_F(orders_e2e, on_a_redis_cluster_flows_complete_while_slots_move) {
    keel::test::redis_cluster cluster;
    service = std::make_unique<service_process>(keel::e2e::service_options{
        .binary = KEEL_ORDERS_BINARY,
        .redis_url = cluster.url(),
        .extra_args = {"--redis-wait-replicas", "1"},
    });
    auto c = client();
    ASSERT_NO_FATAL_FAILURE(create_and_wait_suspended(c));

    std::thread reshard([&] {
        for (const char* shard : {"3", "11", "7"}) {
            auto slot = keel::redis::key_slot(shard);
            auto owner = cluster.primary_of(slot);
            for (auto to : cluster.primaries())
                if (to != owner) {
                    cluster.move_slot(slot, to);
                    break;
                }
        }
    });
    // A slot that moves between a payment's write and its replica wait leaves the wait
    // unanswerable (the WAIT would go to another node's socket): 503, which the sender
    // retries, and the retry may find the payment made. Each is recorded exactly once.
    for (int i = 0; i < many; ++i) {
        auto res = send_until_ok(c, "/webhooks/payment", payment(nth(i), tx_of(i)));
        ASSERT_EQ(res.status, status::ok) << nth(i) << ": " << describe(res);
        EXPECT_TRUE(body_of(res).contains("duplicate")) << res.body;
    }
    reshard.join();
    expect_webhook_ok(pay(c, nth(0), tx_of(0)), true, "retry of " + nth(0));
    ASSERT_NO_FATAL_FAILURE(expect_all_complete_with_one_payment(c));
    service.reset();  // before its cluster goes
}

// keel-orders on a Redis Cluster, every order shipped and waiting for its delivery; then the
// slot of the process-store shard that holds the most of them is held half migrated for 2 s
// (MIGRATING/IMPORTING, the instances' inboxes and the wake index moved, the rest not yet)
// while the carrier's webhooks arrive. Every webhook answered 200 reaches its flow:
// each flow completes, and the webhook sent again is a duplicate. Before the scripts checked
// their keys, a fan-out recorded the idempotency key, was refused at a moved key, and its
// retry answered `duplicate` to itself: 200, and a flow that never resumed.
TEST_F(orders_e2e, on_a_redis_cluster_deliveries_reach_their_flows_while_a_slot_is_half_moved) {
    keel::test::redis_cluster cluster;
    service = std::make_unique<service_process>(
        keel::e2e::service_options{.binary = KEEL_ORDERS_BINARY, .redis_url = cluster.url()});
    auto c = client();
    ASSERT_NO_FATAL_FAILURE(create_and_wait_suspended(c));
    for (int i = 0; i < many; ++i) expect_webhook_ok(pay(c, nth(i), tx_of(i)), false, nth(i));
    auto deadline = clock_type::now() + 20s;
    for (int i = 0; i < many; ++i)
        ASSERT_TRUE(wait_order_status(c, nth(i), "shipped", remaining(deadline)));

    constexpr std::size_t cluster_shards = 16;  // a new store's on a cluster
    std::map<std::size_t, int> orders_in;
    for (int i = 0; i < many; ++i)
        ++orders_in[keel::process::shard_of(fulfillment_of(nth(i)), cluster_shards)];
    auto busiest = std::max_element(orders_in.begin(), orders_in.end(), [](auto& a, auto& b) {
                       return a.second < b.second;
                   })->first;
    auto slot = keel::redis::key_slot(std::to_string(busiest));  // "keel:{<shard>}:..."
    auto owner = cluster.primary_of(slot);
    auto to = cluster.primaries().front() == owner ? cluster.primaries().back()
                                                   : cluster.primaries().front();
    std::istringstream listed(
        cluster.cli(owner, {"CLUSTER", "GETKEYSINSLOT", std::to_string(slot), "10000"}));
    std::vector<std::string> keys;
    for (std::string k; std::getline(listed, k);)
        if (!k.empty()) keys.push_back(k);
    std::sort(keys.begin(), keys.end());
    ASSERT_GT(keys.size(), 10u);
    cluster.begin_migration(slot, to);
    for (const auto& key : keys)  // what a delivery writes after the idempotency key
        if (key.ends_with(":inbox") || key.ends_with(":wake")) cluster.migrate_key(key, to);
    std::thread finish([&] {
        std::this_thread::sleep_for(2s);
        cluster.end_migration(slot, to);
    });
    for (int i = 0; i < many; ++i) {
        auto res = send_until_ok(c, "/webhooks/delivered", {{"orderId", nth(i)}}, 30s);
        expect_webhook_ok(res, false, "delivery of " + nth(i));
    }
    finish.join();
    for (int i = 0; i < many; ++i) {
        auto done = wait_fulfillment_done(c, nth(i), 10s);
        ASSERT_TRUE(done) << nth(i) << " in shard "
                          << keel::process::shard_of(fulfillment_of(nth(i)), cluster_shards);
        EXPECT_EQ((*done)["result"], json({{"status", "completed"}})) << done->dump();
    }
    for (int i = 0; i < many; ++i)
        expect_webhook_ok(deliver(c, nth(i)), true, "repeated delivery of " + nth(i));
    service.reset();  // before its cluster goes
}

// keel-orders on a Redis Cluster, a primary killed (-9) while four webhook senders pay 50
// orders (over about 1.3 s), each retrying until it gets 200; the killed node rejoins 3 s later as
// the promoted replica's replica. Then every payment is sent once more: a payment acknowledged and
// lost with the dead primary is not a duplicate. Returns how many were lost; every flow completes
// with one payment either way (a lost payment's retry delivers it anew).
struct failover_report {
    int lost = 0;
    int refused = 0;              // non-200 answers the senders retried
    std::int64_t slowest_ms = 0;  // the longest a payment took, retries included
    int sent_after = 0;           // payments begun after the failover began
};

enum class failover_kind { kill, manual };

failover_report pay_while_a_primary_dies(const std::function<test_client()>& client,
                                         keel::test::redis_cluster& cluster,
                                         failover_kind how = failover_kind::kill) {
    failover_report report;
    std::mutex m;
    std::atomic<int> next{0};
    std::atomic<bool> failing{false};
    auto victim = cluster.primaries().front();
    std::jthread killer([&] {
        while (next < many / 5) std::this_thread::sleep_for(100us);  // mid-stream
        failing = true;
        if (how == failover_kind::manual) {
            cluster.failover(cluster.replica_of(victim));  // CLUSTER FAILOVER on the replica
            return;
        }
        cluster.kill(victim);
        std::this_thread::sleep_for(3s);
        cluster.start(victim);
    });
    std::vector<std::jthread> senders;
    for (int t = 0; t < 4; ++t) {
        senders.emplace_back([&] {
            auto c = client();
            for (int i = next++; i < many; i = next++) {
                std::this_thread::sleep_for(100ms);  // paced: the payments span the failover
                auto began = clock_type::now();
                bool after = failing;
                std::optional<test_response> last;
                keel::e2e::eventually(
                    [&] {
                        last = pay(c, nth(i), tx_of(i));
                        if (last->status == status::ok) return true;
                        std::lock_guard lock(m);
                        ++report.refused;
                        return false;
                    },
                    60s, 50ms);
                EXPECT_EQ(last->status, status::ok) << nth(i) << ": " << describe(*last);
                auto took =
                    std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - began)
                        .count();
                std::lock_guard lock(m);
                report.slowest_ms = std::max<std::int64_t>(report.slowest_ms, took);
                report.sent_after += after;
            }
        });
    }
    senders.clear();
    killer.join();
    EXPECT_GT(report.sent_after, 0) << "the failover came after the payments";
    auto c = client();
    for (int i = 0; i < many; ++i) {
        auto again = send_until_ok(c, "/webhooks/payment", payment(nth(i), tx_of(i)), 30s);
        EXPECT_EQ(again.status, status::ok) << describe(again);
        if (!body_of(again).value("duplicate", false)) ++report.lost;
    }
    return report;
}

// keel-orders over a new cluster with `args`, the payments sent while `how` happens; prints
// the report under `label` and checks that every flow completes with one payment. The
// service stops before its cluster.
void failover_case(std::unique_ptr<service_process>& service, std::vector<std::string> args,
                   failover_kind how, const char* label, failover_report& report) {
    keel::test::redis_cluster cluster;
    service = std::make_unique<service_process>(keel::e2e::service_options{
        .binary = KEEL_ORDERS_BINARY, .redis_url = cluster.url(), .extra_args = std::move(args)});
    struct stop_before_the_cluster {
        std::unique_ptr<service_process>& service;
        ~stop_before_the_cluster() { service.reset(); }
    } stop{service};
    auto c = service->client();
    ASSERT_NO_FATAL_FAILURE(create_and_wait_suspended(c));
    // Only the payments are meant to be at risk: without the wait, orders and their flows
    // made just before the kill would be too, on a loaded machine whose replicas lag.
    cluster.wait_replicated();
    report = pay_while_a_primary_dies([&] { return service->client(); }, cluster, how);
    std::printf(
        "[ failover ] %s: %d of %d acknowledged payments lost; the slowest took %lld ms; "
        "%d answers retried\n",
        label, report.lost, many, static_cast<long long>(report.slowest_ms), report.refused);
    ASSERT_NO_FATAL_FAILURE(expect_all_complete_with_one_payment(c));
}

TEST_F(orders_e2e,
       on_a_redis_cluster_with_the_replica_wait_no_payment_is_lost_when_a_primary_dies) {
    failover_report report;
    failover_case(service, {"--redis-wait-replicas", "1"}, failover_kind::kill,
                  "with the replica wait", report);
    EXPECT_EQ(report.lost, 0);
}

// The same without the wait: reports what a failover lost (Redis replicates asynchronously;
// how much depends on timing), and every flow still completes once the senders retry.
TEST_F(orders_e2e, on_a_redis_cluster_without_the_wait_a_dying_primary_may_lose_payments) {
    failover_report report;
    failover_case(service, {}, failover_kind::kill, "without the wait", report);
}

// A planned failover (CLUSTER FAILOVER on a replica) while the payments arrive: no write
// is lost (the replica takes over only once it has everything), the senders see at most a
// short pause, and every flow completes.
TEST_F(orders_e2e, on_a_redis_cluster_a_manual_failover_under_payments_loses_nothing) {
    failover_report report;
    failover_case(service, {"--redis-wait-replicas", "1"}, failover_kind::manual,
                  "manual, with the replica wait", report);
    EXPECT_EQ(report.lost, 0);
}

TEST_F(orders_e2e, bad_input_is_rejected_and_the_service_keeps_serving) {
    start();
    auto c = client();
    keel::http::headers json_type{{"Content-Type", "application/json"}};

    auto malformed =
        c.request(keel::http::method::post, "/orders", R"({"email": "a@example.com", )", json_type);
    EXPECT_EQ(malformed.status, status::bad_request) << describe(malformed);
    EXPECT_TRUE(is_problem(malformed)) << describe(malformed);

    auto mistyped = c.post_json(
        "/orders", {{"email", "a@example.com"}, {"address", "1 Harbour Road"}, {"total", "abc"}});
    EXPECT_EQ(mistyped.status, status::bad_request) << describe(mistyped);
    EXPECT_TRUE(is_problem(mistyped)) << describe(mistyped);
    EXPECT_NE(body_of(mistyped).value("field", "").find("total"), std::string::npos)
        << describe(mistyped);

    auto missing = c.post_json("/orders", {{"address", "1 Harbour Road"}, {"total", 5}});
    EXPECT_EQ(missing.status, status::bad_request) << describe(missing);
    EXPECT_NE(body_of(missing).value("field", "").find("email"), std::string::npos)
        << describe(missing);

    auto bad_webhook = c.post_json("/webhooks/payment", {{"orderId", "o-x"}, {"amount", 1}});
    EXPECT_EQ(bad_webhook.status, status::bad_request) << describe(bad_webhook);
    EXPECT_NE(body_of(bad_webhook).value("field", "").find("transactionId"), std::string::npos)
        << describe(bad_webhook);

    // A 2 MiB body is refused from its Content-Length, before the body is read.
    {
        auto raw = keel::http::testing::raw_connection("127.0.0.1", service->port());
        raw.send(
            "POST /orders HTTP/1.1\r\nHost: e2e\r\nContent-Type: application/json\r\n"
            "Content-Length: " +
            std::to_string(2 * 1024 * 1024) + "\r\n\r\n");
        auto too_large = raw.read_response();
        ASSERT_TRUE(too_large) << "no response to a 2 MiB body";
        EXPECT_EQ(too_large->status, status::payload_too_large) << describe(*too_large);
    }

    auto unknown = c.get("/orders/no-such-order");
    EXPECT_EQ(unknown.status, status::not_found) << describe(unknown);
    EXPECT_TRUE(is_problem(unknown)) << describe(unknown);
    auto unknown_process = c.get("/orders/no-such-order/fulfillment");
    EXPECT_EQ(unknown_process.status, status::not_found) << describe(unknown_process);
    auto unknown_user = c.get("/users/no-such-user/outbox");
    EXPECT_EQ(unknown_user.status, status::not_found) << describe(unknown_user);

    auto fresh = service->client();
    auto created = create_order(fresh, "o-after");
    EXPECT_EQ(created.status, status::created) << describe(created);
    EXPECT_EQ(get_order(fresh, "o-after").value("status", ""), "created");
    EXPECT_EQ(fresh.get("/healthz").status, status::ok);
}

// Every spelling of a webhook path reaches the signature check or is refused: percent-
// encoded letters, an encoded '/', dot segments, a trailing slash. None takes effect.
TEST_F(orders_e2e, no_spelling_of_a_webhook_path_skips_the_signature) {
    start({"--webhook-secret", "s3cret", "--signal-route", "true"});
    auto c = client();
    ASSERT_EQ(create_order(c, "o-enc").status, status::created);
    keel::http::headers plain{{"Content-Type", "application/json"}};
    std::string body = payment("o-enc", "tx-enc").dump();
    std::string signal_body = json{{"transactionId", "tx-enc"}, {"amount", 42.5}}.dump();
    const std::vector<std::pair<std::string, std::string>> targets = {
        {"/webhooks/payment", body},
        {"/%77ebhooks/payment", body},
        {"/webhook%73/payment", body},
        {"/webhooks/%70ayment", body},
        {"/webhooks/payment/", body},
        {"/webhooks%2Fpayment", body},
        {"/./webhooks/payment", body},
        {"/x/../webhooks/payment", body},
        {"/webhooks/signals/payment/o-enc/received", signal_body},
        {"/webhook%73/signals/payment/o-enc/received", signal_body},
        {"/webhooks/signals/payment%2Fo-enc/received", signal_body},
    };
    for (const auto& [target, payload] : targets) {
        auto res = c.request(keel::http::method::post, target, payload, plain);
        auto code = keel::http::to_int(res.status);
        EXPECT_TRUE(code == 401 || code == 400 || code == 404) << target << " -> " << describe(res);
    }
    auto order = get_order(c, "o-enc");
    EXPECT_EQ(order.value("status", ""), "created") << order.dump();
    EXPECT_EQ(order.value("payments", json::array()), json::array()) << order.dump();
    auto process = body_of(c.get("/orders/o-enc/fulfillment"));
    EXPECT_EQ(process.value("status", ""), "suspended") << process.dump();
}

// A transaction id, or an Idempotency-Key, already used for another order or another
// webhook is a new payment for this one, not a duplicate.
TEST_F(orders_e2e, idempotency_keys_are_scoped_to_the_order_and_the_webhook) {
    start();
    auto c = client();
    for (auto id : {"o-a", "o-b", "o-c"}) ASSERT_EQ(create_order(c, id).status, status::created);
    expect_webhook_ok(pay(c, "o-a", "tx-shared"), false, "o-a paid");
    expect_webhook_ok(pay(c, "o-b", "tx-shared"), false, "o-b paid with the same transaction id");
    expect_webhook_ok(pay(c, "o-a", "tx-shared"), true, "o-a's retried webhook");
    ASSERT_TRUE(wait_order_status(c, "o-a", "shipped"));
    ASSERT_TRUE(wait_order_status(c, "o-b", "shipped"));

    keel::http::headers keyed{{"Content-Type", "application/json"}, {"Idempotency-Key", "k-1"}};
    ASSERT_EQ(create_order(c, "o-d").status, status::created);
    auto failed = c.request(keel::http::method::post, "/webhooks/payment-failed",
                            json{{"orderId", "o-d"}}.dump(), keyed);
    expect_webhook_ok(failed, false, "o-d failed under k-1");
    auto paid = c.request(keel::http::method::post, "/webhooks/payment",
                          payment("o-c", "tx-c").dump(), keyed);
    expect_webhook_ok(paid, false, "o-c paid under the same k-1");
    ASSERT_TRUE(wait_order_status(c, "o-c", "shipped"));
}

// Amounts are validated, and a payment that cannot be applied says so (409 with the
// reason) instead of a 200 that drops it.
TEST_F(orders_e2e, payments_that_cannot_be_applied_are_refused_with_the_reason) {
    start();
    auto c = client();
    for (double total : {0.0, -5.0, 1e12}) {
        auto bad = create_order(c, "o-bad", total);
        EXPECT_EQ(bad.status, status::bad_request) << total << " " << describe(bad);
        EXPECT_EQ(body_of(bad).value("field", ""), "/total") << describe(bad);
    }
    ASSERT_EQ(create_order(c, "o-r").status, status::created);
    for (double amount : {0.0, -42.5, 1e12}) {
        auto bad = pay(c, "o-r", "tx-bad", amount);
        EXPECT_EQ(bad.status, status::bad_request) << amount << " " << describe(bad);
        EXPECT_EQ(body_of(bad).value("field", ""), "/amount") << describe(bad);
    }
    auto short_paid = pay(c, "o-r", "tx-short", 40.0);
    EXPECT_EQ(short_paid.status, status::conflict) << describe(short_paid);
    EXPECT_NE(body_of(short_paid).value("detail", "").find("does not match"), std::string::npos);

    expect_webhook_ok(pay(c, "o-r", "tx-1"), false, "the payment");
    auto second = pay(c, "o-r", "tx-2");
    EXPECT_EQ(second.status, status::conflict) << describe(second);
    // "already paid by tx-1", or "is paid" once the process has recorded it.
    EXPECT_NE(body_of(second).value("detail", "").find("tx-2 was not applied"), std::string::npos)
        << describe(second);
    ASSERT_TRUE(wait_order_status(c, "o-r", "shipped"));
    expect_webhook_ok(c.post_json("/webhooks/delivered", {{"orderId", "o-r"}}), false, "delivery");
    ASSERT_TRUE(wait_order_status(c, "o-r", "delivered"));
    auto late = pay(c, "o-r", "tx-late");
    EXPECT_EQ(late.status, status::conflict) << describe(late);
    EXPECT_NE(body_of(late).value("detail", "").find("refund"), std::string::npos);
    expect_webhook_ok(pay(c, "o-r", "tx-1"), true, "the first payment, retried");

    ASSERT_EQ(create_order(c, "o-f").status, status::created);
    expect_webhook_ok(c.post_json("/webhooks/payment-failed", {{"orderId", "o-f"}}), false,
                      "payment failed");
    auto after_failure = pay(c, "o-f", "tx-f");
    EXPECT_EQ(after_failure.status, status::conflict) << describe(after_failure);
    expect_one_payment(get_order(c, "o-r"), "tx-1");
    EXPECT_EQ(get_order(c, "o-f").value("payments", json::array()), json::array());
}

TEST_F(orders_e2e, absurd_keys_and_ids_are_400_and_not_stored) {
    start();
    auto c = client();
    ASSERT_EQ(create_order(c, "o-k").status, status::created);
    auto long_tx = pay(c, "o-k", std::string(300, 't'));
    EXPECT_EQ(long_tx.status, status::bad_request) << describe(long_tx);
    EXPECT_EQ(body_of(long_tx).value("field", ""), "/transactionId");
    auto huge_tx = pay(c, "o-k", std::string(1024 * 1024, 't'));
    EXPECT_EQ(huge_tx.status, status::payload_too_large) << describe(huge_tx);
    keel::http::headers keyed{{"Content-Type", "application/json"},
                              {"Idempotency-Key", std::string(1000, 'k')}};
    auto huge_key = c.request(keel::http::method::post, "/webhooks/payment",
                              payment("o-k", "tx-k").dump(), keyed);
    EXPECT_EQ(huge_key.status, status::bad_request) << describe(huge_key);
    EXPECT_EQ(get_order(c, "o-k").value("payments", json::array()), json::array());
    auto deep = c.request(keel::http::method::post, "/orders",
                          std::string(100000, '[') + std::string(100000, ']'),
                          {{"Content-Type", "application/json"}});
    EXPECT_EQ(deep.status, status::bad_request) << describe(deep);
    auto overflow = c.request(keel::http::method::post, "/webhooks/payment",
                              R"({"orderId": "o-k", "transactionId": "t", "amount": 1e400})",
                              {{"Content-Type", "application/json"}});
    EXPECT_EQ(overflow.status, status::bad_request) << describe(overflow);
    EXPECT_EQ(body_of(overflow).value("field", ""), "/amount") << describe(overflow);
}

// The environment is shared with scripts and wrappers: deploy/run.sh's KEEL_REDIS_PORT and
// a test runner's KEEL_JOBS reach the service and must not stop it.
TEST_F(orders_e2e, unrelated_keel_variables_in_the_environment_are_ignored) {
    start({}, {}, {"KEEL_REDIS_PORT=6391", "KEEL_JOBS=1"});
    auto c = client();
    EXPECT_EQ(create_order(c, "o-env").status, status::created);
    EXPECT_NE(service->log().find("KEEL_REDIS_PORT"), std::string::npos) << service->log();
}

// An operator reading the log can follow a flow: one line per lifecycle event at info, one
// per step attempt at debug, each carrying the instance and its definition.
TEST_F(orders_e2e, the_log_follows_each_instance_through_its_lifecycle) {
    start({}, {}, {}, "debug");
    auto c = client();
    ASSERT_EQ(create_order(c, "o-log").status, status::created);
    expect_webhook_ok(pay(c, "o-log", "tx-log"), false, "payment");
    ASSERT_TRUE(wait_order_status(c, "o-log", "shipped"));
    expect_webhook_ok(c.post_json("/webhooks/delivered", {{"orderId", "o-log"}}), false,
                      "delivery");
    ASSERT_TRUE(wait_order_status(c, "o-log", "delivered"));
    ASSERT_TRUE(poll_json(c, "/orders/o-log/fulfillment",
                          [](const json& p) { return p.value("status", "") == "completed"; }));

    // The service logs "completed" after the commit the status poll saw: wait for the line.
    for (int i = 0; i < 200; ++i) {
        if (service->log().find("info [process] completed instance=order/o-log/fulfillment") !=
            std::string::npos)
            break;
        std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    std::vector<std::string> lines;
    {
        std::istringstream in(service->log());
        for (std::string line; std::getline(in, line);)
            if (line.find("instance=order/o-log/fulfillment") != std::string::npos &&
                line.find("definition=/order/:order/fulfillment") != std::string::npos)
                lines.push_back(line);
    }
    auto find = [&](std::string_view level, std::string_view text) {
        return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) {
            return l.find(std::string(" ") + std::string(level) + " ") != std::string::npos &&
                   l.find(text) != std::string::npos;
        });
    };
    std::string all;
    for (const auto& l : lines) all += l + "\n";
    EXPECT_TRUE(find("info", "started")) << all;
    EXPECT_TRUE(find("info",
                     "suspended, waiting for signal /payment/o-log/received, signal "
                     "/payment/o-log/failed, timer \"payment timeout\" due "))
        << all;
    EXPECT_TRUE(find("info", "resumed by signal /payment/o-log/received")) << all;
    EXPECT_TRUE(find("debug", "run \"record payment\": attempt 1")) << all;
    EXPECT_TRUE(find("info", "suspended, waiting for signal /shipping/o-log/delivered")) << all;
    EXPECT_TRUE(find("info", "resumed by signal /shipping/o-log/delivered")) << all;
    EXPECT_TRUE(find("info", "completed")) << all;
}

}  // namespace
