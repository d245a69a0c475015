#pragma once

// Order traffic against keel-orders for end-to-end tests, load drivers and the soak: clients
// on their own threads that create an order, pay it (and, when asked, report it delivered),
// again and again until stopped, keeping every answer. The checks that follow such traffic
// (nothing acknowledged lost, nothing paid twice) read the orders back over HTTP.

#include <atomic>
#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "service_process.hpp"

namespace keel::e2e {

enum class order_call { create, pay, deliver };

// One request and its answer.
struct order_outcome {
    order_call what = order_call::create;
    std::string order;
    int status = 0;  // 0: no HTTP answer
    bool retry_after = false;
    std::string detail;  // the body, or why there was no answer
    std::chrono::steady_clock::time_point sent{};
    std::chrono::steady_clock::duration took{};

    bool ok() const { return status >= 200 && status < 300; }
    // The payment's transaction id (one payment per order).
    std::string tx() const { return "tx-" + order; }
    std::string describe() const;
};

// Sends one request of the flow for `order`.
order_outcome send_order_call(http::testing::test_client& client, order_call what,
                              const std::string& order);

struct order_traffic_options {
    int clients = 4;
    std::chrono::milliseconds client_timeout{15'000};
    std::chrono::milliseconds pause_after_failure{50};
    // Each client waits this long between orders (0: none, as fast as the service answers).
    std::chrono::milliseconds pace{0};
    // After a payment answered 2xx, report the order delivered (retried until the flow waits
    // for it), so that its flow completes.
    bool deliver = false;
};

class order_traffic {
  public:
    // Starts the clients; their orders are named "<name>-<client>-<n>".
    order_traffic(const service_process& service, const std::string& name,
                  order_traffic_options options = {});
    ~order_traffic();
    order_traffic(const order_traffic&) = delete;
    order_traffic& operator=(const order_traffic&) = delete;

    // The answers since the last take(), while the clients go on.
    std::vector<order_outcome> take();
    // Stops the clients; the answers not taken yet.
    std::vector<order_outcome> stop();

  private:
    void drive(const service_process& service, const std::string& prefix);
    void keep(order_outcome o);

    order_traffic_options options_;
    std::atomic<bool> stop_{false};
    std::mutex mutex_;
    std::vector<order_outcome> answers_;
    std::vector<std::thread> threads_;
};

// Whether a webhook's answer says its signal reached a process ({"delivered": N > 0}); a
// delivery reported before the flow waits for it reaches none.
bool reached_flow(const order_outcome& o);

// Whether the order's payments hold the transaction `tx`, and how many times.
int payments_with(const nlohmann::json& order, const std::string& tx);

}  // namespace keel::e2e
