#pragma once

// The testing environment keel-orders' unit tests share: the service's registrations with
// short timeouts, its signals and its two processes.

#include <keel/process/testing.hpp>

#include "processes.hpp"
#include "service.hpp"

namespace orders::test {

inline void configure(keel::process::testing::environment& env) {
    using namespace std::chrono_literals;
    env.services([](keel::di::registry& r) {
           r.instance(std::make_shared<orders::settings>(
               orders::settings{.payment_timeout = 72h, .verification_timeout = 10min}));
       })
        .signals<orders::payment_signals, orders::shipping_signals, orders::verification_signals>()
        .processes(orders::order_fulfillment, orders::email_verification);
}

}  // namespace orders::test
