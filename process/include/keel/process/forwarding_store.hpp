#pragma once

/// @file
/// keel::process::forwarding_store: a store that passes every call on to another. Derive from
/// it to watch or disturb a few calls and override only those, for example to count loads or
/// to inject faults in a test:
///
/// @code
///   struct counting_store final : keel::process::forwarding_store {
///       using forwarding_store::forwarding_store;
///       int loads = 0;
///       asio::awaitable<std::optional<instance_snapshot>> load(std::string id,
///                                                              bool journal) override {
///           ++loads;
///           return forwarding_store::load(std::move(id), journal);
///       }
///   };
/// @endcode
///
/// Every call first awaits before_call() (but prepare(), and poll_interval() and
/// writes_documents(), which are not coroutines), which does nothing unless overridden (a
/// test can hold calls there, or throw to play a worker that died). The inner store must
/// outlive this.

#include <keel/process/store.hpp>

namespace keel::process {

/// A store that passes every call on to `inner`, after before_call() (see the file's
/// description).
class forwarding_store : public store {
  public:
    /// Forwards to `inner`, which must outlive this store.
    explicit forwarding_store(store& inner) : inner_(inner) {}

    // --- instance_store ---

    // Without before_call(): held or failing calls play a store that is open.
    asio::awaitable<void> prepare() override { return inner_.prepare(); }
    asio::awaitable<start_result> start(start_request req) override {
        co_await before_call();
        co_return co_await inner_.start(std::move(req));
    }
    asio::awaitable<std::optional<instance_snapshot>> load(std::string id, bool journal) override {
        co_await before_call();
        co_return co_await inner_.load(std::move(id), journal);
    }
    asio::awaitable<expected<commit_result, store_error>> commit(commit_request req) override {
        co_await before_call();
        co_return co_await inner_.commit(std::move(req));
    }
    asio::awaitable<delivery> deliver(std::string id, inbox_entry signal) override {
        co_await before_call();
        co_return co_await inner_.deliver(std::move(id), std::move(signal));
    }
    asio::awaitable<void> put_answer(std::string id, std::string request, nlohmann::json answer,
                                     duration retention) override {
        co_await before_call();
        co_await inner_.put_answer(std::move(id), std::move(request), std::move(answer), retention);
    }
    asio::awaitable<std::optional<nlohmann::json>> answer(std::string id,
                                                          std::string request) override {
        co_await before_call();
        co_return co_await inner_.answer(std::move(id), std::move(request));
    }
    asio::awaitable<permit_answer> acquire_permit(limit l, std::string holder,
                                                  time_point now) override {
        co_await before_call();
        co_return co_await inner_.acquire_permit(std::move(l), std::move(holder), now);
    }
    asio::awaitable<void> release_permit(std::string limit, std::string holder) override {
        co_await before_call();
        co_await inner_.release_permit(std::move(limit), std::move(holder));
    }
    asio::awaitable<enqueued> enqueue(queue q, queue_entry entry, duration recheck) override {
        co_await before_call();
        co_return co_await inner_.enqueue(std::move(q), std::move(entry), recheck);
    }
    asio::awaitable<admission_round> admit(queue q, time_point now, std::size_t max,
                                           duration recheck, std::string worker) override {
        co_await before_call();
        co_return co_await inner_.admit(std::move(q), now, max, recheck, std::move(worker));
    }
    using store::admit;
    asio::awaitable<void> leave_queue(std::string queue,
                                      std::vector<std::string> instances) override {
        co_await before_call();
        co_await inner_.leave_queue(std::move(queue), std::move(instances));
    }
    using store::leave_queue;
    asio::awaitable<queue_state> describe_queue(std::string queue, std::size_t top) override {
        co_await before_call();
        co_return co_await inner_.describe_queue(std::move(queue), top);
    }
    asio::awaitable<fan_out_result> fan_out(fan_out_request req) override {
        co_await before_call();
        co_return co_await inner_.fan_out(std::move(req));
    }
    using store::acquire;
    using store::due;
    asio::awaitable<expected<lease_grant, store_error>> acquire(std::string id, std::string worker,
                                                                time_point now, duration ttl,
                                                                version_refusals refused) override {
        co_await before_call();
        co_return co_await inner_.acquire(std::move(id), std::move(worker), now, ttl,
                                          std::move(refused));
    }
    asio::awaitable<expected<taken, store_error>> take(
        std::string id, std::string worker, time_point now, duration ttl, version_refusals refused,
        std::optional<std::uint64_t> known_length) override {
        co_await before_call();
        co_return co_await inner_.take(std::move(id), std::move(worker), now, ttl,
                                       std::move(refused), known_length);
    }
    asio::awaitable<bool> renew(std::string id, lease_token lease, time_point now,
                                duration ttl) override {
        co_await before_call();
        co_return co_await inner_.renew(std::move(id), std::move(lease), now, ttl);
    }
    asio::awaitable<void> release(std::string id, lease_token lease) override {
        co_await before_call();
        co_await inner_.release(std::move(id), std::move(lease));
    }
    asio::awaitable<void> leave(std::string id, lease_token lease, departure why) override {
        co_await before_call();
        co_await inner_.leave(std::move(id), std::move(lease), std::move(why));
    }
    asio::awaitable<bool> note_attempt(std::string id, lease_token lease,
                                       step_attempt failed) override {
        co_await before_call();
        co_return co_await inner_.note_attempt(std::move(id), std::move(lease), std::move(failed));
    }
    asio::awaitable<std::vector<std::string>> due(time_point now, std::size_t limit,
                                                  version_refusals refused) override {
        co_await before_call();
        co_return co_await inner_.due(now, limit, std::move(refused));
    }
    asio::awaitable<std::optional<time_point>> next_due() override {
        co_await before_call();
        co_return co_await inner_.next_due();
    }
    std::optional<duration> poll_interval() const override { return inner_.poll_interval(); }
    bool writes_documents(const document_address& where) const override {
        return inner_.writes_documents(where);
    }
    // --- worker_registry ---

