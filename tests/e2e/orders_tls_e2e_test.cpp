// keel-orders over HTTPS: the real binary started with --tls-cert and --tls-key on a real
// redis-server, an order driven from creation to delivery with keel's HTTP client trusting
// the test CA, a certificate reloaded on SIGHUP, and unusable files refused at start with
// the setting named. Certificates are made at run time (tests/http/tls_support.cpp).

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <boost/asio/io_context.hpp>
#include <filesystem>
#include <keel/http/client.hpp>
#include <keel/test/redis_server.hpp>
#include <keel/test/run.hpp>
#include <memory>
#include <string>

#include "../http/tls_support.hpp"
#include "service_process.hpp"

namespace {

using namespace std::chrono_literals;
using keel::e2e::service_process;
using keel::http::client;
using keel::http::client_request;
using keel::http::method;
using keel::http::client_test::pki;
using json = nlohmann::json;

keel::http::client_options trusting_test_ca() {
    keel::http::client_options o;
    o.tls.ca_file = pki().ca;
    return o;
}

// GET /readyz over HTTPS until it answers 200.
bool ready_over_tls(std::uint16_t port, std::string& last) {
    boost::asio::io_context io;
    client c(io, trusting_test_ca());
    auto url = "https://localhost:" + std::to_string(port) + "/readyz";
    auto res = keel::test::run(io, c.request(client_request::get(url)), 5s);
    if (!res) {
        last = res.error().message;
        return false;
    }
    last = std::to_string(res->status_code()) + " " + res->body();
    return res->status_code() == 200;
}

class orders_e2e_tls : public ::testing::Test {
  protected:
    void start(std::vector<std::string> extra_args, std::string log_level = "warn") {
        redis = std::make_unique<keel::test::redis_server>();
        service = std::make_unique<service_process>(keel::e2e::service_options{
            .binary = KEEL_ORDERS_BINARY,
            .redis_url = redis->url(),
            .log_level = std::move(log_level),
            .extra_args = std::move(extra_args),
            .ready = ready_over_tls,
        });
    }

    std::string url(const std::string& path) const {
        return "https://localhost:" + std::to_string(service->port()) + path;
    }

    client::result send(client_request req) {
        return keel::test::run(io, https.request(std::move(req)), 15s);
    }
    client::result get(const std::string& path) { return send(client_request::get(url(path))); }
    client::result post(const std::string& path, const json& body) {
        return send(client_request::json(method::post, url(path), body));
    }

    // GETs `path` until `accept` holds for its JSON body (10 s).
    bool poll(const std::string& path, const std::function<bool(const json&)>& accept,
              std::string& last) {
        return keel::e2e::eventually(
            [&] {
                auto res = get(path);
                if (!res) {
                    last = res.error().message;
                    return false;
                }
                last = res->body();
                return res->ok() && accept(res->json());
            },
            10s, 20ms);
    }

