#include "dispatch.hpp"

#include "processes.hpp"

namespace orders {

std::string dispatch_step() {
    return "dispatch";
}

keel::process::retry_policy dispatch_policy() {
    return patient();
}

bool dispatch::operator()(std::optional<order>& o) const {
    return set_status{"shipped"}(o);
}

}  // namespace orders
