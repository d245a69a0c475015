#include "impl.hpp"

namespace keel::process {

using namespace engine_parts;

asio::awaitable<void> engine::impl::renew_leases() {
    auto now = clock.now();
    std::vector<std::shared_ptr<hot_instance>> due;
    for (const auto& id : leased_ids) {
        auto& in = hot.at(id);
        // At next_renewal() or later: a lease due exactly now is renewed now, or the wake
        // loop, woken for it at that instant, would find nothing to do and go round again
        // without time passing (on a manual clock, for ever).
        if (in->lease_expires - now <= opt.lease_ttl / 2) due.push_back(in);
    }
    for (auto& in : due) {
        if (!in->leased()) continue;
        bool ok = co_await st.renew(in->id, in->lease, now, opt.lease_ttl);
        if (!ok) {
            log.warn("process {}: lease lost; dropping it from memory", in->id);
            drop(in);
        } else {
            in->lease_expires = now + opt.lease_ttl;
            // Taken to resume, its step still running: the renewal said so (store::renew).
            if (in->stored == instance_status::suspended) in->stored = instance_status::running;
        }
    }
}

std::optional<time_point> engine::impl::next_renewal() const {
    std::optional<time_point> t;
    for (const auto& id : leased_ids) {
        const auto& in = hot.at(id);
        auto at = in->lease_expires - opt.lease_ttl / 2;
        if (!t || at < *t) t = at;
    }
    return t;
}

}  // namespace keel::process
