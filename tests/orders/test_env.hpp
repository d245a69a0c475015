#pragma once

// The testing environment keel-orders' unit tests share: the service's registrations with
// short timeouts, and its signals and processes as main.cpp has them.

#include <keel/process/testing.hpp>

#include "service.hpp"

namespace orders::test {

inline void configure(keel::process::testing::environment& env) {
    using namespace std::chrono_literals;
    env.services([](keel::di::registry& r) {
        r.instance(std::make_shared<orders::settings>(
            orders::settings{.payment_timeout = 72h, .verification_timeout = 10min}));
    });
    orders::add_durable(env);
}

}  // namespace orders::test
