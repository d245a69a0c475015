#pragma once

// clang-format off
/// @file
/// keel::process::redis_store: the store on Redis. Every call is one Lua script (validate
/// first, write last), so a rejected call changes nothing and a crash never leaves half a
/// transition behind. On Redis Cluster a script also checks, before its first write, that
/// every key it will touch is on its node, so a slot that migrates meanwhile refuses it whole
/// and the store sends it again (docs/architecture.md, "Scripts while their slot migrates").
///
/// Key layout. Instances are spread over the store's hash-tag shards; all keys of an instance
/// and the shard's wake index carry the shard's tag:
///
/// @code
///   <prefix>:{<shard>}:wake             ZSET  instance id -> when it next needs a worker (ms)
///   <prefix>:{<shard>}:i:<id>:meta      HASH  definition, params, status, lease, epoch, waits, result
///   <prefix>:{<shard>}:i:<id>:journal   LIST  journal entries (JSON), in completion order
///   <prefix>:{<shard>}:i:<id>:inbox     HASH  inbox id -> signal (JSON)
///   <prefix>:{<shard>}:i:<id>:inbox_idx HASH  inbox id -> "<at ms> <path>" (for the wake time)
///   <prefix>:{<shard>}:i:<id>:keys      HASH  idempotency key -> inbox id
///   <prefix>:{<shard>}:i:<id>:timers    HASH  op seq -> "<due ms> <name>"
///   <prefix>:{<shard>}:i:<id>:commits   LIST  "<epoch> <worker>" per commit (audit option)
///   <prefix>:{<shard>}:i:<id>:journal:<n> LIST the journal before the n-th operator retry
///   <prefix>:{<shard>}:idx:<status>:<def> ZSET  instance id -> created (ms): the operators' index
///   <prefix>:{<shard>}:idx:defs         SET   the definitions started in the shard
///   <prefix>:{<shard>}:idx:counts       HASH  "<status> <definition>" -> instances, kept by
///                                             older versions; its fields still name definitions
///   <prefix>:{<shard>}:idx:expiring     ZSET  final instance id -> when its retention ends (ms)
///   <prefix>:{<shard>}:idx:final        HASH  final instance id -> "<status> <definition>"
///   <prefix>:workers                    HASH  worker -> "<expires ms> <announcement JSON>"
///   <prefix>:shards                     STRING the store's shard count
///   <prefix>:identity                   HASH  id, created, confirmed: which store this is (store.hpp)
/// @endcode
///
/// Shards. The count is the store's, recorded by the first worker that opens it: an instance's
/// shard is its id's hash modulo the count, so a worker with another count would look for
/// instances where they are not. A new store on one Redis server gets one shard (an emit then
/// looks for subscribers in one set, not in one per shard: docs/benchmarks.md), on Redis
/// Cluster 16 (the slots its instances spread over); a store that Keel's earlier builds made
/// before the count was recorded keeps their 16. A store configured with a count (options)
/// records that one when new and refuses to serve a store that has another.
///
/// Lifecycle. A store is closed until open() has read its shard count (recording it when the
/// store is new); its owner opens it once (engine::run() does, again until Redis answers),
/// and a call before that is refused with store_unavailable saying so. A store whose count
/// is not the configured one is refused, for every call, for good.
///
/// The operators' index is written by the same scripts as the transitions, in the same slot,
/// so it is never behind; list() gathers the shards' pages, counts() sums their sets' sizes. An
/// instance that Redis expires after its retention leaves the index at the next due() on its
/// shard.
///
/// A commit that only appends journal entries to a running instance goes through a smaller
/// script (three keys, the entries and four arguments): Redis's cost per script call grows
/// with the keys and arguments it receives, and this is the commit of nearly every step.
///
/// Because the wake index lives in the instance's slot, each transition updates the
/// instance and its index entry in one atomic script, also on Redis Cluster; and the index
/// is sharded so no single key is hot. due() claims due instances from each shard with a
/// short claim lease inside a script, so two workers polling at once do not both pick the
/// same instance; the instance lease (with its fencing epoch from HINCRBY) decides who
/// runs it.
///
/// Times are the caller's clock in milliseconds since the epoch: workers' clocks must agree
/// to well within the lease TTL (NTP). Final instances expire after `retention`.
///
/// Errors: a Redis failure (unreachable, timeout, connection lost) throws store_unavailable.
/// A commit that failed with connection_lost may have been applied; the engine treats that
/// like a lost acknowledgement (it re-reads before writing again).
///
/// Replication. With the connection's wait_replicas option (`--redis-wait-replicas` in a
/// service), every durable transition (start, commit, append, deliver, fan-out, acquire,
/// release, rewind) is followed by WAIT on the instance's node before it returns: a worker
/// goes on, and a webhook is answered, only once that many replicas have the change, so a
/// failover cannot take back what was acknowledged. When the replicas fall short, the call
/// throws store_unavailable like a lost reply: the change is on the primary and the caller
/// treats the outcome as unknown (the engine reloads; a webhook gets 503 and its retry is
/// deduplicated). Renewals, claims and attempt notes are not waited for: losing them only
/// shortens a lease or repeats a claim.
///
/// Thread-safety: as the redis::connection it uses (any thread).
// clang-format on

