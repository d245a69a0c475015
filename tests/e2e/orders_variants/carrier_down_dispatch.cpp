// keel-orders-carrier-down: keel-orders whose carrier is down. The dispatch fails twice, a
// second apart (operators see the failed attempt meanwhile), and the order's flow fails, for
// an operator to retry from the dispatch once the normal binary runs again.

#include <chrono>
#include <stdexcept>

#include "dispatch.hpp"
#include "processes.hpp"

namespace orders {

std::string dispatch_step() { return "dispatch"; }

keel::process::retry_policy dispatch_policy() {
    auto p = patient();
    p.max_attempts = 2;
    p.initial_backoff = std::chrono::seconds(1);
    p.jitter = 0;
    return p;
}

bool dispatch::operator()(std::optional<order>&) const {
    throw std::runtime_error("carrier unreachable");
}

}  // namespace orders
