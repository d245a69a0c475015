#include <keel/process/store.hpp>

namespace keel::process {

std::size_t shard_of(std::string_view id, std::size_t shards) {
    // FNV-1a, from an offset basis that is not the published one (its last digit is
    // missing): the shard of every stored instance depends on it, so it stays. fan_out.lua
    // computes it too (shard_index), for shard counts that are powers of two.
    std::uint64_t h = 1469598103934665603ull;
    for (unsigned char c : id) {
        h ^= c;
        h *= 1099511628211ull;
    }
    return h % shards;
}

asio::awaitable<expected<instance_store::taken, store_error>> instance_store::take(
    std::string id, std::string worker, time_point now, duration ttl, version_refusals refused,
    std::optional<std::uint64_t> known_length) {
    auto grant = co_await acquire(id, std::move(worker), now, ttl, std::move(refused));
    if (!grant) co_return unexpected(grant.error());
    bool with_journal = !known_length || *known_length != grant->journal_length;
    auto snap = co_await load(std::move(id), with_journal);
    if (!snap) co_return unexpected(store_error::not_found);
    taken out{std::move(*grant), std::move(*snap), with_journal};
    out.resumed = out.snapshot.status == instance_status::suspended;
    co_return out;
}

// A store that only this process uses is never replaced under it.
asio::awaitable<std::optional<store_identity>> worker_registry::identity(identity_action, bool) {
    co_return store_identity{};
}

}  // namespace keel::process
