// keel-orders-renamed: keel-orders whose dispatch step has another name, to play a deploy
// whose change cannot replay the instances in flight (they park, and resume once the
// normal binary runs again).

#include "dispatch.hpp"
#include "processes.hpp"

namespace orders {

std::string dispatch_step() { return "hand to carrier"; }

keel::process::retry_policy dispatch_policy() { return patient(); }

bool dispatch::operator()(std::optional<order>& o) const { return set_status{"shipped"}(o); }

}  // namespace orders
