#pragma once

/// @file
/// keel::documents in this process's memory, for unit tests: a service's repositories run
/// without Redis (keel::process::testing registers one as the graph's keel::documents).
/// Leases behave as in Redis — one holder at a time, fencing tokens that only grow, a waiter
/// takes the lease as soon as its holder releases it, or fails with lock_timeout once `wait`
/// has passed on the given clock (a manual clock: virtual time) — except that they never
/// expire by themselves, since a holder cannot be paused away from its own memory. expire()
/// takes one away, to test what a holder does when its lease is lost.
///
/// @code
///   keel::manual_clock clock;
///   keel::memory_documents docs(clock);
///   keel::repository<order> orders(docs);
/// @endcode
///
/// Not thread-safe: use it from one thread (an io_context run by one thread). Leases and
/// waiters may outlive it: their operations then fail as lock_lost / unavailable.

#include <keel/framework/clock.hpp>
#include <keel/framework/documents.hpp>
#include <memory>
#include <string_view>

namespace keel {

/// keel::documents in memory, for unit tests; see the file's description.
class memory_documents final : public documents {
  public:
    /// Waits on `clock`; lock() waits `lock_wait` when its caller does not say.
    explicit memory_documents(keel::clock& clock,
                              std::chrono::milliseconds lock_wait = std::chrono::seconds(5));
    ~memory_documents() override;
    memory_documents(const memory_documents&) = delete;
    memory_documents& operator=(const memory_documents&) = delete;

    asio::awaitable<expected<std::optional<std::string>, model_error>> get(std::string model,
                                                                           std::string id) override;
    asio::awaitable<expected<void, model_error>> put(std::string model, std::string id,
                                                     std::string json) override;
    asio::awaitable<expected<bool, model_error>> remove(std::string model, std::string id) override;
    asio::awaitable<expected<acquired, model_error>> lock(std::string model, std::string id,
                                                          std::chrono::milliseconds wait) override;
    asio::awaitable<expected<put_if_result, model_error>> put_if(
        std::string model, std::string id, std::optional<std::string> expected,
        std::string json) override;
    std::chrono::milliseconds lock_wait() const noexcept override { return lock_wait_; }

    /// Takes the document's lease from its holder, as when it expires: the holder's lost()
    /// becomes true and its save() fails with lock_lost; the next lock() gets it at once.
    /// False when nobody holds it.
    bool expire(std::string_view model, std::string_view id);
    /// Whether someone holds the document's lease now.
    bool locked(std::string_view model, std::string_view id) const;

    struct state;  // shared with leases and waiters

  private:
    keel::clock& clock_;
    std::chrono::milliseconds lock_wait_;
    std::shared_ptr<state> state_;
};

}  // namespace keel
