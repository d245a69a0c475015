// The billing stack of the end-to-end tests (billing_stack.hpp): the processes, their flags,
// readiness over HTTPS, and the blocking client both sides are driven with.

#include "billing_stack.hpp"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <keel/http/client.hpp>
#include <keel/test/run.hpp>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "tls_support.hpp"

namespace billing_e2e {

using keel::http::client;
using keel::http::client_request;
using keel::http::method;
using keel::http::client_test::pki;

const std::string& test_ca() {
    return pki().ca;
}

namespace {

keel::http::client_options trusting_test_ca() {
    keel::http::client_options o;
    o.tls.ca_file = pki().ca;
    o.request_timeout = std::chrono::seconds(15);
    return o;
}

// GET https://localhost:<port>/readyz until it answers 200; `port` 0: the port given.
std::function<bool(std::uint16_t, std::string&)> ready_over_tls(std::uint16_t fixed_port = 0) {
    return [fixed_port](std::uint16_t port, std::string& last) {
        boost::asio::io_context io;
        client c(io, trusting_test_ca());
        auto url =
            "https://localhost:" + std::to_string(fixed_port ? fixed_port : port) + "/readyz";
        auto res = keel::test::run(io, c.request(client_request::get(url)), 5s);
        if (!res) {
            last = res.error().message;
            return false;
        }
        last = std::to_string(res->status_code()) + " " + res->body();
        return res->status_code() == 200;
    };
}

}  // namespace

std::string answer::describe() const {
    if (status == 0) return "no answer: " + error;
    return std::to_string(status) + " " + body;
}

// ---- https_client ----

struct https_client::impl {
    boost::asio::io_context io;
    std::unique_ptr<client> c = std::make_unique<client>(io, trusting_test_ca());
};

https_client::https_client() : impl_(std::make_unique<impl>()) {}
https_client::~https_client() = default;

void https_client::reset() {
    impl_->c = std::make_unique<client>(impl_->io, trusting_test_ca());
}

answer https_client::send(client_request req, std::chrono::milliseconds limit) {
    answer a;
    auto res = keel::test::run(impl_->io, impl_->c->request(std::move(req)), limit);
    if (!res) {
        a.error = res.error().message;
        return a;
    }
    a.status = res->status_code();
    a.body = res->body();
    a.value = json::parse(a.body, nullptr, false);
    return a;
}

answer https_client::get(const std::string& url) {
    return send(client_request::get(url));
}

answer https_client::post(const std::string& url, const json& body,
                          const std::vector<std::pair<std::string, std::string>>& headers) {
    auto req = client_request::json(method::post, url, body);
    for (const auto& [name, value] : headers) req.header(name, value);
    return send(std::move(req));
}

// ---- billing_stack ----

billing_stack::billing_stack(stack_options options) : options_(std::move(options)) {
    redis_ = std::make_unique<keel::test::redis_server>();
    sim_port_ = keel::test::free_port();
    for (int i = 0; i < options_.workers; ++i) start_billing(i);
    start_sim();
}

// The services print their logs when the test has failed (service_process). The workers stop
// gracefully (SIGTERM), then the provider, as a deployment stops: each must exit within
// service_process's grace. (The provider, a service without Redis, once hung here: its
// engine's wake loop spun on the in-memory store after the worker withdrew; see
// engine_parts.a_withdrawn_worker_s_wake_loop_still_sleeps_until_the_engine_stops.)
billing_stack::~billing_stack() {
    workers_.clear();
    sim_.reset();
}

void billing_stack::start_billing(int i) {
    std::vector<std::string> args = {
        "--tls-cert",        pki().good.cert, "--tls-key",     pki().good.key,
        "--provider-url",    sim_url(),       "--provider-ca", pki().ca,
        "--provider-secret", webhook_secret,  "--lease-ttl",   "2s",
    };
    args.insert(args.end(), options_.billing_args.begin(), options_.billing_args.end());
    workers_.push_back(std::make_unique<keel::e2e::service_process>(keel::e2e::service_options{
        .binary = KEEL_BILLING_BINARY,
        .redis_url = redis_->url(),
        .log_level = options_.billing_log_level,
        .extra_args = std::move(args),
        .ready_timeout = 30s,
        .ready = ready_over_tls(),
    }));
    (void)i;
}

void billing_stack::start_sim() {
    if (sim_) {
        sim_->start();
        client_.reset();
        return;
    }
    std::vector<std::string> args = {
        "--tls-cert",       pki().good.cert, "--tls-key",
        pki().good.key,     "--webhook-url", billing_url(0) + "/webhooks/provider",
        "--webhook-secret", webhook_secret,  "--webhook-ca",
        pki().ca,
    };
    args.insert(args.end(), options_.sim_args.begin(), options_.sim_args.end());
    // Last: wins over the harness's --port, so that keel-billing's --provider-url holds.
    args.insert(args.end(), {"--port", std::to_string(sim_port_)});
    sim_ = std::make_unique<keel::e2e::service_process>(keel::e2e::service_options{
        .binary = KEEL_PAYMENTS_SIM_BINARY,
        .log_level = options_.sim_log_level,
        .extra_args = std::move(args),
        .ready_timeout = 30s,
        .ready = ready_over_tls(sim_port_),
    });
}

void billing_stack::stop_sim() {
    sim_->stop();
}

void billing_stack::kill_worker(int i) {
    workers_.at(i)->kill9();
}

void billing_stack::start_worker(int i) {
    workers_.at(i)->start();
    client_.reset();
}

std::string billing_stack::billing_url(int worker) const {
    return "https://localhost:" + std::to_string(workers_.at(worker)->port());
}

std::string billing_stack::sim_url() const {
    return "https://localhost:" + std::to_string(sim_port_);
}

answer billing_stack::create_customer(const std::string& id, int at) {
    json body = {{"id", id}, {"email", id + "@example.com"}};
    return client_.post(billing_url(at) + "/customers", body);
}

answer billing_stack::subscribe(const std::string& id, const std::string& customer,
                                const std::string& plan, const std::string& card, int at) {
    json body = {{"id", id}, {"customer", customer}, {"plan", plan}, {"card", card}};
    return client_.post(billing_url(at) + "/subscriptions", body);
}

answer billing_stack::subscription(const std::string& id, int at) {
    return client_.get(billing_url(at) + "/subscriptions/" + id);
}

answer billing_stack::invoice(const std::string& id, int at) {
    return client_.get(billing_url(at) + "/invoices/" + id);
}

answer billing_stack::cancel(const std::string& id, const std::string& idempotency_key, int at) {
    std::vector<std::pair<std::string, std::string>> headers;
    if (!idempotency_key.empty()) headers.emplace_back("Idempotency-Key", idempotency_key);
    return client_.post(billing_url(at) + "/subscriptions/" + id + "/cancel", json::object(),
                        headers);
}

answer billing_stack::change_plan(const std::string& id, const std::string& plan,
                                  const std::string& idempotency_key, int at) {
    std::vector<std::pair<std::string, std::string>> headers;
    if (!idempotency_key.empty()) headers.emplace_back("Idempotency-Key", idempotency_key);
    json body = {{"plan", plan}};
    return client_.post(billing_url(at) + "/subscriptions/" + id + "/plan", body, headers);
}

std::optional<json> billing_stack::poll(const std::string& path,
                                        const std::function<bool(const json&)>& accept,
                                        std::chrono::milliseconds timeout, std::string& last,
                                        std::chrono::milliseconds interval) {
    std::optional<json> found;
    keel::e2e::eventually(
        [&] {
            auto a = client_.get(billing_url(0) + path);
            last = "GET " + path + " -> " + a.describe();
            if (a.status != 200 || a.value.is_discarded() || !accept(a.value)) return false;
            found = a.value;
            return true;
        },
        timeout, interval, &last);
    return found;
}

json billing_stack::charges(const std::string& reference) {
    auto target = sim_url() + "/charges";
    if (!reference.empty()) target += "?reference=" + reference;
    auto a = client_.get(target);
    if (a.status != 200 || !a.value.is_object() || !a.value.contains("charges"))
        throw std::runtime_error("GET /charges at the provider: " + a.describe());
    return a.value["charges"];
}

std::int64_t billing_stack::charge_answers(int status) {
    auto a = client_.get(sim_url() + "/metrics");
    if (a.status != 200) throw std::runtime_error("GET /metrics at the provider: " + a.describe());
    auto wanted = "keel_http_requests_total{method=\"POST\",route=\"/charges\",status=\"" +
                  std::to_string(status) + "\"} ";
    auto at = a.body.find(wanted);
    if (at == std::string::npos) return 0;
    return std::stoll(a.body.substr(at + wanted.size()));
}

std::int64_t billing_stack::invoice_steps(int worker) {
    auto a = client_.get(billing_url(worker) + "/metrics");
    if (a.status != 200) throw std::runtime_error("GET /metrics of a worker: " + a.describe());
    std::string wanted =
        "keel_process_step_attempts_total{definition=\"/invoice/:subscription/:period\"} ";
    auto at = a.body.find(wanted);
    if (at == std::string::npos) return 0;
    return std::stoll(a.body.substr(at + wanted.size()));
}

}  // namespace billing_e2e
