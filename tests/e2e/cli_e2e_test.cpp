// End-to-end tests of the `keel` command line against keel-orders: both real binaries and a
// real redis-server. An operator finds the orders waiting for payment, reads one and its
// journal, cancels, retries and signals, with the exit codes scripts rely on.

#include <gtest/gtest.h>

#include <fstream>
#include <keel/test/redis_server.hpp>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "service_process.hpp"

namespace {

using namespace std::chrono_literals;
using keel::e2e::service_process;
using keel::e2e::shell_quote;
using keel::http::status;
using json = nlohmann::json;

const std::string token = "cli-token-91c2";

struct cli_result {
    int code = -1;
    std::string out;
    std::string err;
};

class cli_e2e : public ::testing::Test {
  protected:
    void SetUp() override {
        redis = std::make_unique<keel::test::redis_server>();
        service = serve(KEEL_ORDERS_BINARY);
        err_path = service->log_path() + ".cli-stderr";
    }
    void TearDown() override {
        if (HasFailure() && service) service->print_log();
    }

    // A running service of `binary` on the test's Redis, which keel() then talks to.
    std::unique_ptr<service_process> serve(const std::string& binary) {
        auto s = std::make_unique<service_process>(keel::e2e::service_options{
            .binary = binary,
            .redis_url = redis->url(),
            .extra_args = {"--admin-token", token},
        });
        s->start();
        port = s->port();
        return s;
    }

    // Runs `keel <args>` with the service's URL and token in the environment.
    cli_result keel(const std::vector<std::string>& args, const std::string& with_token = token) {
        std::string cmd = "KEEL_ADMIN_URL=http://127.0.0.1:" + std::to_string(port) +
                          " KEEL_ADMIN_TOKEN=" + shell_quote(with_token) + " " + KEEL_CLI_BINARY;
        for (const auto& a : args) cmd += " " + shell_quote(a);
        cmd += " 2>" + shell_quote(err_path);
        auto ran = keel::e2e::run_command(cmd);
        cli_result r{ran.code, std::move(ran.out), {}};
        std::ifstream in(err_path);
        std::stringstream ss;
        ss << in.rdbuf();
        r.err = ss.str();
        return r;
    }

    void create_order(const std::string& id) {
        auto c = service->client();
        auto res = c.post_json("/orders", {{"id", id},
                                           {"email", id + "@example.com"},
                                           {"address", "1 Harbour Road"},
                                           {"total", 42.5}});
        ASSERT_EQ(res.status, status::created) << res.body;
    }

    // `keel show ID --json` until its status is `want`.
    bool reaches(const std::string& id, const std::string& want) {
        return keel::e2e::eventually(
            [&] {
                auto r = keel({"show", id, "--json"});
                return r.code == 0 && json::parse(r.out).value("status", "") == want;
            },
            10s, 50ms);
    }

