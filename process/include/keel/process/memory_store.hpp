#pragma once

#include <deque>

/// @file
/// keel::process::memory_store: the store in memory, with the same atomicity as the Redis
/// store (each call validates everything, then writes; a rejected call changes nothing).
/// For tests, the simulation and single-process use without durability. It also keeps a log
/// of every commit and every consumed signal, so tests can check exactly-once properties.
/// Thread-safe (one mutex).

#include <keel/process/detail/queue_book.hpp>
#include <keel/process/store.hpp>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace keel::process {

/// The store in memory (see the file's description). Answers to requests are kept for the
/// store's life: it has no clock to expire them by, so put_answer's retention is not applied.
class memory_store final : public store {
  public:
    /// An empty store.
    memory_store();
    ~memory_store() override;

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
    asio::awaitable<fan_out_result> fan_out(fan_out_request req) override;
    asio::awaitable<enqueued> enqueue(queue q, queue_entry entry, duration recheck) override;
    asio::awaitable<admission_round> admit(queue q, time_point now, std::size_t max,
                                           duration recheck, std::string worker) override;
    using store::admit;
    asio::awaitable<void> leave_queue(std::string queue,
                                      std::vector<std::string> instances) override;
    using store::leave_queue;
    asio::awaitable<queue_state> describe_queue(std::string queue, std::size_t top) override;
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
    asio::awaitable<expected<void, store_error>> rewind(rewind_request req) override;
    asio::awaitable<expected<inbox_entry, store_error>> remove_signal(
        remove_signal_request req) override;
    asio::awaitable<list_page> list(list_query query) override;
    asio::awaitable<instance_counts> counts() override;
    asio::awaitable<std::optional<journal_page>> read_journal(std::string id, std::size_t retry,
                                                              std::uint64_t offset,
                                                              std::size_t limit) override;

    ///@{
    /// The synchronous core of each call (the coroutines above complete at once with these).
    start_result start_now(const start_request& req);
    std::optional<instance_snapshot> load_now(const std::string& id, bool journal) const;
    expected<commit_result, store_error> commit_now(const commit_request& req);
    delivery deliver_now(const std::string& id, inbox_entry signal);
    fan_out_result fan_out_now(const fan_out_request& req);
    expected<lease_grant, store_error> acquire_now(const std::string& id, const std::string& worker,
                                                   time_point now, duration ttl,
                                                   const version_refusals& refused = {});
    expected<taken, store_error> take_now(const std::string& id, const std::string& worker,
                                          time_point now, duration ttl,
                                          const version_refusals& refused,
                                          std::optional<std::uint64_t> known_length);
    bool renew_now(const std::string& id, const lease_token& lease, time_point now, duration ttl);
    void release_now(const std::string& id, const lease_token& lease,
                     std::optional<departure> why = std::nullopt);
    bool note_attempt_now(const std::string& id, const lease_token& lease, step_attempt failed);
    std::vector<std::string> due_now(time_point now, std::size_t limit,
                                     const version_refusals& refused = {}) const;
    std::vector<worker_record> announce_now(worker_record self);
    void withdraw_now(const std::string& worker);
    std::vector<worker_record> workers_now(time_point now) const;
    std::optional<time_point> next_due_now() const;
    expected<void, store_error> rewind_now(const rewind_request& req);
    expected<inbox_entry, store_error> remove_signal_now(const remove_signal_request& req);
    list_page list_now(const list_query& query) const;
    instance_counts counts_now() const;
    std::optional<journal_page> read_journal_now(const std::string& id, std::size_t retry,
                                                 std::uint64_t offset, std::size_t limit) const;
    ///@}

    // History, for checks.

    /// A write that was accepted: the token it carried, and the epoch and holder the store
    /// had at that moment (equal unless fencing is broken).
    struct commit_record {
        std::string instance;     ///< the instance written
        lease_token lease;        ///< the lease the commit carried
        std::uint64_t epoch = 0;  ///< the store's epoch for the instance at the commit
        std::string holder;       ///< the store's lease holder at the commit
        std::size_t entries = 0;  ///< the journal entries it appended
    };
    /// A signal a commit consumed.
    struct consume_record {
        std::string instance;        ///< the consuming instance
        std::uint64_t inbox_id = 0;  ///< the signal's inbox id
        std::string key;             ///< its idempotency key
    };
    /// Every accepted commit, in order.
    std::vector<commit_record> commits() const;
    /// Every consumed signal, in order.
    std::vector<consume_record> consumed() const;
    /// How many instances the store holds.
    std::size_t size() const;

    /// An instance's state as save() took it (opaque).
    class saved_instance;
    /// A failover, simulated (with restore()): the instance's state as it is now, as a Redis
    /// replica has it; null when there is no such instance. For the simulation and tests.
    std::shared_ptr<const saved_instance> save(const std::string& id) const;
    /// Puts a saved instance back as it was, as when a Redis primary fails before its
    /// replicas received the writes made since (and a replica takes over). The history
    /// (commits(), consumed()) forgets the writes lost.
    void restore(const saved_instance& saved);

  private:
    struct record;
    void reindex(record& r);
    instance_snapshot snapshot_of(const record& r, bool journal) const;
    expected<lease_grant, store_error> acquire_locked(const std::string& id,
                                                      const std::string& worker, time_point now,
                                                      duration ttl,
                                                      const version_refusals& refused);
    expected<taken, store_error> take_locked(const std::string& id, const std::string& worker,
                                             time_point now, duration ttl,
                                             const version_refusals& refused,
                                             std::optional<std::uint64_t> known_length);
    void relist(record& r);  // moves the instance's count to its current index status
    void resumed_and_running(record& r, time_point now);
    static std::int64_t created_ms(const record& r);
    delivery deliver_locked(record& r, inbox_entry signal);
    void unsubscribe(record& r);

    mutable std::mutex mutex_;
    std::unordered_map<std::string, std::unique_ptr<record>> records_;
    std::set<std::pair<time_point, std::string>> wake_index_;
    std::set<std::pair<std::int64_t, std::string>> by_created_;  // (created ms, id)
    instance_counts counts_;
    std::vector<commit_record> commits_;
    std::vector<consume_record> consumed_;
    std::unordered_map<std::string, std::set<std::string>> subscribers_;  // key -> instances
    struct fan_out_memo {
        std::size_t reached = 0;
        time_point expires{};
    };
    std::unordered_map<std::string, fan_out_memo> fan_outs_;  // idempotency key -> first reach
    std::map<std::string, worker_record, std::less<>> workers_;
    // (instance, request) -> answer: kept for the store's life (no clock here to expire them)
    std::map<std::pair<std::string, std::string>, nlohmann::json> answers_;
    struct limit_state {
        std::deque<time_point> grants;              // in the window, oldest first
        std::map<std::string, time_point> holders;  // holder -> when its hold ends
    };
    std::map<std::string, limit_state, std::less<>> limits_;
    std::map<std::string, detail::queue_book, std::less<>> queues_;
};

}  // namespace keel::process
