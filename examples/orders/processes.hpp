#pragma once

// The orders service's durable processes.
//
// Order fulfilment (/order/:order/fulfillment): wait for the payment, its failure or the
// payment timeout, whichever comes first; on payment record it and dispatch the order, then
// wait for the delivery.
//
// E-mail verification (/verify/:user/email): send a code, then wait for the right code,
// resending on request (at most 3 resends), until the verification timeout.

#include <keel/process/definition.hpp>
#include <string>

#include "domain.hpp"

namespace orders {

struct fulfillment {
    std::string status;  // completed, payment_failed or payment_timeout
    NLOHMANN_DEFINE_TYPE_INTRUSIVE(fulfillment, status)
};

struct verification {
    bool verified = false;
    std::string reason;  // verified, timeout or too_many_attempts
    int attempts = 0;    // codes submitted
    NLOHMANN_DEFINE_TYPE_INTRUSIVE(verification, verified, reason, attempts)
};

keel::process::durable<fulfillment> fulfil(keel::process::context& ctx, keel::ref<order> o,
                                           payment_signals& payments, shipping_signals& shipping,
                                           order_book& orders, settings& config);

keel::process::durable<verification> verify(keel::process::context& ctx, keel::ref<user> u,
                                            verification_signals& signals, user_book& users,
                                            settings& config);

// Steps retry for a while: a Redis restart must not fail an order or a verification.
keel::process::retry_policy patient();

inline constexpr auto order_fulfillment =
    keel::process::define<fulfil>("/order/:order/fulfillment").retry(patient).version("1");
inline constexpr auto email_verification =
    keel::process::define<verify>("/verify/:user/email").retry(patient);

// At most this many resends, and this many wrong codes before giving up.
inline constexpr int max_resends = 3;
inline constexpr int max_attempts = 10;

}  // namespace orders