#include <atomic>
#include <chrono>
#include <keel/framework/redis/connection.hpp>
#include <keel/process/store.hpp>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>

namespace keel::process {

namespace detail {
struct store_scripts;
template <class Args>
struct script_call;
}  // namespace detail

/// More shards than Redis Cluster has slots would spread nothing further.
inline constexpr std::size_t max_shards = 16384;

/// How a redis_store lays out and keeps its data.
struct redis_store_options {
    std::string prefix = "keel";  ///< what every key of the store starts with
    /// 1 to max_shards, or 0: the store's recorded count, and for a new store 1 on one Redis
    /// server, 16 on Redis Cluster (see "Shards" above).
    std::size_t shards = 0;
    /// How long an instance claimed by due() stays hidden from other pollers.
    duration claim_ttl = std::chrono::seconds(5);
    /// How long completed, failed and cancelled instances are kept; zero keeps them forever.
    duration retention = std::chrono::hours(24 * 7);
    /// Record `<epoch> <worker>` of every commit, for ownership checks in tests.
    bool audit_commits = false;
    /// How often engines on this store look for work other workers made due (a worker that
    /// died, a timer added elsewhere): the bound on how late such work is picked up.
    duration poll_interval = std::chrono::seconds(1);
    /// How many index entries one shard may examine for one page of list(): bounds the time
    /// a listing with a prefix filter holds Redis, about 1 us an entry (the page is then
    /// short and names where to go on; see docs/benchmarks.md).
    std::size_t list_budget = 5'000;
};

/// The store on Redis, one server or a cluster (see the file's description).
class redis_store final : public store {
  public:
    /// The connection must outlive the store. Registers the store's scripts on it.
    redis_store(redis::connection& connection, redis_store_options options = {});

    /// Opens the store: reads its shard count, recording it when the store is new, and
    /// returns it. Its owner calls this once, before anything else (a service does at start,
    /// again until Redis answers); once it has succeeded it returns at once. A call below on a
    /// store that is not open throws store_unavailable saying so. Throws store_unavailable when
    /// Redis cannot answer (call it again), or, for good, when the configured count is not the
    /// store's: the store then refuses every call with that reason.
    asio::awaitable<std::size_t> open();
    /// Where a store is in its life: closed until open() succeeds, then open; or refused,
    /// for good, when its shard count is not the configured one. Only open() changes it.
    enum class store_state : unsigned char { closed, open, refused };
    /// Where this store is in its life. Any thread.
    store_state state() const noexcept { return state_.load(std::memory_order_acquire); }

