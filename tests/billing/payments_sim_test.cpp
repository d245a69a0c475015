// keel-payments-sim end to end: the binary started over HTTPS (certificates from
// tests/http/tls_support, or from examples/billing/scripts/make_test_ca.sh) with no Redis
// anywhere, driven with keel's HTTP client as the billing service would, and as an attacker
// would: no Idempotency-Key, malformed bodies, a key replayed and reused, a burst past
// --rate, plain HTTP on the HTTPS port. Pending charges' webhooks go to an in-test receiver
// (webhook_receiver.hpp) that checks their signatures and answers 500 to see them retried.

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <boost/asio/io_context.hpp>
#include <filesystem>
#include <fstream>
#include <keel/http/client.hpp>
#include <keel/http/middleware.hpp>
#include <keel/test/redis_server.hpp>
#include <keel/test/run.hpp>
#include <memory>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "service_process.hpp"
#include "tls_support.hpp"
#include "webhook_receiver.hpp"

namespace {

using namespace std::chrono_literals;
using billing::sim::testing::webhook_receiver;
using keel::e2e::service_process;
using keel::http::client;
using keel::http::client_request;
using keel::http::method;
using keel::http::status;
using keel::http::client_test::pki;
using json = nlohmann::json;

constexpr auto secret = "whsec-test";

keel::http::client_options trusting(std::string ca) {
    keel::http::client_options o;
    o.tls.ca_file = std::move(ca);
    return o;
}

// GET /readyz over HTTPS, trusting `ca`, until it answers 200.
std::function<bool(std::uint16_t, std::string&)> ready_over_tls(std::string ca,
                                                                std::string host = "localhost") {
    return [ca = std::move(ca), host = std::move(host)](std::uint16_t port, std::string& last) {
        boost::asio::io_context io;
        client c(io, trusting(ca));
        auto url = "https://" + host + ":" + std::to_string(port) + "/readyz";
        auto res = keel::test::run(io, c.request(client_request::get(url)), 5s);
        if (!res) {
            last = res.error().message;
            return false;
        }
        last = std::to_string(res->status_code()) + " " + res->body();
        return res->status_code() == 200;
    };
}

// The sim, as the e2e harness runs a service (see the file's description).
std::unique_ptr<service_process> run_sim(std::vector<std::string> args,
                                         std::string log_level = "warn",
                                         const std::string& cert = pki().good.cert,
                                         const std::string& key = pki().good.key,
                                         const std::string& ca = pki().ca) {
    std::vector<std::string> all = {"--tls-cert", cert, "--tls-key", key};
    all.insert(all.end(), args.begin(), args.end());
    return std::make_unique<service_process>(keel::e2e::service_options{
        .binary = KEEL_PAYMENTS_SIM_BINARY,
        .log_level = std::move(log_level),
        .extra_args = std::move(all),
        .ready = ready_over_tls(ca),
    });
}

json card_charge(const std::string& card, const std::string& reference,
                 std::int64_t amount = 1000) {
    return {{"card", card}, {"amount", amount}, {"currency", "eur"}, {"reference", reference}};
}

class billing_payments_sim : public ::testing::Test {
  protected:
    void start(std::vector<std::string> args = {}, std::string log_level = "warn") {
        sim = run_sim(std::move(args), std::move(log_level));
    }

    std::string url(const std::string& path) const {
        return "https://localhost:" + std::to_string(sim->port()) + path;
    }

    client::result send(client_request req) {
        return keel::test::run(io, https.request(std::move(req)), 15s);
    }

    // POST /charges with `body` as it is (JSON or not) and the key, when given.
    keel::http::client_response post_raw(const std::string& body, std::optional<std::string> key,
                                         const std::string& content_type = "application/json") {
        client_request req;
        req.method = method::post;
        req.url = url("/charges");
        req.body = body;
        req.header("Content-Type", content_type);
        if (key) req.header("Idempotency-Key", *key);
        auto res = send(std::move(req));
        if (!res) throw std::runtime_error("POST /charges: " + res.error().message);
        return std::move(*res);
    }
    keel::http::client_response charge(const json& body, std::optional<std::string> key) {
        return post_raw(body.dump(), std::move(key));
    }

    // GET /charges[?reference=...]: the list.
    json charges(const std::string& reference = "") {
        auto target =
            reference.empty() ? std::string("/charges") : "/charges?reference=" + reference;
        auto res = send(client_request::get(url(target)));
        if (!res) throw std::runtime_error("GET /charges: " + res.error().message);
        if (res->status_code() != 200) throw std::runtime_error("GET /charges: " + res->body());
        return res->json().at("charges");
    }

