#pragma once

// The dispatch of a paid order: the step's name, its retry policy and the change it makes
// to the order. In a file of its own so that the end-to-end tests can build keel-orders with
// another dispatch (tests/e2e/orders_variants): a deploy that renamed the step, a carrier
// that is down.

#include <keel/process/retry.hpp>
#include <optional>
#include <string>

#include "domain.hpp"

namespace orders {

// The name the step is journaled under.
std::string dispatch_step();

keel::process::retry_policy dispatch_policy();

// The order shipped.
struct dispatch {
    bool operator()(std::optional<order>& o) const;
};

}  // namespace orders