    /// open(), for the engine that owns the store.
    asio::awaitable<void> prepare() override;
    asio::awaitable<start_result> start(start_request req) override;
    asio::awaitable<std::optional<instance_snapshot>> load(std::string id, bool journal) override;
    asio::awaitable<expected<commit_result, store_error>> commit(commit_request req) override;
    asio::awaitable<delivery> deliver(std::string id, inbox_entry signal) override;
    asio::awaitable<void> put_answer(std::string id, std::string request, nlohmann::json answer,
                                     duration retention) override;
    asio::awaitable<std::optional<nlohmann::json>> answer(std::string id,
                                                          std::string request) override;
    asio::awaitable<permit_answer> acquire_permit(limit l, std::string holder,
                                                  time_point now) override;
    asio::awaitable<void> release_permit(std::string limit, std::string holder) override;
    asio::awaitable<enqueued> enqueue(queue q, queue_entry entry, duration recheck) override;
    asio::awaitable<admission_round> admit(queue q, time_point now, std::size_t max,
                                           duration recheck, std::string worker) override;
    using store::admit;
    asio::awaitable<void> leave_queue(std::string queue,
                                      std::vector<std::string> instances) override;
    using store::leave_queue;
    asio::awaitable<queue_state> describe_queue(std::string queue, std::size_t top) override;
    asio::awaitable<fan_out_result> fan_out(fan_out_request req) override;
    using store::acquire;
    using store::due;
    asio::awaitable<expected<lease_grant, store_error>> acquire(std::string id, std::string worker,
                                                                time_point now, duration ttl,
                                                                version_refusals refused) override;
    asio::awaitable<expected<taken, store_error>> take(
        std::string id, std::string worker, time_point now, duration ttl, version_refusals refused,
        std::optional<std::uint64_t> known_length) override;
    asio::awaitable<bool> renew(std::string id, lease_token lease, time_point now,
                                duration ttl) override;
    asio::awaitable<void> release(std::string id, lease_token lease) override;
    asio::awaitable<void> leave(std::string id, lease_token lease, departure why) override;
    asio::awaitable<bool> note_attempt(std::string id, lease_token lease,
                                       step_attempt failed) override;
    asio::awaitable<std::vector<std::string>> due(time_point now, std::size_t limit,
                                                  version_refusals refused) override;
    asio::awaitable<std::optional<time_point>> next_due() override;
    asio::awaitable<std::vector<worker_record>> announce(worker_record self) override;
    asio::awaitable<void> withdraw(std::string worker) override;
    asio::awaitable<std::vector<worker_record>> workers(time_point now) override;
    std::optional<duration> poll_interval() const override { return options_.poll_interval; }
    /// Documents on this store's own connection, when it is a single Redis server (on a
    /// cluster a document and an instance are in different slots).
    bool writes_documents(const document_address& where) const override;
    asio::awaitable<expected<void, store_error>> rewind(rewind_request req) override;
    asio::awaitable<expected<inbox_entry, store_error>> remove_signal(
        remove_signal_request req) override;
    asio::awaitable<list_page> list(list_query query) override;
    asio::awaitable<instance_counts> counts() override;
    /// As worker_registry::identity; the record is the key `<prefix>:identity` (a hash: id,
    /// created, confirmed, confirmed_at).
    asio::awaitable<std::optional<store_identity>> identity(identity_action action,
                                                            bool create = true) override;
    asio::awaitable<std::optional<journal_page>> read_journal(std::string id, std::size_t retry,
                                                              std::uint64_t offset,
                                                              std::size_t limit) override;

    /// `<epoch> <worker>` of every commit of an instance (audit_commits only), oldest first.
    asio::awaitable<std::vector<std::string>> commit_log(std::string id);