    // The status of charge `id`, as GET /charges lists it.
    std::string status_of(const std::string& id) {
        for (const auto& c : charges())
            if (c.at("id") == id) return c.at("status").get<std::string>();
        return "absent";
    }

    std::unique_ptr<service_process> sim;
    boost::asio::io_context io;
    client https{io, trusting(pki().ca)};
};

// A problem answer's status, media type and field.
void expect_problem(const keel::http::client_response& res, int code, const std::string& field) {
    EXPECT_EQ(res.status_code(), code) << res.body();
    EXPECT_EQ(res.header("Content-Type").value_or(""), "application/problem+json") << res.body();
    auto body = json::parse(res.body(), nullptr, false);
    ASSERT_TRUE(body.is_object()) << res.body();
    EXPECT_EQ(body.value("status", 0), code) << res.body();
    if (!field.empty()) {
        EXPECT_EQ(body.value("field", ""), field) << res.body();
    }
}

TEST_F(billing_payments_sim, a_charge_without_an_idempotency_key_is_400_naming_the_header) {
    start();
    auto res = charge(card_charge("4242424242424242", "inv-1"), std::nullopt);
    expect_problem(res, 400, "Idempotency-Key");
    auto empty = charge(card_charge("4242424242424242", "inv-1"), "");
    expect_problem(empty, 400, "Idempotency-Key");
    auto huge = charge(card_charge("4242424242424242", "inv-1"), std::string(300, 'k'));
    EXPECT_EQ(huge.status_code(), 400) << huge.body();
    EXPECT_TRUE(charges().empty()) << "a refused request charged";
}

TEST_F(billing_payments_sim, bad_bodies_are_400_naming_the_field_and_charge_nothing) {
    start();
    auto malformed = post_raw(R"({"card": "4242424242424242", "amount": )", "k1");
    expect_problem(malformed, 400, "");
    expect_problem(post_raw("[1, 2]", "k1"), 400, "");
    expect_problem(post_raw("", "k1"), 400, "");

    auto missing = card_charge("4242424242424242", "inv-1");
    missing.erase("amount");
    expect_problem(charge(missing, "k1"), 400, "/amount");
    missing = card_charge("4242424242424242", "inv-1");
    missing.erase("reference");
    expect_problem(charge(missing, "k1"), 400, "/reference");

    struct bad {
        const char* field;
        json value;
    };
    const std::vector<bad> cases = {
        {"amount", "1000"},   {"amount", 10.5},      {"amount", 0},
        {"amount", -5},       {"amount", 1e30},      {"card", 4242424242424242},
        {"card", "abc"},      {"card", "4242"},      {"card", nullptr},
        {"currency", "euro"}, {"currency", "e1r"},   {"currency", 978},
        {"reference", ""},    {"reference", "a\nb"}, {"reference", std::string(300, 'r')},
    };
    for (const auto& c : cases) {
        auto body = card_charge("4242424242424242", "inv-1");
        body[c.field] = c.value;
        auto res = charge(body, "k1");
        SCOPED_TRACE(body.dump().substr(0, 120));
        expect_problem(res, 400, std::string("/") + c.field);
    }
    auto not_json = post_raw(card_charge("4242424242424242", "inv-1").dump(), "k1", "text/plain");
    EXPECT_EQ(not_json.status_code(), 415) << not_json.body();

    EXPECT_TRUE(charges().empty()) << "a refused request charged";
    // None of them used the key up: a good request with it charges.
    auto good = charge(card_charge("4242424242424242", "inv-1"), "k1");
    EXPECT_EQ(good.status_code(), 201) << good.body();
}

TEST_F(billing_payments_sim, a_replay_answers_the_same_charge_200_and_charges_nothing_more) {
    start();
    auto first = charge(card_charge("4242424242424242", "inv-7"), "key-7");
    ASSERT_EQ(first.status_code(), 201) << first.body();
    auto made = first.json();
    EXPECT_TRUE(std::regex_match(made.at("id").get<std::string>(), std::regex("ch_[0-9a-f]{24}")))
        << made;
    EXPECT_EQ(made, (json{{"id", made.at("id")}, {"status", "succeeded"}, {"reference", "inv-7"}}));

    for (int i = 0; i < 3; ++i) {
        auto again = charge(card_charge("4242424242424242", "inv-7"), "key-7");
        ASSERT_EQ(again.status_code(), 200) << again.body();
        EXPECT_EQ(again.json(), made);
    }
    // The same request spelled differently is the same request.
    auto spaced = post_raw(
        R"({ "reference": "inv-7", "currency": "EUR", "amount": 1000, "card": "4242424242424242" })",
        "key-7");
    EXPECT_EQ(spaced.status_code(), 200) << spaced.body();

    auto listed = charges("inv-7");
    ASSERT_EQ(listed.size(), 1u) << listed;
    EXPECT_EQ(listed[0], (json{{"id", made.at("id")},
                               {"status", "succeeded"},
                               {"reference", "inv-7"},
                               {"amount", 1000},
                               {"currency", "eur"},
                               {"card", "4242"},
                               {"requests", 5}}));  // the first, 3 replays, the spaced one
}

TEST_F(billing_payments_sim, the_same_key_with_another_request_is_409_and_charges_nothing) {
    start();
    ASSERT_EQ(charge(card_charge("4242424242424242", "inv-1"), "k").status_code(), 201);
    expect_problem(charge(card_charge("4242424242424242", "inv-1", 999), "k"), 409,
                   "Idempotency-Key");
    expect_problem(charge(card_charge("4242424242424242", "inv-2"), "k"), 409, "Idempotency-Key");
    expect_problem(charge(card_charge("4000000000000002", "inv-1"), "k"), 409, "Idempotency-Key");
    EXPECT_EQ(charges().size(), 1u);
    EXPECT_TRUE(charges("inv-2").empty());
}

TEST_F(billing_payments_sim,
       test_cards_succeed_decline_and_the_retry_card_succeeds_from_its_third) {
    start();
    auto status_for = [&](const std::string& card, const std::string& key) {
        auto res = charge(card_charge(card, "inv-" + key), key);
        EXPECT_EQ(res.status_code(), 201) << res.body();
        return res.json().value("status", "");
    };
    EXPECT_EQ(status_for("4242424242424242", "1"), "succeeded");
    EXPECT_EQ(status_for("4000000000000002", "2"), "declined");
    EXPECT_EQ(status_for("4000000000000002", "3"), "declined");
    EXPECT_EQ(status_for("5555555555554444", "4"), "declined");  // unknown: declined
    EXPECT_EQ(status_for("4000000000009995", "5"), "declined");
    EXPECT_EQ(status_for("4000000000009995", "6"), "declined");
    EXPECT_EQ(status_for("4000000000009995", "7"), "succeeded");
    EXPECT_EQ(status_for("4000000000009995", "8"), "succeeded");

    auto all = charges();
    ASSERT_EQ(all.size(), 8u);
    std::vector<std::string> order;
    for (const auto& c : all) order.push_back(c.at("reference"));
    EXPECT_EQ(order, (std::vector<std::string>{"inv-1", "inv-2", "inv-3", "inv-4", "inv-5", "inv-6",
                                               "inv-7", "inv-8"}));
    EXPECT_EQ(all[4].value("card", ""), "9995");
}

TEST_F(billing_payments_sim, a_pending_charge_succeeds_after_the_delay_with_a_signed_webhook) {
    webhook_receiver receiver;
    start({"--webhook-url", receiver.url(), "--webhook-secret", secret, "--webhook-ca", pki().ca,
           "--pending-delay", "1s"});
    auto asked = std::chrono::steady_clock::now();
    auto res = charge(card_charge("4000000000000077", "inv-p"), "kp");
    ASSERT_EQ(res.status_code(), 201) << res.body();
    auto id = res.json().at("id").get<std::string>();
    EXPECT_EQ(res.json().value("status", ""), "pending");

    ASSERT_TRUE(receiver.wait_for(1, 10s)) << "no webhook";
    auto got = receiver.deliveries().at(0);
    EXPECT_GE(got.at - asked, 900ms) << "sent before --pending-delay";
    EXPECT_EQ(json::parse(got.body),
              (json{{"type", "charge.succeeded"}, {"charge", id}, {"reference", "inv-p"}}));
    EXPECT_TRUE(std::regex_match(got.signature, std::regex("sha256=[0-9a-f]{64}")))
        << got.signature;
    EXPECT_TRUE(keel::http::verify_signature(secret, got.body, got.signature)) << got.signature;
    EXPECT_FALSE(keel::http::verify_signature("another secret", got.body, got.signature));
    EXPECT_EQ(got.content_type, "application/json");

    EXPECT_EQ(status_of(id), "succeeded");
    auto replay = charge(card_charge("4000000000000077", "inv-p"), "kp");
    EXPECT_EQ(replay.status_code(), 200) << replay.body();
    EXPECT_EQ(replay.json().value("status", ""), "succeeded");
    std::this_thread::sleep_for(500ms);
    EXPECT_EQ(receiver.deliveries().size(), 1u) << "answered 200, yet sent again";
}

TEST_F(billing_payments_sim, the_webhook_is_retried_with_backoff_until_it_is_answered_2xx) {
    webhook_receiver receiver(
        {status::internal_server_error, status::service_unavailable, status::bad_request});
    start({"--webhook-url", receiver.url(), "--webhook-secret", secret, "--webhook-ca", pki().ca,
           "--pending-delay", "50ms"});
    auto res = charge(card_charge("4000000000000077", "inv-r"), "kr");
    ASSERT_EQ(res.status_code(), 201) << res.body();
    EXPECT_EQ(res.json().value("status", ""), "pending");

    ASSERT_TRUE(receiver.wait_for(4, 15s)) << receiver.deliveries().size() << " deliveries";
    auto got = receiver.deliveries();
    for (const auto& d : got) {
        EXPECT_EQ(d.body, got[0].body);  // the same event, byte for byte, signed alike
        EXPECT_TRUE(keel::http::verify_signature(secret, d.body, d.signature));
    }
    // 200 ms, 400 ms, 800 ms apart (a little slack for timers).
    EXPECT_GE(got[1].at - got[0].at, 180ms);
    EXPECT_GE(got[2].at - got[1].at, 380ms);
    EXPECT_GE(got[3].at - got[2].at, 780ms);
    std::this_thread::sleep_for(2s);
    EXPECT_EQ(receiver.deliveries().size(), 4u) << "answered 200, yet sent again";
}

TEST_F(billing_payments_sim, a_webhook_over_plain_http_is_signed_too) {
    webhook_receiver receiver({}, /*tls=*/false);
    start({"--webhook-url", receiver.url(), "--webhook-secret", secret, "--pending-delay", "0s"});
    ASSERT_EQ(charge(card_charge("4000000000000077", "inv-h"), "kh").status_code(), 201);
    ASSERT_TRUE(receiver.wait_for(1, 10s));
    auto got = receiver.deliveries().at(0);
    EXPECT_TRUE(keel::http::verify_signature(secret, got.body, got.signature));
}

TEST_F(billing_payments_sim, past_the_rate_it_answers_429_with_retry_after_and_charges_nothing) {
    constexpr int rate = 3;
    start({"--rate", std::to_string(rate)});
    ASSERT_EQ(charges().size(), 0u);  // the connection is up before the burst

    int created = 0;
    std::optional<keel::http::client_response> refused;
    auto began = std::chrono::steady_clock::now();
    for (int i = 0; i < 20 && !refused; ++i) {
        auto res =
            charge(card_charge("4242424242424242", "inv-burst"), "burst-" + std::to_string(i));
        if (res.status_code() == 201)
            ++created;
        else
            refused = res;
    }
    auto took = std::chrono::steady_clock::now() - began;
    ASSERT_TRUE(refused) << "20 charges, none refused";
    expect_problem(*refused, 429, "");
    EXPECT_EQ(refused->header("Retry-After").value_or(""), "1");
    EXPECT_GE(created, rate);
    if (took < 1s) {  // all of them within one second: exactly --rate
        EXPECT_EQ(created, rate) << "more than --rate charges within one second";
    }
    EXPECT_EQ(charges("inv-burst").size(), static_cast<std::size_t>(created)) << "a 429 charged";

    // A replay is answered while the limit holds: it charges nothing.
    auto replay = charge(card_charge("4242424242424242", "inv-burst"), "burst-0");
    EXPECT_EQ(replay.status_code(), 200) << replay.body();

    std::this_thread::sleep_for(1100ms);  // Retry-After
    auto later = charge(card_charge("4242424242424242", "inv-burst"), "after-the-wait");
    EXPECT_EQ(later.status_code(), 201) << later.body();
}

TEST_F(billing_payments_sim, plain_http_on_the_https_port_is_not_served) {
    start();
    auto plain = sim->client(3s);
    keel::http::headers h;
    h.set("Idempotency-Key", "plain-1");
    auto res = plain.post_json("/charges", card_charge("4242424242424242", "inv-plain"), h);
    EXPECT_EQ(res.status, status::bad_request) << res.body;
    EXPECT_TRUE(charges().empty()) << "plain HTTP charged";
}

TEST_F(billing_payments_sim, shutdown_is_prompt_while_a_webhook_is_being_retried) {
    webhook_receiver receiver(std::vector<status>(1000, status::internal_server_error));
    start({"--webhook-url", receiver.url(), "--webhook-secret", secret, "--webhook-ca", pki().ca,
           "--pending-delay", "0s"});
    ASSERT_EQ(charge(card_charge("4000000000000077", "inv-s"), "ks").status_code(), 201);
    ASSERT_TRUE(receiver.wait_for(3, 10s));  // waiting 800 ms before the fourth
    auto asked = std::chrono::steady_clock::now();
    int exit_status = sim->stop();
    EXPECT_LT(std::chrono::steady_clock::now() - asked, 3s);
    EXPECT_TRUE(WIFEXITED(exit_status) && WEXITSTATUS(exit_status) == 0)
        << "waitpid status " << exit_status;
}

keel::e2e::command_result run_sim_binary(const std::string& args) {
    return keel::e2e::run_command("env -u KEEL_CONFIG " +
                                  keel::e2e::shell_quote(KEEL_PAYMENTS_SIM_BINARY) + " " + args +
                                  " 2>&1");
}

TEST(billing_payments_sim_start, unusable_webhook_settings_stop_the_start_naming_them) {
    auto tls = " --port 0 --tls-cert " + keel::e2e::shell_quote(pki().good.cert) + " --tls-key " +
               keel::e2e::shell_quote(pki().good.key);
    auto r = run_sim_binary(tls + " --webhook-url ftp://example.com --webhook-secret s");
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_NE(r.out.find("--webhook-url"), std::string::npos) << r.out;
    r = run_sim_binary(tls + " --webhook-url https://localhost:1/hooks");
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_NE(r.out.find("--webhook-secret"), std::string::npos) << r.out;
    r = run_sim_binary(tls + " --rate 0");
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find("rate"), std::string::npos) << r.out;
    r = run_sim_binary(tls + " --redis redis://127.0.0.1:6379");  // it has no Redis
    EXPECT_EQ(r.code, 2) << r.out;
    r = run_sim_binary("--port 0");  // HTTPS only
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find("tls_cert (from default): this service serves HTTPS only"),
              std::string::npos)
        << r.out;
    r = run_sim_binary("--port 0 --tls-cert " + keel::e2e::shell_quote(pki().good.cert));
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find("tls_key (from default)"), std::string::npos) << r.out;
}

