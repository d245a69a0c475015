#include "impl.hpp"

// Rolling deploys: the worker's announcement, what it leaves to workers with newer code,
// and giving instances back instead of parking them.

namespace keel::process {

using namespace engine_parts;

asio::awaitable<void> engine::impl::heartbeat() {
    if (opt.heartbeat <= duration::zero() || withdrawn) co_return;
    auto now = clock.now();
    if (now < next_heartbeat) co_return;
    if (part == 0) {
        worker_record self{
            opt.worker, {versions.begin(), versions.end()}, now, now + 3 * opt.heartbeat};
        live = co_await registry.announce(std::move(self));
        live_read = true;
        co_await check_store();
    } else {
        live = co_await registry.workers(now);
        live_read = true;
    }
    next_heartbeat = now + opt.heartbeat;
}

asio::awaitable<void> engine::impl::withdraw() {
    if (opt.heartbeat <= duration::zero() || withdrawn) co_return;
    withdrawn = true;
    co_await registry.withdraw(opt.worker);
}

void engine::impl::withdraw_later() {
    asio::co_spawn(
        ex,
        [self = shared_from_this()]() -> asio::awaitable<void> {
            try {
                co_await self->withdraw();
            } catch (const std::exception& e) {  // it expires by itself
                self->log.debug("could not withdraw worker {}: {}", self->opt.worker, e.what());
            }
        },
        asio::detached);
}

const std::string* engine::impl::my_version(const std::string& definition) const {
    auto mine = versions.find(definition);
    return mine == versions.end() ? nullptr : &mine->second;
}

bool engine::impl::lacks_code_for(const std::string& definition, const std::string& version) const {
    const auto* mine = my_version(definition);
    return !mine || compare_versions(version, *mine) > 0;
}

bool engine::impl::other_live(const worker_record& w) const {
    return w.worker != opt.worker && w.expires >= clock.now();
}

const worker_record* engine::impl::newer_worker(const std::string& definition) const {
    const worker_record* newest = nullptr;
    const std::string* newest_version = nullptr;
    for (const auto& w : live) {
        if (!other_live(w)) continue;
        auto theirs = w.versions.find(definition);
        if (theirs == w.versions.end()) continue;
        if (!lacks_code_for(definition, theirs->second)) continue;
        if (!newest || compare_versions(theirs->second, *newest_version) > 0) {
            newest = &w;
            newest_version = &theirs->second;
        }
    }
    return newest;
}

const worker_record* engine::impl::worker_below(std::uint32_t level) const {
    for (const auto& w : live)
        if (other_live(w) && w.level < level) return &w;
    return nullptr;
}

bool engine::impl::all_read(std::uint32_t level) const {
    return live_read && !worker_below(level);
}

version_refusals engine::impl::refusals() const {
    std::set<std::pair<std::string, std::string>> out;
    for (const auto& w : live) {
        if (!other_live(w)) continue;
        for (const auto& [definition, version] : w.versions)
            if (lacks_code_for(definition, version)) out.emplace(definition, version);
    }
    for (const auto& refused : cannot_run)
        if (newer_worker(refused.first)) out.insert(refused);
    return {out.begin(), out.end()};
}

std::optional<std::string> engine::impl::reason_to_leave(const instance_snapshot& snap) const {
    if (!lacks_code_for(snap.definition, snap.version)) return std::nullopt;
    auto* other = newer_worker(snap.definition);
    if (!other) return std::nullopt;
    const auto& theirs = other->versions.find(snap.definition)->second;
    const auto* mine = my_version(snap.definition);
    if (!mine)
        return fmt::format("this worker does not run {}; worker {} does", snap.definition,
                           other->worker);
    if (compare_versions(theirs, snap.version) < 0) return std::nullopt;
    return fmt::format(
        "started by version \"{}\", newer than this worker's \"{}\"; worker {} "
        "runs \"{}\"",
        snap.version, *mine, other->worker, theirs);
}

asio::awaitable<void> engine::impl::leave(std::string id, const std::string& definition,
                                          const std::string& version, lease_token lease,
                                          std::string reason) {
    cannot_run.emplace(definition, version);
    metrics_of(definition).left.fetch_add(1, std::memory_order_relaxed);
    log.with("instance", id)
        .with("definition", definition)
        .warn("left to another worker: {}", reason);
    const auto* mine = my_version(definition);
    departure why{opt.worker, mine ? *mine : std::string(), std::move(reason), clock.now()};
    co_await st.leave(std::move(id), std::move(lease), std::move(why));
}

asio::awaitable<void> engine::impl::refresh_workers() {
    if (opt.heartbeat <= duration::zero()) co_return;
    live = co_await registry.workers(clock.now());
    live_read = true;
}

asio::awaitable<bool> engine::impl::hand_over(std::shared_ptr<hot_instance> in) {
    if (!in->leased()) co_return false;
    // Parking is rare and final: first make sure no newer worker came up since the heartbeat.
    if (!newer_worker(in->definition)) co_await refresh_workers();
    auto* other = newer_worker(in->definition);
    if (!other || in->dropped()) co_return false;
    auto reason = fmt::format("{}; worker {} runs version \"{}\"", in->exec->rt.park_message(),
                              other->worker, other->versions.find(in->definition)->second);
    auto lease = in->lease;
    auto id = in->id;
    drop(in);
    co_await leave(std::move(id), in->definition, in->version, std::move(lease), std::move(reason));
    co_return true;
}

}  // namespace keel::process
