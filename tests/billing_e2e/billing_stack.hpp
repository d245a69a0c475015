#pragma once

// examples/billing's two binaries run together for end-to-end tests, everything over TLS:
// a redis-server, one or more keel-billing workers on it (HTTPS with the test PKI of
// tests/http/tls_support), and keel-payments-sim (HTTPS with the same certificates), whose
// signed webhooks go to the first worker's /webhooks/provider. Each side is told the other's
// URL at start: the sim's port is picked here (given last on its command line, where it
// wins over the harness's own --port), so the sim can be stopped and started again on the
// same port and keel-billing keeps calling the same URL. A blocking HTTPS client (keel's,
// trusting the test CA) drives both.

#include <chrono>
#include <cstdint>
#include <functional>
#include <keel/http/client.hpp>
#include <keel/test/redis_server.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "service_process.hpp"

namespace billing_e2e {

using namespace std::chrono_literals;
using json = nlohmann::json;

inline constexpr auto webhook_secret = "whsec-e2e";

// What a request came to: the status (0 when there was no answer), the body, and the body
// as JSON (discarded when it is not JSON).
struct answer {
    int status = 0;
    std::string body;
    json value;
    std::string error;  // why there was no answer
    std::string describe() const;
};

// One HTTPS client on an io_context of its own, trusting the test CA; calls block.
class https_client {
  public:
    https_client();
    ~https_client();
    answer send(keel::http::client_request req, std::chrono::milliseconds limit = 20s);
    answer get(const std::string& url);
    answer post(const std::string& url, const json& body,
                const std::vector<std::pair<std::string, std::string>>& headers = {});
    // Drops the pooled connections (after a server restarted).
    void reset();

  private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

struct stack_options {
    std::vector<std::string> billing_args;  // e.g. {"--period", "2s"}
    std::vector<std::string> sim_args;      // e.g. {"--rate", "30"}
    int workers = 1;
    std::string billing_log_level = "warn";
    std::string sim_log_level = "warn";
};

class billing_stack {
  public:
    explicit billing_stack(stack_options options);
    ~billing_stack();

    // https://localhost:<port> of worker `i`, and of the sim.
    std::string billing_url(int worker = 0) const;
    std::string sim_url() const;

    keel::e2e::service_process& worker(int i = 0) { return *workers_.at(i); }
    keel::e2e::service_process& sim() { return *sim_; }
    keel::test::redis_server& redis() { return *redis_; }
    https_client& client() { return client_; }

    // The sim stopped (SIGTERM), and started again on the same port with the same
    // certificates (a new sim: it remembers no charge).
    void stop_sim();
    void start_sim();
    // keel-billing worker `i` killed with SIGKILL, and started again with the same flags.
    void kill_worker(int i = 0);
    void start_worker(int i = 0);

    // ---- keel-billing's API (on worker `at`) ----
    answer create_customer(const std::string& id, int at = 0);
    answer subscribe(const std::string& id, const std::string& customer, const std::string& plan,
                     const std::string& card, int at = 0);
    answer subscription(const std::string& id, int at = 0);
    answer invoice(const std::string& id, int at = 0);
    answer cancel(const std::string& id, const std::string& idempotency_key = {}, int at = 0);
    answer change_plan(const std::string& id, const std::string& plan,
                       const std::string& idempotency_key = {}, int at = 0);

    // Polls GET `path` on worker 0 until `accept` holds for its JSON body; the body, or
    // nullopt with what was last seen in `last`.
    std::optional<json> poll(const std::string& path,
                             const std::function<bool(const json&)>& accept,
                             std::chrono::milliseconds timeout, std::string& last,
                             std::chrono::milliseconds interval = 20ms);

    // ---- the provider's side ----
    // GET /charges[?reference=...]: its "charges" array (throws when it does not answer).
    json charges(const std::string& reference = {});
    // How many POST /charges it answered with `status`, from its /metrics.
    std::int64_t charge_answers(int status);
    // How many step attempts of invoices worker `i` ran, from its /metrics.
    std::int64_t invoice_steps(int worker);

  private:
    void start_billing(int i);

    stack_options options_;
    std::uint16_t sim_port_ = 0;
    https_client client_;
    // Declared in this order so that the services stop before their Redis does, and the
    // billing workers (the provider's clients) before the provider, as a deployment stops.
    std::unique_ptr<keel::test::redis_server> redis_;
    std::unique_ptr<keel::e2e::service_process> sim_;
    std::vector<std::unique_ptr<keel::e2e::service_process>> workers_;
};

// The test CA's PEM file and the localhost certificate the servers use.
const std::string& test_ca();

}  // namespace billing_e2e