std::string read_file(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
}

TEST(billing_payments_sim_start, make_test_ca_sh_makes_certificates_the_sim_serves_idempotently) {
    auto dir = std::filesystem::path(keel::test::make_temp_dir("keel-billing-ca")) / "pki";
    auto made = keel::e2e::run_command(keel::e2e::shell_quote(KEEL_MAKE_TEST_CA) + " " +
                                       keel::e2e::shell_quote(dir.string()) + " 2>&1");
    ASSERT_EQ(made.code, 0) << made.out;
    std::vector<std::string> files = {"ca.pem", "ca-key.pem", "server.pem", "server-key.pem"};
    std::vector<std::string> first;
    for (const auto& f : files) {
        ASSERT_TRUE(std::filesystem::exists(dir / f)) << f;
        first.push_back(read_file(dir / f));
    }
    auto again = keel::e2e::run_command(keel::e2e::shell_quote(KEEL_MAKE_TEST_CA) + " " +
                                        keel::e2e::shell_quote(dir.string()) + " 2>&1");
    ASSERT_EQ(again.code, 0) << again.out;
    for (std::size_t i = 0; i < files.size(); ++i)
        EXPECT_EQ(read_file(dir / files[i]), first[i]) << files[i] << " was made again";

    auto ca = (dir / "ca.pem").string();
    auto sim = run_sim({}, "warn", (dir / "server.pem").string(), (dir / "server-key.pem").string(),
                       ca);  // ready over https://localhost, trusting the script's CA
    std::string last;
    EXPECT_TRUE(ready_over_tls(ca, "127.0.0.1")(sim->port(), last)) << last;
    EXPECT_FALSE(ready_over_tls(pki().ca)(sim->port(), last)) << "another CA was trusted";
    sim.reset();
    std::filesystem::remove_all(dir.parent_path());
}

}  // namespace
