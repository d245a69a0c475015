#pragma once

// The other end of keel-payments-sim's webhook in its tests: POST /hooks on a keel test
// server (HTTPS with the test PKI's localhost certificate, or plain HTTP), recording every
// delivery, its X-Signature and when it arrived, and answering each with the next status of
// a script (200 once the script is used up).

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <keel/http/router.hpp>
#include <keel/http/testing.hpp>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace billing::sim::testing {

struct delivery {
    std::string body;
    std::string signature;  // X-Signature, "" when absent
    std::string content_type;
    std::chrono::steady_clock::time_point at;
};

class webhook_receiver {
  public:
    // Answers the n-th delivery with script[n] (200 past its end).
    explicit webhook_receiver(std::vector<keel::http::status> script = {}, bool tls = true);
    ~webhook_receiver();

    // https://localhost:<port>/hooks (http://127.0.0.1:<port>/hooks without TLS).
    std::string url() const;
    std::vector<delivery> deliveries() const;
    // Waits until `n` deliveries have arrived; whether they did within `timeout`.
    bool wait_for(std::size_t n, std::chrono::milliseconds timeout);

  private:
    keel::http::status answer_to(delivery d);

    bool tls_;
    std::vector<keel::http::status> script_;
    mutable std::mutex mutex_;
    std::condition_variable arrived_;
    std::vector<delivery> deliveries_;
    keel::http::router router_;
    std::unique_ptr<keel::http::testing::test_server> server_;  // last: stops first
};

}  // namespace billing::sim::testing