    std::unique_ptr<keel::test::redis_server> redis;
    std::unique_ptr<service_process> service;
    std::uint16_t port = 0;
    std::string err_path;
};

TEST_F(cli_e2e, an_operator_finds_reads_and_repairs_orders) {
    create_order("o-1");
    create_order("o-2");
    ASSERT_TRUE(reaches("order/o-1/fulfillment", "suspended"));
    ASSERT_TRUE(reaches("order/o-2/fulfillment", "suspended"));

    auto ps = keel({"ps", "--status", "suspended"});
    ASSERT_EQ(ps.code, 0) << ps.err;
    EXPECT_NE(ps.out.find("order/o-1/fulfillment"), std::string::npos) << ps.out;
    EXPECT_NE(ps.out.find("order/o-2/fulfillment"), std::string::npos) << ps.out;
    std::istringstream lines(ps.out);
    for (std::string line; std::getline(lines, line);) EXPECT_LE(line.size(), 100u) << line;
    auto listed = json::parse(keel({"ps", "--status", "suspended", "--all", "--json"}).out);
    EXPECT_EQ(listed["instances"].size(), 2u) << listed.dump();
    EXPECT_EQ(json::parse(keel({"ps", "--status", "completed", "--json"}).out)["instances"].size(),
              0u);

    auto show = keel({"show", "order/o-1/fulfillment"});
    ASSERT_EQ(show.code, 0) << show.err;
    EXPECT_NE(show.out.find("/payment/o-1/received"), std::string::npos) << show.out;
    EXPECT_NE(show.out.find("payment timeout"), std::string::npos) << show.out;

    auto stats = json::parse(keel({"stats", "--json"}).out);
    EXPECT_EQ(stats["total"]["suspended"], 2) << stats.dump();

    // The payment-failed path to a finished flow; its journal as the flow ran it.
    auto failed = keel({"signal", "/payment/o-2/failed", "--key", "op-1"});
    ASSERT_EQ(failed.code, 0) << failed.err;
    ASSERT_TRUE(reaches("order/o-2/fulfillment", "completed"));
    auto journal = json::parse(keel({"journal", "order/o-2/fulfillment", "--json"}).out);
    ASSERT_EQ(journal["entries"].size(), 3u) << journal.dump();
    EXPECT_EQ(journal["entries"][0]["name"], "/payment/o-2/failed");
    EXPECT_EQ(journal["entries"][2]["name"], "mark payment failed");
    auto table = keel({"journal", "order/o-2/fulfillment"});
    EXPECT_NE(table.out.find("mark payment failed"), std::string::npos) << table.out;

    // Retry it from its first entry: it takes the failure signal again and completes again.
    auto retried = keel({"retry", "order/o-2/fulfillment", "--from", "0"});
    ASSERT_EQ(retried.code, 0) << retried.err;
    EXPECT_TRUE(keel::e2e::eventually([&] {
        auto j = json::parse(keel({"show", "order/o-2/fulfillment", "--json"}).out);
        return j["status"] == "completed" && j["retries"].size() == 1;
    }));
    auto old =
        json::parse(keel({"journal", "order/o-2/fulfillment", "--retry", "1", "--json"}).out);
    EXPECT_EQ(old["entries"].size(), 3u);

    // Cancel; a second cancel is refused (exit 1, the reason on stderr).
    EXPECT_EQ(keel({"cancel", "order/o-1/fulfillment"}).code, 0);
    ASSERT_TRUE(reaches("order/o-1/fulfillment", "cancelled"));
    auto again = keel({"cancel", "order/o-1/fulfillment"});
    EXPECT_EQ(again.code, 1);
    EXPECT_NE(again.err.find("final"), std::string::npos) << again.err;
    auto unknown = keel({"show", "order/none/fulfillment"});
    EXPECT_EQ(unknown.code, 1);
}

TEST_F(cli_e2e, a_deploy_that_breaks_replay_parks_flows_and_the_fix_resumes_them) {
    for (auto id : {"o-1", "o-2"}) {
        create_order(id);
        auto c = service->client();
        auto paid = c.post_json(
            "/webhooks/payment",
            {{"orderId", id}, {"transactionId", std::string("tx-") + id}, {"amount", 42.5}});
        ASSERT_EQ(paid.status, status::ok) << paid.body;
    }
    // Both shipped and waiting for delivery, with "dispatch" in their journals.
    ASSERT_TRUE(keel::e2e::eventually([&] {
        auto j = json::parse(keel({"stats", "--json"}).out);
        return j["total"]["suspended"] == 2 && j["total"]["running"] == 0;
    }));

    // Deploy the build whose dispatch step has another name; the deliveries wake the flows,
    // whose replay meets the renamed step: they park, naming both operations.
    ASSERT_EQ(service->stop(), 0);
    auto renamed = serve(KEEL_ORDERS_RENAMED_BINARY);
    for (auto id : {"o-1", "o-2"}) {
        auto c = renamed->client();
        ASSERT_EQ(c.post_json("/webhooks/delivered", {{"orderId", id}}).status, status::ok);
    }
    ASSERT_TRUE(keel::e2e::eventually([&] {
        auto j = json::parse(keel({"ps", "--status", "parked", "--json"}).out);
        return j["instances"].size() == 2;
    })) << renamed->log();
    auto parked = keel({"show", "order/o-1/fulfillment"});
    EXPECT_NE(parked.out.find("hand to carrier"), std::string::npos) << parked.out;
    EXPECT_NE(parked.out.find("dispatch"), std::string::npos) << parked.out;
    ASSERT_EQ(renamed->stop(), 0);

    // The fixed build (the old name) and one command bring every parked flow to its end.
    service->start();
    port = service->port();
    auto resumed = keel({"resume", "--parked", "--definition", "/order/:order/fulfillment"});
    ASSERT_EQ(resumed.code, 0) << resumed.err;
    EXPECT_NE(resumed.out.find("order/o-2/fulfillment"), std::string::npos) << resumed.out;
    EXPECT_TRUE(reaches("order/o-1/fulfillment", "completed"));
    EXPECT_TRUE(reaches("order/o-2/fulfillment", "completed"));
    auto journal = json::parse(keel({"journal", "order/o-1/fulfillment", "--json"}).out);
    std::vector<std::string> steps;
    for (const auto& e : journal["entries"])
        if (e["kind"] == "run") steps.push_back(e["name"]);
    EXPECT_EQ(steps, (std::vector<std::string>{"record payment", "dispatch", "mark delivered"}))
        << journal.dump();
}

TEST_F(cli_e2e, a_flow_that_failed_is_retried_from_the_failed_step_once_the_fault_is_fixed) {
    // The carrier is down: dispatch fails for good and the order's flow fails.
    ASSERT_EQ(service->stop(), 0);
    auto down = serve(KEEL_ORDERS_CARRIER_DOWN_BINARY);
    {
        auto c = down->client();
        ASSERT_EQ(c.post_json("/orders", {{"id", "o-1"},
                                          {"email", "o-1@example.com"},
                                          {"address", "1 Harbour Road"},
                                          {"total", 42.5}})
                      .status,
                  status::created);
        auto paid = c.post_json("/webhooks/payment",
                                {{"orderId", "o-1"}, {"transactionId", "tx-1"}, {"amount", 42.5}});
        ASSERT_EQ(paid.status, status::ok) << paid.body;
    }
    const std::string id = "order/o-1/fulfillment";
    ASSERT_TRUE(reaches(id, "failed")) << down->log();
    auto failed = json::parse(keel({"ps", "--status", "failed", "--json"}).out);
    ASSERT_EQ(failed["instances"].size(), 1u) << failed.dump();
    EXPECT_EQ(failed["instances"][0]["id"], id);
    auto shown = keel({"show", id});
    EXPECT_NE(shown.out.find("carrier unreachable"), std::string::npos) << shown.out;
    auto journal = json::parse(keel({"journal", id, "--json"}).out);
    const auto& entries = journal["entries"];
    std::size_t from = entries.size();
    for (std::size_t i = 0; i < entries.size(); ++i)
        if (entries[i]["name"] == "dispatch") from = i;
    ASSERT_LT(from, entries.size()) << journal.dump();
    EXPECT_TRUE(entries[from].value("failed", false)) << journal.dump();
    EXPECT_EQ(entries[from]["attempts"], 2) << journal.dump();  // its policy's limit
    EXPECT_NE(entries[from]["started"], entries[from]["at"]) << journal.dump();
    EXPECT_EQ(entries[from - 1]["name"], "record payment") << journal.dump();
    ASSERT_EQ(down->stop(), 0);

    // The carrier is back (the normal build): retry from the failed dispatch. The payment
    // is replayed from the kept journal, dispatch runs again and the flow waits for delivery.
    service->start();
    port = service->port();
    auto retried = keel({"retry", id, "--from", std::to_string(from)});
    ASSERT_EQ(retried.code, 0) << retried.err;
    ASSERT_TRUE(reaches(id, "suspended")) << service->log();
    {
        auto c = service->client();
        ASSERT_EQ(c.post_json("/webhooks/delivered", {{"orderId", "o-1"}}).status, status::ok);
    }
    ASSERT_TRUE(reaches(id, "completed")) << service->log();
    auto after = json::parse(keel({"journal", id, "--json"}).out);
    std::vector<std::string> steps;
    for (const auto& e : after["entries"]) {
        if (e["kind"] == "run") steps.push_back(e["name"]);
        EXPECT_FALSE(e.value("failed", false)) << e.dump();
    }
    EXPECT_EQ(steps, (std::vector<std::string>{"record payment", "dispatch", "mark delivered"}))
        << after.dump();
    // The failed attempt stays readable, as the journal was before the retry.
    auto old = json::parse(keel({"journal", id, "--retry", "1", "--json"}).out);
    ASSERT_EQ(old["entries"].size(), entries.size()) << old.dump();
    EXPECT_TRUE(old["entries"][from].value("failed", false)) << old.dump();
    auto order = service->client().get("/orders/o-1");
    EXPECT_NE(order.body.find("delivered"), std::string::npos) << order.body;
}

TEST_F(cli_e2e, exit_codes_tell_refusal_from_usage) {
    EXPECT_EQ(keel({"stats"}, "wrong-token").code, 1);
    EXPECT_EQ(keel({"ps", "--status", "sleeping"}).code, 2);
    EXPECT_EQ(keel({"retry", "order/o-1/fulfillment"}).code, 2);  // no --from
    EXPECT_EQ(keel({"frobnicate"}).code, 2);
    EXPECT_EQ(keel({"resume", "--parked"}).code, 2);  // no --definition
    auto none = keel({"resume", "--parked", "--definition", "/order/:order/fulfillment"});
    EXPECT_EQ(none.code, 0) << none.err;
}

// Redis comes back without its data under a running keel-orders (docs/architecture.md, "A
// store that comes back empty"): creating an order would start its flow in an empty store, so
// the service answers 503 and is not ready, saying why, until an operator runs
// `keel store confirm`; then orders are taken again.
TEST_F(cli_e2e, a_store_that_comes_back_empty_is_refused_until_an_operator_confirms_it) {
    create_order("before-flush");
    ASSERT_TRUE(reaches("order/before-flush/fulfillment", "suspended"));
    EXPECT_EQ(keel({"store"}).out, "trusted\n");

    redis->cli({"FLUSHALL"});
    auto c = service->client();
    ASSERT_TRUE(keel::e2e::eventually([&] { return keel({"store"}).code != 0; }, 15s, 100ms));
    auto state = keel({"store", "--json"});
    EXPECT_NE(json::parse(state.out).value("reason", "").find("identity record is gone"),
              std::string::npos)
        << state.out;
    auto refused = c.post_json("/orders", {{"id", "during"},
                                           {"email", "during@example.com"},
                                           {"address", "1 Harbour Road"},
                                           {"total", 42.5}});
    EXPECT_EQ(refused.status, status::service_unavailable) << refused.body;
    auto ready = c.get("/readyz");
    EXPECT_EQ(ready.status, status::service_unavailable);
    EXPECT_NE(ready.body.find("process store"), std::string::npos) << ready.body;

    auto confirmed = keel({"store", "confirm"});
    EXPECT_EQ(confirmed.code, 0) << confirmed.err;
    EXPECT_NE(confirmed.out.find("confirmed"), std::string::npos);
    EXPECT_EQ(keel({"store"}).out, "trusted\n");
    EXPECT_EQ(c.get("/readyz").status, status::ok);
    create_order("after-confirm");
    EXPECT_TRUE(reaches("order/after-confirm/fulfillment", "suspended"));
}

}  // namespace