    asio::awaitable<std::vector<worker_record>> announce(worker_record self) override {
        co_await before_call();
        co_return co_await inner_.announce(std::move(self));
    }
    asio::awaitable<void> withdraw(std::string worker) override {
        co_await before_call();
        co_await inner_.withdraw(std::move(worker));
    }
    asio::awaitable<std::vector<worker_record>> workers(time_point now) override {
        co_await before_call();
        co_return co_await inner_.workers(now);
    }
    asio::awaitable<std::optional<store_identity>> identity(identity_action action,
                                                            bool create) override {
        co_await before_call();
        co_return co_await inner_.identity(action, create);
    }

    // --- operator_index ---

    asio::awaitable<expected<void, store_error>> rewind(rewind_request req) override {
        co_await before_call();
        co_return co_await inner_.rewind(std::move(req));
    }
    asio::awaitable<expected<inbox_entry, store_error>> remove_signal(
        remove_signal_request req) override {
        co_await before_call();
        co_return co_await inner_.remove_signal(std::move(req));
    }
    asio::awaitable<list_page> list(list_query query) override {
        co_await before_call();
        co_return co_await inner_.list(std::move(query));
    }
    asio::awaitable<instance_counts> counts() override {
        co_await before_call();
        co_return co_await inner_.counts();
    }
    asio::awaitable<std::optional<journal_page>> read_journal(std::string id, std::size_t retry,
                                                              std::uint64_t offset,
                                                              std::size_t limit) override {
        co_await before_call();
        co_return co_await inner_.read_journal(std::move(id), retry, offset, limit);
    }

  protected:
    /// The store calls are passed on to.
    store& inner() { return inner_; }
    /// Awaited at the start of every coroutine call before it is passed on; does nothing.
    /// Override it to hold calls, or throw to fail them (the call then throws, as a lost
    /// worker's would).
    virtual asio::awaitable<void> before_call() { co_return; }

  private:
    store& inner_;
};

}  // namespace keel::process