    // Declared in this order so that the service stops before its Redis does.
    std::unique_ptr<keel::test::redis_server> redis;
    std::unique_ptr<service_process> service;
    boost::asio::io_context io;
    client https{io, trusting_test_ca()};
};

TEST_F(orders_e2e_tls, an_order_from_creation_to_delivery_over_https) {
    start({"--tls-cert", pki().good.cert, "--tls-key", pki().good.key});

    json order = {{"id", "o-1"},
                  {"email", "ada@example.com"},
                  {"address", "1 Harbour Road"},
                  {"total", 42.5}};
    auto created = post("/orders", order);
    ASSERT_TRUE(created) << created.error().message;
    ASSERT_EQ(created->status_code(), 201) << created->body();
    EXPECT_EQ(created->json().value("process", ""), "order/o-1/fulfillment");

    json payment = {{"orderId", "o-1"}, {"transactionId", "tx-1"}, {"amount", 42.5}};
    auto paid = post("/webhooks/payment", payment);
    ASSERT_TRUE(paid) << paid.error().message;
    ASSERT_EQ(paid->status_code(), 200) << paid->body();
    std::string last;
    ASSERT_TRUE(poll(
        "/orders/o-1", [](const json& o) { return o.value("status", "") == "shipped"; }, last))
        << last;

    json delivery = {{"orderId", "o-1"}};
    auto delivered = post("/webhooks/delivered", delivery);
    ASSERT_TRUE(delivered) << delivered.error().message;
    ASSERT_EQ(delivered->status_code(), 200) << delivered->body();
    ASSERT_TRUE(poll(
        "/orders/o-1/fulfillment",
        [](const json& p) { return p.value("status", "") == "completed"; }, last))
        << last;
    auto final_order = get("/orders/o-1");
    ASSERT_TRUE(final_order) << final_order.error().message;
    EXPECT_EQ(final_order->json().value("status", ""), "delivered") << final_order->body();
    // One TLS connection carried the whole flow.
    auto stats = https.stats("https://localhost:" + std::to_string(service->port()));
    EXPECT_EQ(stats.connections_opened, 1u);

    // Plain HTTP on the same port is answered 400, not served.
    auto plain = service->client(3s).get("/orders/o-1");
    EXPECT_EQ(plain.status, keel::http::status::bad_request) << plain.body;

    int exit_status = service->stop();
    EXPECT_TRUE(WIFEXITED(exit_status) && WEXITSTATUS(exit_status) == 0)
        << "SIGTERM should stop the service cleanly; waitpid status " << exit_status;
}

TEST_F(orders_e2e_tls, sighup_reloads_the_certificate_and_the_service_keeps_serving) {
    auto dir = keel::test::make_temp_dir("keel-e2e-tls");
    auto cert = dir + "/cert.pem", key = dir + "/key.pem";
    std::filesystem::copy_file(pki().good.cert, cert);
    std::filesystem::copy_file(pki().good.key, key);
    start({"--tls-cert", cert, "--tls-key", key}, "info");
    ASSERT_TRUE(get("/readyz"));

    std::filesystem::copy_file(pki().renewed.cert, cert,
                               std::filesystem::copy_options::overwrite_existing);
    std::filesystem::copy_file(pki().renewed.key, key,
                               std::filesystem::copy_options::overwrite_existing);
    ASSERT_EQ(::kill(service->pid(), SIGHUP), 0);
    EXPECT_TRUE(keel::e2e::eventually(
        [&] { return service->log().find("CN=renewed.localhost") != std::string::npos; }, 10s))
        << "no reload in the log";
    EXPECT_NE(service->log().find("reloaded (SIGHUP)"), std::string::npos);
    EXPECT_TRUE(service->running()) << "SIGHUP ended the service";

    // The keep-alive connection made before the reload, and a new one, are both served.
    auto old_connection = get("/readyz");
    ASSERT_TRUE(old_connection) << old_connection.error().message;
    EXPECT_EQ(old_connection->status_code(), 200);
    EXPECT_EQ(
        https.stats("https://localhost:" + std::to_string(service->port())).connections_opened, 1u);
    client fresh(io, trusting_test_ca());
    auto res = keel::test::run(io, fresh.request(client_request::get(url("/readyz"))), 10s);
    ASSERT_TRUE(res) << res.error().message;
    EXPECT_EQ(res->status_code(), 200);
    std::filesystem::remove_all(dir);
}

// Runs keel-orders with `args` (and `env`, NAME=value words) to its exit; the check of the
// TLS files comes before Redis is needed.
keel::e2e::command_result run_orders(const std::string& env, const std::string& args) {
    return keel::e2e::run_command(env + " " + keel::e2e::shell_quote(KEEL_ORDERS_BINARY) +
                                  " --redis redis://127.0.0.1:1 " + args + " 2>&1");
}

TEST(orders_e2e_tls_start, an_unusable_tls_file_stops_the_start_naming_the_setting_and_the_file) {
    using keel::e2e::shell_quote;
    const auto missing = (pki().dir / "missing.pem").string();
    auto r = run_orders(
        "", "--tls-cert " + shell_quote(missing) + " --tls-key " + shell_quote(pki().good.key));
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find("--tls-cert"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(missing), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("No such file or directory"), std::string::npos) << r.out;

    r = run_orders("", "--tls-cert " + shell_quote(pki().good.cert) + " --tls-key " +
                           shell_quote(pki().renewed.key));
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find("--tls-key"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(pki().renewed.key), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("not the private key of the certificate"), std::string::npos) << r.out;

    r = run_orders("KEEL_TLS_CERT=" + shell_quote(pki().good.key),
                   "--tls-key " + shell_quote(pki().good.key));
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find("KEEL_TLS_CERT"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("no PEM certificate in it"), std::string::npos) << r.out;

    r = run_orders("", "--tls-cert " + shell_quote(pki().good.cert) + " --tls-key " +
                           shell_quote(pki().good.key) + " --tls-client-ca " +
                           shell_quote(pki().good.key));
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find("--tls-client-ca"), std::string::npos) << r.out;

    r = run_orders("", "--admin-tls-cert " + shell_quote(pki().good.cert) + " --admin-tls-key " +
                           shell_quote(pki().good.key));
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find("--admin-tls-cert"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("--admin-port"), std::string::npos) << r.out;
}

}  // namespace
