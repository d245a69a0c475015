// End-to-end tests of the admin API (docs/admin-api.md) on keel-orders: the real binary on a
// real redis-server, driven over HTTP as an operator's tools would. Off without a token,
// 401 without the right one; operators find the orders waiting for payment, read an
// instance and its journal, cancel, retry a finished flow from a journal position, and
// deliver signals.

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <keel/framework/redis/connection.hpp>
#include <keel/process/redis_store.hpp>
#include <keel/test/redis_server.hpp>
#include <keel/test/run.hpp>
#include <memory>
#include <string>
#include <vector>

#include "service_fixture.hpp"

namespace {

using namespace std::chrono_literals;
using keel::e2e::service_process;
using keel::http::status;
using keel::http::testing::test_client;
using keel::http::testing::test_response;
using json = nlohmann::json;

const std::string token = "op-token-7f3a";
const std::string fulfillment = "/order/:order/fulfillment";

class admin_e2e : public keel::e2e::service_fixture {
  protected:
    void start(std::vector<std::string> extra_args = {}) {
        service_fixture::start(KEEL_ORDERS_BINARY, std::move(extra_args));
    }

    test_client client() { return service->client(); }
    static keel::http::headers auth(const std::string& t = token) {
        keel::http::headers h;
        h.set("Authorization", "Bearer " + t);
        return h;
    }
    test_response get(test_client& c, const std::string& target) { return c.get(target, auth()); }
    test_response post(test_client& c, const std::string& target,
                       const json& body = json::object()) {
        return c.post_json(target, body, auth());
    }
    void create_order(test_client& c, const std::string& id) {
        auto res = c.post_json("/orders", {{"id", id},
                                           {"email", id + "@example.com"},
                                           {"address", "1 Harbour Road"},
                                           {"total", 42.5}});
        ASSERT_EQ(res.status, status::created) << res.body;
    }
    // Reads an instance until `accept` holds for it; its last state either way.
    std::optional<json> poll_instance(test_client& c, const std::string& id,
                                      const std::function<bool(const json&)>& accept) {
        json last;
        bool ok = keel::e2e::eventually([&] {
            auto res = get(c, "/admin/instances/" + id);
            last = json::parse(res.body, nullptr, false);
            return res.status == status::ok && accept(last);
        });
        if (!ok) ADD_FAILURE() << id << ": last seen " << last.dump();
        return ok ? std::optional<json>(last) : std::nullopt;
    }
    std::optional<json> wait_status(test_client& c, const std::string& id,
                                    const std::string& want) {
        return poll_instance(c, id, [&](const json& j) { return j["status"] == want; });
    }
};

std::string fulfillment_of(const std::string& order) {
    return "order/" + order + "/fulfillment";
}

// Puts a signal into an instance's inbox through the store itself, unchecked, as an older
// build of the service could have: the inbox id it got.
std::uint64_t deliver_unchecked(const std::string& redis_url, const std::string& id,
                                const std::string& path, const json& payload,
                                const std::string& key) {
    boost::asio::io_context io;
    auto conn = keel::redis::connection::create(io.get_executor(), {.url = redis_url}).value();
    keel::process::redis_store store(conn);
    keel::test::run(io, store.open());
    keel::process::inbox_entry signal{0, key, path, payload, std::chrono::system_clock::now()};
    auto d = keel::test::run(io, store.deliver(id, signal));
    EXPECT_EQ(d.result, keel::process::delivery::outcome::stored) << id << " " << path;
    return d.id;
}

TEST_F(admin_e2e, the_admin_api_does_not_exist_without_a_token) {
    start();
    auto c = client();
    EXPECT_EQ(c.get("/admin/stats", auth()).status, status::not_found);
    EXPECT_EQ(c.get("/admin/instances", auth()).status, status::not_found);
}

TEST_F(admin_e2e, every_admin_route_requires_the_token) {
    start({"--admin-token", token});
    auto c = client();
    for (const auto& target :
         {"/admin/stats", "/admin/instances", "/admin/instances/x", "/admin/journal/x"}) {
        auto none = c.get(target);
        EXPECT_EQ(none.status, status::unauthorized) << target;
        EXPECT_EQ(none.header("WWW-Authenticate").value_or(""), "Bearer") << target;
        EXPECT_EQ(c.get(target, auth("op-token-7f3b")).status, status::unauthorized) << target;
        EXPECT_EQ(c.get(target, auth(token + "x")).status, status::unauthorized) << target;
    }
    keel::http::headers basic;
    basic.set("Authorization", "Basic " + token);
    EXPECT_EQ(c.get("/admin/stats", basic).status, status::unauthorized);
    EXPECT_EQ(c.post_json("/admin/cancel/x", json::object()).status, status::unauthorized);
    EXPECT_EQ(c.post_json("/admin/signals/payment/o-1/failed", json::object()).status,
              status::unauthorized);
    // Spellings of the path do not skip the check.
    EXPECT_EQ(c.get("/admin/%73tats").status, status::unauthorized);
    EXPECT_NE(c.get("/admin//stats/").status, status::ok);
    EXPECT_EQ(get(c, "/admin/stats").status, status::ok);
}

TEST_F(admin_e2e, operators_find_inspect_cancel_and_retry_orders) {
    start({"--admin-token", token});
    auto c = client();
    for (auto id : {"o-1", "o-2", "o-3"}) create_order(c, id);
    ASSERT_EQ(c.post_json("/webhooks/payment-failed", {{"orderId", "o-3"}}).status, status::ok);
    ASSERT_TRUE(wait_status(c, fulfillment_of("o-3"), "completed"));
    ASSERT_TRUE(wait_status(c, fulfillment_of("o-1"), "suspended"));
    ASSERT_TRUE(wait_status(c, fulfillment_of("o-2"), "suspended"));

    // Find the orders waiting for payment, newest first, a page at a time.
    auto page = get(c, "/admin/instances?status=suspended&definition=" +
                           std::string("%2Forder%2F%3Aorder%2Ffulfillment") + "&limit=1");
    ASSERT_EQ(page.status, status::ok) << page.body;
    auto first = json::parse(page.body);
    ASSERT_EQ(first["instances"].size(), 1u) << page.body;
    EXPECT_EQ(first["instances"][0]["id"], fulfillment_of("o-2"));
    EXPECT_EQ(first["instances"][0]["definition"], fulfillment);
    ASSERT_TRUE(first["next"].is_string()) << page.body;
    std::string cursor;
    for (char ch : first["next"].get<std::string>()) {
        if (std::isalnum(static_cast<unsigned char>(ch)) || ch == '-')
            cursor += ch;
        else
            cursor += fmt::format("%{:02X}", static_cast<unsigned char>(ch));
    }
    auto second =
        json::parse(get(c, "/admin/instances?status=suspended&limit=1&cursor=" + cursor).body);
    ASSERT_EQ(second["instances"].size(), 1u) << second.dump();
    EXPECT_EQ(second["instances"][0]["id"], fulfillment_of("o-1"));
    auto by_prefix = json::parse(get(c, "/admin/instances?prefix=order%2Fo-3").body);
    ASSERT_EQ(by_prefix["instances"].size(), 1u);
    EXPECT_EQ(by_prefix["instances"][0]["status"], "completed");
    EXPECT_EQ(get(c, "/admin/instances?status=sleeping").status, status::bad_request);
    EXPECT_EQ(get(c, "/admin/instances?limit=0").status, status::bad_request);
    EXPECT_EQ(get(c, "/admin/instances?since=yesterday").status, status::bad_request);
    EXPECT_EQ(get(c, "/admin/instances?cursor=garbage").status, status::bad_request);
    EXPECT_EQ(json::parse(get(c, "/admin/instances?since=1h").body)["instances"].size(), 3u);
    EXPECT_EQ(
        json::parse(get(c, "/admin/instances?until=2000-01-01T00:00:00Z").body)["instances"].size(),
        0u);
    // RFC 3339 with an offset, encoded, and with its '+' sent as is (a query string's space).
    EXPECT_EQ(
        json::parse(get(c, "/admin/instances?since=2000-01-01T01:00:00%2B01:00").body)["instances"]
            .size(),
        3u);
    EXPECT_EQ(
        json::parse(get(c, "/admin/instances?until=2000-01-01T01:00:00+01:00").body)["instances"]
            .size(),
        0u);
    // A query parameter a route does not take is refused, naming it, not ignored.
    for (const auto& target :
         std::vector<std::string>{"/admin/instances?stauts=failed", "/admin/stats?retry=0",
                                  "/admin/instances/" + fulfillment_of("o-1") + "?journal=1",
                                  "/admin/journal/" + fulfillment_of("o-1") + "?status=failed"}) {
        auto refused = get(c, target);
        EXPECT_EQ(refused.status, status::bad_request) << target << ": " << refused.body;
        EXPECT_NE(refused.body.find("unknown query parameter"), std::string::npos) << refused.body;
    }

    auto stats = json::parse(get(c, "/admin/stats").body);
    EXPECT_EQ(stats["definitions"][fulfillment]["suspended"], 2) << stats.dump();
    EXPECT_EQ(stats["definitions"][fulfillment]["completed"], 1) << stats.dump();
    EXPECT_EQ(stats["total"]["suspended"], 2) << stats.dump();

    // What a waiting order waits for.
    auto shown = get(c, "/admin/instances/" + fulfillment_of("o-1"));
    ASSERT_EQ(shown.status, status::ok) << shown.body;
    auto o1 = json::parse(shown.body);
    EXPECT_EQ(o1["params"], json::array({"o-1"})) << o1.dump();
    EXPECT_EQ(o1["version"], "1") << o1.dump();  // keel-orders labels its fulfilment code
    EXPECT_TRUE(o1["left"].is_null()) << o1.dump();
    // The service's engine announces itself and the version it runs.
    auto workers = json::parse(get(c, "/admin/workers").body);
    ASSERT_EQ(workers["workers"].size(), 1u) << workers.dump();
    EXPECT_EQ(workers["workers"][0]["versions"][fulfillment], "1") << workers.dump();
    EXPECT_TRUE(o1["lease"].is_null()) << o1.dump();
    ASSERT_EQ(o1["timers"].size(), 1u) << o1.dump();
    EXPECT_EQ(o1["timers"][0]["name"], "payment timeout");
    std::vector<std::string> paths;
    for (const auto& w : o1["waits"]) paths.push_back(w["path"]);
    EXPECT_EQ(paths, (std::vector<std::string>{"/payment/o-1/received", "/payment/o-1/failed"}))
        << o1.dump();
    EXPECT_TRUE(o1["created"].get<std::string>().ends_with("Z"));
    EXPECT_EQ(get(c, "/admin/instances/order/none/fulfillment").status, status::not_found);

    // The finished flow's journal: the failed payment won the race, then the step ran.
    auto journal = json::parse(get(c, "/admin/journal/" + fulfillment_of("o-3")).body);
    ASSERT_EQ(journal["total"], 3) << journal.dump();
    EXPECT_EQ(journal["entries"][0]["kind"], "signal") << journal.dump();
    EXPECT_EQ(journal["entries"][0]["name"], "/payment/o-3/failed");
    EXPECT_EQ(journal["entries"][1]["kind"], "race");
    EXPECT_EQ(journal["entries"][2]["name"], "mark payment failed");
    EXPECT_TRUE(journal["next"].is_null());
    auto paged =
        json::parse(get(c, "/admin/journal/" + fulfillment_of("o-3") + "?offset=1&limit=1").body);
    ASSERT_EQ(paged["entries"].size(), 1u);
    EXPECT_EQ(paged["entries"][0]["position"], 1);
    EXPECT_EQ(paged["next"], 2);

    // Cancel a waiting order; a second cancel is refused plainly.
    auto cancelled = post(c, "/admin/cancel/" + fulfillment_of("o-2"));
    ASSERT_EQ(cancelled.status, status::ok) << cancelled.body;
    ASSERT_TRUE(wait_status(c, fulfillment_of("o-2"), "cancelled"));
    auto again = post(c, "/admin/cancel/" + fulfillment_of("o-2"));
    EXPECT_EQ(again.status, status::conflict) << again.body;
    EXPECT_NE(again.body.find("final"), std::string::npos) << again.body;
    EXPECT_EQ(post(c, "/admin/cancel/order/none/fulfillment").status, status::not_found);
    EXPECT_EQ(post(c, "/admin/resume/" + fulfillment_of("o-1")).status, status::conflict);

    // Retry the finished flow from the start: the failure signal it consumed is given back,
    // so it runs the step again and completes again; the first run's journal is kept.
    EXPECT_EQ(post(c, "/admin/retry/" + fulfillment_of("o-3"), {{"from", 4}}).status,
              status::bad_request);
    EXPECT_EQ(post(c, "/admin/retry/" + fulfillment_of("o-3"), {{"from", -1}}).status,
              status::bad_request);
    EXPECT_EQ(post(c, "/admin/retry/" + fulfillment_of("o-1"), {{"from", 0}}).status,
              status::conflict);
    auto retried = post(c, "/admin/retry/" + fulfillment_of("o-3"), {{"from", 0}});
    ASSERT_EQ(retried.status, status::ok) << retried.body;
    auto done = poll_instance(c, fulfillment_of("o-3"), [](const json& j) {
        return j["status"] == "completed" && j["retries"].size() == 1;
    });
    ASSERT_TRUE(done);
    EXPECT_EQ((*done)["result"], json({{"status", "payment_failed"}}));
    EXPECT_EQ((*done)["retries"][0]["from"], 0);
    EXPECT_EQ((*done)["retries"][0]["journal_length"], 3);
    EXPECT_EQ((*done)["journal_length"], 3);
    auto old = json::parse(get(c, "/admin/journal/" + fulfillment_of("o-3") + "?retry=1").body);
    EXPECT_EQ(old["total"], 3);
    EXPECT_EQ(get(c, "/admin/journal/" + fulfillment_of("o-3") + "?retry=2").status,
              status::not_found);

    // Signals: to one instance, and emitted by path to whoever subscribes.
    auto delivered = post(c, "/admin/signal/" + fulfillment_of("o-1"),
                          {{"path", "/payment/o-1/failed"}, {"key", "op-1"}});
    ASSERT_EQ(delivered.status, status::ok) << delivered.body;
    EXPECT_EQ(json::parse(delivered.body)["outcome"], "stored");
    EXPECT_EQ(json::parse(delivered.body)["checked"], true) << delivered.body;
    ASSERT_TRUE(wait_status(c, fulfillment_of("o-1"), "completed"));
    EXPECT_EQ(
        post(c, "/admin/signal/" + fulfillment_of("o-1"), {{"path", "/payment/o-1/failed"}}).status,
        status::conflict);
    EXPECT_EQ(post(c, "/admin/signal/" + fulfillment_of("o-1"), {{"payload", 1}}).status,
              status::bad_request);
    create_order(c, "o-4");
    ASSERT_TRUE(wait_status(c, fulfillment_of("o-4"), "suspended"));
    // A payload that is not the declared signal's type is refused rather than stored to fail
    // the instance; so is a path no signal declares and the instance does not wait for.
    auto poisoned = post(c, "/admin/signal/" + fulfillment_of("o-4"),
                         {{"path", "/payment/o-4/received"}, {"payload", {{"amount", "ten"}}}});
    EXPECT_EQ(poisoned.status, status::bad_request) << poisoned.body;
    EXPECT_NE(poisoned.body.find("/payment/:order/received"), std::string::npos) << poisoned.body;
    auto nowhere = post(c, "/admin/signal/" + fulfillment_of("o-4"), {{"path", "/nowhere/o-4"}});
    EXPECT_EQ(nowhere.status, status::bad_request) << nowhere.body;
    EXPECT_NE(nowhere.body.find("does not wait for it"), std::string::npos) << nowhere.body;
    auto o4 = json::parse(get(c, "/admin/instances/" + fulfillment_of("o-4")).body);
    EXPECT_EQ(o4["inbox"].size(), 0u) << o4.dump();
    EXPECT_EQ(o4["status"], "suspended") << o4.dump();
    keel::http::headers keyed = auth();
    keyed.set("Idempotency-Key", "op-2");
    auto emitted = c.post_json("/admin/signals/payment/o-4/failed", json::object(), keyed);
    ASSERT_EQ(emitted.status, status::ok) << emitted.body;
    EXPECT_EQ(json::parse(emitted.body)["delivered"], 1) << emitted.body;
    ASSERT_TRUE(wait_status(c, fulfillment_of("o-4"), "completed"));
}

// The faults issue's poisoned inbox: two payments that are no payments ("ten") reached an
// order's inbox unchecked while the service was down. The first fails the flow; the second
// waits in the failed instance's inbox to fail it again. The operator takes the second out,
// retries without the first, and the order completes on a good payment.
TEST_F(admin_e2e, an_operator_clears_a_poisoned_inbox_and_the_order_completes) {
    start({"--admin-token", token});
    auto c = client();
    create_order(c, "o-1");
    auto id = fulfillment_of("o-1");
    ASSERT_TRUE(wait_status(c, id, "suspended"));
    service->stop();
    json bad{{"transactionId", "tx-bad"}, {"amount", "ten"}};
    auto first = deliver_unchecked(redis->url(), id, "/payment/o-1/received", bad, "old-1");
    auto second = deliver_unchecked(redis->url(), id, "/payment/o-1/received", bad, "old-2");
    service->start();
    auto failed = wait_status(c, id, "failed");
    ASSERT_TRUE(failed);
    ASSERT_EQ((*failed)["inbox"].size(), 1u) << failed->dump();
    EXPECT_EQ((*failed)["inbox"][0]["id"], second) << failed->dump();
    auto journal = json::parse(get(c, "/admin/journal/" + id).body);
    ASSERT_GE(journal["total"], 1) << journal.dump();
    EXPECT_EQ(journal["entries"][0]["kind"], "signal") << journal.dump();
    EXPECT_EQ(journal["entries"][0]["value"]["id"], first) << journal.dump();

    // A plain retry would give the first back; a retry without a signal the journal does not
    // hold after the position is refused, and so is a removal of an entry not in the inbox.
    auto unknown = post(c, "/admin/retry/" + id, {{"from", 0}, {"without", {second}}});
    EXPECT_EQ(unknown.status, status::bad_request) << unknown.body;
    EXPECT_NE(unknown.body.find("inbox id " + std::to_string(second)), std::string::npos)
        << unknown.body;
    EXPECT_EQ(post(c, "/admin/retry/" + id, {{"from", 0}, {"without", "all"}}).status,
              status::bad_request);
    auto missing = post(c, "/admin/remove-signal/" + id, {{"inbox", first}});
    EXPECT_EQ(missing.status, status::not_found) << missing.body;
    EXPECT_EQ(post(c, "/admin/remove-signal/" + id, json::object()).status, status::bad_request);
    EXPECT_EQ(post(c, "/admin/remove-signal/order/none/fulfillment", {{"inbox", 1}}).status,
              status::not_found);

    // The way out: the waiting bad payment removed, the consumed one left out of the retry.
    auto removed = post(c, "/admin/remove-signal/" + id, {{"inbox", second}});
    ASSERT_EQ(removed.status, status::ok) << removed.body;
    EXPECT_EQ(json::parse(removed.body)["removed"]["id"], second) << removed.body;
    EXPECT_EQ(json::parse(removed.body)["removed"]["payload"], bad) << removed.body;
    auto retried = post(c, "/admin/retry/" + id, {{"from", 0}, {"without", {first}}});
    ASSERT_EQ(retried.status, status::ok) << retried.body;
    EXPECT_EQ(json::parse(retried.body)["without"], json::array({first})) << retried.body;
    auto waiting = poll_instance(c, id, [](const json& j) {
        return j["status"] == "suspended" && j["retries"].size() == 1;
    });
    ASSERT_TRUE(waiting);
    EXPECT_TRUE((*waiting)["inbox"].empty()) << waiting->dump();
    EXPECT_EQ((*waiting)["retries"][0]["without"], json::array({first})) << waiting->dump();
    ASSERT_EQ((*waiting)["removed"].size(), 1u) << waiting->dump();
    EXPECT_EQ((*waiting)["removed"][0]["id"], second) << waiting->dump();
    EXPECT_EQ((*waiting)["removed"][0]["key"], "old-2") << waiting->dump();
    EXPECT_TRUE((*waiting)["removed"][0]["removed"].is_string()) << waiting->dump();

    // The good payment, then the delivery: the flow completes.
    auto paid = c.post_json("/webhooks/payment",
                            {{"orderId", "o-1"}, {"transactionId", "tx-1"}, {"amount", 42.5}});
    ASSERT_EQ(paid.status, status::ok) << paid.body;
    ASSERT_TRUE(poll_instance(c, id, [](const json& j) {
        return j["status"] == "suspended" && j["journal_length"] > 2;
    }));
    ASSERT_EQ(c.post_json("/webhooks/delivered", {{"orderId", "o-1"}}).status, status::ok);
    auto done = wait_status(c, id, "completed");
    ASSERT_TRUE(done);
    EXPECT_EQ((*done)["result"], json({{"status", "completed"}})) << done->dump();
    EXPECT_EQ(json::parse(c.get("/orders/o-1").body)["status"], "delivered");
}

// A signal waiting in a suspended instance's inbox, one it does not wait for now, is taken
// out while no worker holds the instance.
TEST_F(admin_e2e, an_operator_removes_a_waiting_signal_from_a_suspended_instance) {
    start({"--admin-token", token});
    auto c = client();
    create_order(c, "o-2");
    auto id = fulfillment_of("o-2");
    ASSERT_EQ(c.post_json("/webhooks/payment",
                          {{"orderId", "o-2"}, {"transactionId", "tx-2"}, {"amount", 42.5}})
                  .status,
              status::ok);
    ASSERT_TRUE(poll_instance(c, id, [](const json& j) {
        return j["status"] == "suspended" && j["lease"].is_null() && j["journal_length"] > 2;
    }));
    json bad{{"transactionId", "tx-bad"}, {"amount", "ten"}};
    auto stray = deliver_unchecked(redis->url(), id, "/payment/o-2/received", bad, "");
    auto removed = post(c, "/admin/remove-signal/" + id, {{"inbox", stray}});
    ASSERT_EQ(removed.status, status::ok) << removed.body;
    auto shown = json::parse(get(c, "/admin/instances/" + id).body);
    EXPECT_TRUE(shown["inbox"].empty()) << shown.dump();
    ASSERT_EQ(shown["removed"].size(), 1u) << shown.dump();
    EXPECT_EQ(shown["removed"][0]["path"], "/payment/o-2/received") << shown.dump();
    ASSERT_EQ(c.post_json("/webhooks/delivered", {{"orderId", "o-2"}}).status, status::ok);
    ASSERT_TRUE(wait_status(c, id, "completed"));
}

// Named tokens: two with full access, one read-only for a dashboard, and the bare one.
TEST_F(admin_e2e, named_tokens_act_and_read_only_tokens_only_read) {
    const std::string ops = "ops-secret-1", oncall = "oncall-secret-2", dash = "dash-secret-3";
    // The bare form beside the named ones: `token` is the full-access token named admin.
    start({"--log-level", "info", "--admin-token", "ops:" + ops + ",oncall:" + oncall,
           "--admin-token", "dash:" + dash + ":read", "--admin-token", token});
    auto c = client();
    create_order(c, "o-1");
    create_order(c, "o-2");
    auto o1 = fulfillment_of("o-1"), o2 = fulfillment_of("o-2");
    ASSERT_TRUE(wait_status(c, o1, "suspended"));
    ASSERT_TRUE(wait_status(c, o2, "suspended"));

    // The read-only token reads everything a dashboard shows.
    for (const auto& target :
         {"/admin/stats", "/admin/instances", "/admin/workers",
          "/admin/instances/order/o-1/fulfillment", "/admin/journal/order/o-1/fulfillment"}) {
        auto res = c.get(target, auth(dash));
        EXPECT_EQ(res.status, status::ok) << target << ": " << res.body;
    }
    // And acts on nothing: 403 with a problem saying why, the instance untouched.
    auto cancel = c.post_json("/admin/cancel/" + o1, json::object(), auth(dash));
    EXPECT_EQ(cancel.status, status::forbidden) << cancel.body;
    EXPECT_EQ(cancel.header("Content-Type").value_or(""), "application/problem+json");
    EXPECT_NE(cancel.body.find("the token 'dash' is read-only"), std::string::npos) << cancel.body;
    for (const auto& target :
         {"/admin/retry/" + o1, "/admin/remove-signal/" + o1, "/admin/signal/" + o1,
          std::string("/admin/resume-parked"), std::string("/admin/signals/payment/o-1/failed")}) {
        auto res = c.post_json(target, {{"from", 0}, {"inbox", 1}}, auth(dash));
        EXPECT_EQ(res.status, status::forbidden) << target << ": " << res.body;
    }
    EXPECT_EQ(json::parse(get(c, "/admin/instances/" + o1).body)["status"], "suspended");

    // Both full tokens act; a wrong token, or a role sent as part of the secret, is 401.
    EXPECT_EQ(c.post_json("/admin/cancel/" + o1, json::object(), auth(ops)).status, status::ok);
    EXPECT_EQ(c.post_json("/admin/cancel/" + o2, json::object(), auth(oncall)).status, status::ok);
    EXPECT_EQ(c.get("/admin/stats", auth("nobody")).status, status::unauthorized);
    EXPECT_EQ(c.get("/admin/stats", auth(dash + ":read")).status, status::unauthorized);
    EXPECT_EQ(c.get("/admin/stats", auth("ops:" + ops)).status, status::unauthorized);
    EXPECT_EQ(c.get("/admin/stats").status, status::unauthorized);

    // The audit lines name the token that acted, or was refused.
    std::string log;
    EXPECT_TRUE(keel::e2e::eventually([&] {
        log = service->log();
        return log.find("cancel " + o2 + " by oncall (") != std::string::npos;
    })) << log;
    EXPECT_NE(log.find("cancel " + o1 + " by ops ("), std::string::npos) << log;
    EXPECT_NE(log.find("POST /admin/cancel/" + o1 + " by dash ("), std::string::npos) << log;
    EXPECT_NE(log.find("refused: the token is read-only"), std::string::npos) << log;
}

TEST_F(admin_e2e, a_replica_that_stops_withdraws_from_the_workers_at_once) {
    service_fixture::start(KEEL_ORDERS_BINARY, {"--admin-token", token});
    service_process other({.binary = KEEL_ORDERS_BINARY,
                           .redis_url = redis->url(),
                           .extra_args = {"--admin-token", token}});
    other.start();
    auto c = client();
    auto workers = [&] { return json::parse(get(c, "/admin/workers").body)["workers"].size(); };
    ASSERT_TRUE(keel::e2e::eventually([&] { return workers() == 2; }, 10s, 20ms))
        << workers() << " workers";
    other.stop();
    // At once, not three heartbeats (15 s) later.
    EXPECT_TRUE(keel::e2e::eventually([&] { return workers() == 1; }, 2s, 20ms))
        << workers() << " workers";
}

TEST_F(admin_e2e, every_replica_shows_the_failed_attempts_of_a_step_in_flight) {
    // Two replicas on one Redis; the carrier is down, so dispatch fails, waits 1 s, fails for
    // good. Whichever replica runs the instance, both show the failed attempt meanwhile.
    service_fixture::start(KEEL_ORDERS_CARRIER_DOWN_BINARY, {"--admin-token", token});
    service_process other({.binary = KEEL_ORDERS_CARRIER_DOWN_BINARY,
                           .redis_url = redis->url(),
                           .extra_args = {"--admin-token", token}});
    other.start();
    auto c = client();
    auto c2 = other.client();
    create_order(c, "o-1");
    ASSERT_EQ(c.post_json("/webhooks/payment",
                          {{"orderId", "o-1"}, {"transactionId", "tx-1"}, {"amount", 42.5}})
                  .status,
              status::ok);
    auto id = fulfillment_of("o-1");
    auto failed_dispatch = [](const json& j) {
        const auto& steps = j["steps"];
        return steps.size() == 1 && steps[0]["name"] == "dispatch" &&
               steps[0]["last_error"] == "carrier unreachable" && steps[0]["attempt"] == 1 &&
               steps[0]["failed_at"].is_string() && steps[0]["worker"].is_string();
    };
    json seen[2];
    bool both = keel::e2e::eventually(
        [&] {
            for (auto [i, cl] : {std::pair{0, &c}, std::pair{1, &c2}}) {
                if (!seen[i].is_null()) continue;
                auto res = get(*cl, "/admin/instances/" + id);
                auto j = json::parse(res.body, nullptr, false);
                if (res.status == status::ok && failed_dispatch(j)) seen[i] = j;
            }
            return !seen[0].is_null() && !seen[1].is_null();
        },
        10s, 20ms);
    ASSERT_TRUE(both) << seen[0].dump() << "\n" << seen[1].dump() << "\n" << other.log();
    EXPECT_EQ(seen[0]["steps"][0]["worker"], seen[1]["steps"][0]["worker"]);
    EXPECT_EQ(seen[0]["steps"][0]["seq"], seen[1]["steps"][0]["seq"]);
    // Failed for good: nothing is in flight any more, on either replica.
    ASSERT_TRUE(wait_status(c, id, "failed"));
    EXPECT_TRUE(json::parse(get(c2, "/admin/instances/" + id).body)["steps"].empty());
}

TEST_F(admin_e2e, metrics_count_processes_by_definition_never_by_instance) {
    start();
    auto c = client();
    create_order(c, "o-9");
    const std::string def = "definition=\"/order/:order/fulfillment\"";
    std::string text;
    EXPECT_TRUE(keel::e2e::eventually([&] {
        text = c.get("/metrics").body;
        return text.find("keel_process_instances{" + def + ",status=\"suspended\"} 1\n") !=
               std::string::npos;
    })) << text;
    EXPECT_NE(text.find("keel_process_instances_started_total{" + def + "} 1\n"), std::string::npos)
        << text;
    EXPECT_NE(text.find("keel_process_hot_instances "), std::string::npos);
    EXPECT_NE(text.find("keel_http_requests_total"), std::string::npos);
    EXPECT_EQ(text.find("o-9"), std::string::npos);
}

TEST_F(admin_e2e, the_admin_api_can_have_a_port_of_its_own) {
    auto admin_port = keel::test::free_port();
    start({"--admin-token", token, "--admin-host", "127.0.0.1", "--admin-port",
           std::to_string(admin_port)});
    auto c = client();
    EXPECT_EQ(get(c, "/admin/stats").status, status::not_found);
    test_client admin("127.0.0.1", admin_port);
    EXPECT_EQ(admin.get("/admin/stats").status, status::unauthorized);
    EXPECT_EQ(admin.get("/admin/stats", auth()).status, status::ok);
    EXPECT_EQ(admin.get("/orders/o-1", auth()).status, status::not_found);
}

}  // namespace
