#include <keel/framework/errors.hpp>

#include "impl.hpp"

// A store that comes back empty (docs/architecture.md): part 0's heartbeat compares the
// store's identity record with the one this worker has been using.

namespace keel::process {

using namespace engine_parts;
using identity_action = worker_registry::identity_action;

namespace {

constexpr std::string_view held_until_confirmed =
    "Redis may have come back without its data; no flow is started and no work claimed until "
    "an operator confirms the store (keel store confirm)";

std::string replaced_why(const std::string& known, const std::optional<store_identity>& now) {
    if (!now)
        return fmt::format(
            "the process store's identity record is gone (this worker was using store {}): {}",
            known, held_until_confirmed);
    return fmt::format("the process store is another one (store {} in place of {}): {}", now->id,
                       known, held_until_confirmed);
}

}  // namespace

asio::awaitable<void> engine::impl::check_store() {
    // Not yet trusted once (first heartbeat, or a store_must_exist refusal): open it again.
    if (watch->current() == store_watch::state::unknown || watch->known().empty()) {
        auto first = co_await registry.identity(identity_action::open, !opt.store_must_exist);
        if (first) {
            watch->trust(first->id);
            co_return;
        }
        auto why = fmt::format(
            "the process store has no identity record and this worker is configured to "
            "require one (store_must_exist): {}",
            held_until_confirmed);
        if (!watch->doubt()) log.write(log::level::critical, why);
        watch->question(std::move(why));
        co_return;
    }
    auto known = watch->known();
    auto now = co_await registry.identity(identity_action::read);
    if (now && now->id == known) {
        if (watch->doubt())
            log.warn("process store {} is back: starting and claiming again", known);
        watch->trust(known);
        co_return;
    }
    if (now && now->confirmed == now->id) {
        log.warn("process store {} in place of {}, confirmed by an operator: using it", now->id,
                 known.empty() ? "none" : known);
        watch->trust(now->id);
        co_return;
    }
    auto why = replaced_why(known, now);
    if (!watch->doubt()) log.write(log::level::critical, why);
    watch->question(std::move(why));
}

void engine::impl::refuse_while_in_question() const {
    if (auto why = watch->doubt()) throw keel::unavailable_error(*why);
}

bool engine::store_open() const {
    return parts_.front()->watch->open();
}

std::optional<std::string> engine::store_in_question() const {
    return parts_.front()->watch->doubt();
}

asio::awaitable<std::string> engine::confirm_store() {
    auto& part = *parts_.front();
    auto confirmed = co_await part.registry.identity(identity_action::confirm);
    if (!confirmed) throw keel::unavailable_error("process store: the identity was not recorded");
    part.log.warn("process store {} confirmed by an operator", confirmed->id);
    part.watch->trust(confirmed->id);
    co_return confirmed->id;
}

}  // namespace keel::process