    /// The store's shard count. This and the shard and key functions below (but workers_key)
    /// need the count: with `shards` 0 they throw (store_unavailable; std::out_of_range for a
    /// shard number) until the store is open. A configured count is known before.
    std::size_t shards() const;
    /// The shard of an instance (keel::process::shard_of with the store's count).
    std::size_t shard_of(std::string_view id) const;
    /// The key of an instance with a suffix ("meta", "journal", ...):
    /// `<prefix>:{<shard>}:i:<id>:<suffix>`.
    std::string key(std::string_view id, std::string_view suffix) const;
    /// `<prefix>:{<shard>}:wake`: the shard's wake index.
    std::string wake_key(std::size_t shard) const;
    /// `<prefix>:{<shard>}:sub:<key>`: the shard's instances subscribed to a signal key, the
    /// fields of a hash (or, written while a worker below store level 4 was alive, a set).
    std::string subscription_key(std::size_t shard, std::string_view key) const;
    /// `<prefix>:workers`: the workers' announcements (needs no shard count).
    std::string workers_key() const;
    /// `<prefix>:{<shard>}:i:`: what the keys of the shard's instances start with.
    std::string instance_prefix(std::size_t shard) const;

  private:
    // "<prefix>:{<shard>}:<suffix>": a key in the shard's slot.
    std::string shard_key(std::size_t shard, std::string_view suffix) const;
    // The acquire script; `load`: "" for the lease alone, else the journal length the caller
    // holds ("-": none) for the instance too. The reply, or the script's refusal.
    asio::awaitable<expected<redis::reply, store_error>> run_acquire(
        std::string id, const std::string& worker, time_point now, duration ttl,
        const version_refusals& refused, std::string load);
    asio::awaitable<bool> has_subscribers(std::size_t shard,
                                          const std::vector<std::string>& subscriptions);
    // The fan-out script on these shards' wake keys, with the memo key last when
    // `memo_window` (its lifetime, ms) is not empty.
    asio::awaitable<fan_out_result> run_fan_out(std::vector<std::string> keys,
                                                std::string memo_window, const fan_out_request& req,
                                                const std::string& signal_json);
    // A commit that only appends journal entries, by the smaller script; nullopt when the
    // instance's state needs the general commit script.
    asio::awaitable<std::optional<expected<commit_result, store_error>>> append(
        const commit_request& req);
    // One shard's part of a listing (see list_lua).
    asio::awaitable<void> list_shard(std::size_t shard, const list_query& query,
                                     const std::vector<std::string>& bounds, redis::reply& out);
    // Sets `changed` of a listed page (see changed_lua), one script per shard it touches.
    asio::awaitable<void> fill_changed(std::vector<instance_summary>& page);
    asio::awaitable<void> changed_times(std::span<instance_summary* const> of);
    // `wait`: a durable transition, followed by the connection's replica wait
    // (connection_options::wait_replicas); a wait that falls short throws like an
    // unreachable Redis, so the caller treats the outcome as unknown.
    enum class replication { none, wait };
    asio::awaitable<redis::reply> run(const redis::script& s, std::vector<std::string> keys,
                                      std::vector<std::string> args,
                                      replication after = replication::none);
    // A script with its arguments as declared (script_calls.hpp).
    template <class Args>
    asio::awaitable<redis::reply> call(const detail::script_call<Args>& s,
                                       std::vector<std::string> keys, Args args,
                                       replication after = replication::none);

    // Every call reaches Redis through ready(), which refuses unless the store is open.
    std::string_view not_open_reason() const;         // empty when open
    std::string_view not_open_reason(store_state state) const;
    std::optional<std::size_t> opened_count() const;  // throws when refused; nullopt: closed
    // store_refused when `state` is refused, else store_unavailable; `state` is not open.
    [[noreturn]] void throw_not_open(store_state state) const;
    redis::connection& ready() const;
    void use_shards(std::size_t count);  // sets shards_ and shard_prefixes_

    redis::connection& redis_;
    redis_store_options options_;
    const detail::store_scripts& scripts_;  // for one server, or for a cluster
    // Set once: by the constructor with a configured count, else by open() (under
    // open_mutex_, before state_ becomes open).
    std::size_t shards_ = 0;
    std::uint64_t permit_grants_ = 0;          // makes each grant's id unique (acquire_permit)
    std::vector<std::string> shard_prefixes_;  // "<prefix>:{<shard>}:" by shard
    std::atomic<store_state> state_{store_state::closed};
    std::mutex open_mutex_;
    std::string refusal_;  // why a refused store refuses (set before state_ becomes refused)
};

}  // namespace keel::process
