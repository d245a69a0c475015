#include "charges.hpp"

#include <fmt/format.h>

namespace billing::sim {

charge_book::charge_book(std::size_t rate_per_second)
    : rate_(rate_per_second), random_(std::random_device{}()) {}

charge_result charge_book::charge(const std::string& key, const charge_request& request,
                                  time_point now) {
    std::lock_guard lock(mutex_);
    if (auto seen = by_key_.find(key); seen != by_key_.end()) {
        auto& earlier = charges_[seen->second];
        if (earlier.request != request) return {charge_outcome::key_reused, std::nullopt};
        ++earlier.requests;
        return {charge_outcome::replayed, earlier};
    }
    if (!rate_.try_take(now)) return {charge_outcome::rate_limited, std::nullopt};

    int nth = ++charges_per_card_[request.card];
    sim::charge made{new_id(), outcome_for(request.card, nth), request};
    auto index = charges_.size();
    by_id_.emplace(made.id, index);
    by_key_.emplace(key, index);
    by_reference_[request.reference].push_back(index);
    charges_.push_back(made);
    return {charge_outcome::created, std::move(made)};
}

bool charge_book::settle(const std::string& id) {
    std::lock_guard lock(mutex_);
    auto found = by_id_.find(id);
    if (found == by_id_.end()) return false;
    auto& c = charges_[found->second];
    if (c.status != charge_status::pending) return false;
    c.status = charge_status::succeeded;
    return true;
}

std::vector<charge> charge_book::list(std::optional<std::string_view> reference) const {
    std::lock_guard lock(mutex_);
    if (!reference) return charges_;
    std::vector<sim::charge> out;
    auto found = by_reference_.find(std::string(*reference));
    if (found == by_reference_.end()) return out;
    for (auto index : found->second) out.push_back(charges_[index]);
    return out;
}

std::string charge_book::new_id() {
    return fmt::format("ch_{:016x}{:08x}", random_(), static_cast<std::uint32_t>(random_()));
}

}  // namespace billing::sim
