#pragma once

// The payment provider as the invoice process sees it: one charge, made as a durable step of
// the process. The process depends on the interface so that unit tests in virtual time can
// answer charges without a network (a loopback server does not move with virtual time);
// the service's implementation makes the charge with ctx.http (journaled, one
// Idempotency-Key per step, retried on 429 and 5xx) under the provider's fleet-wide limit.
//
//   POST <provider-url>/charges {"card", "amount", "currency": "eur", "reference"}
//   -> 201 (200 for a replayed key) {"id": "ch_...", "status": "succeeded" | "declined" |
//      "pending", "reference"}

#include <cstdint>
#include <keel/di/inject.hpp>
#include <keel/framework/service.hpp>
#include <keel/http/client.hpp>
#include <keel/process/context.hpp>
#include <keel/process/limiter.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "domain.hpp"

namespace billing {

struct charge_request {
    std::string card;
    std::int64_t amount = 0;  // cents, in eur
    std::string reference;    // the invoice id
};

// What a charge came to. status: succeeded, declined, pending, or error (no usable answer
// after the step's retries: counted as a failed attempt).
struct charge_result {
    std::string id;  // "ch_..."; empty when there is none
    std::string status;
    std::string detail;  // why, for an error
    NLOHMANN_DEFINE_TYPE_INTRUSIVE(charge_result, id, status, detail)
};

// Reads the provider's answer (its status code and body) into a charge_result.
charge_result read_charge(int status, const std::string& body);

class payment_provider {
  public:
    virtual ~payment_provider() = default;
    // Makes the charge as the step `step` of ctx's process: journaled, so a replay returns
    // the recorded result without charging again. Each step is its own attempt: name them
    // apart ("charge 1", "charge 2") and each gets its own idempotency key.
    virtual keel::process::durable<charge_result> charge(keel::process::context& ctx,
                                                         std::string step,
                                                         charge_request request) = 0;
};

// The provider's fleet-wide rate, from --provider-rate: every attempt of every charge on
// every worker takes a permit of it.
struct provider_limit {
    keel::process::limit limit;
};
provider_limit provider_limit_of(const settings& s);

// The service's provider: HTTPS to --provider-url, trusting --provider-ca.
class http_provider final : public payment_provider {
  public:
    using inject = keel::di::inject<keel::service&, settings&, provider_limit&>;
    // std::invalid_argument naming the option when --provider-url is missing or not https.
    http_provider(keel::service& service, settings& s, provider_limit& limit);

    keel::process::durable<charge_result> charge(keel::process::context& ctx, std::string step,
                                                 charge_request request) override;

  private:
    std::string url_;  // .../charges
    keel::process::limit limit_;
    keel::http::client client_;
};

}  // namespace billing
