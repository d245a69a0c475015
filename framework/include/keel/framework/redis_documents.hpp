#pragma once

/// @file
/// keel::documents in Redis: what a service's repositories use (the application root
/// registers one on the service's connection). A lease is a key with a TTL, renewed in the
/// background every lock_ttl / 3 while held, so a holder that stops (crash, pause, partition)
/// loses it after at most lock_ttl; saves check the lease's token in the same script as the
/// write. Works on one node and on Redis Cluster: every script touches one slot. With the
/// connection's wait_replicas option, put, remove, save and the lock's new token return only
/// once that many replicas have them (connection::replicate); when they fall short the call
/// fails as unavailable (the write is on the primary only; a lock just taken is given back).
///
/// Keys (one hash tag per entity):
/// @code
///   <prefix>:{<model>:<id>}:doc    the JSON document
///   <prefix>:{<model>:<id>}:lock   the current holder's token, with a TTL
///   <prefix>:{<model>:<id>}:fence  the token counter (INCR): tokens only grow
/// @endcode
///
/// A waiter polls a held lock (2 ms, doubling up to 100 ms), and tries the moment a holder
/// in this process gives it up; for a lock this process holds it first waits up to 10 ms for
/// that before asking Redis. A conditional write (put_if: repository<T>::update) is one script
/// that writes only while nobody holds the lock and the document is as its writer read it;
/// an update starts from the document this process last wrote or saw refused (recent_bytes),
/// so that, uncontended, changing an entity this service wrote is that one script, no read.
///
/// Thread-safety: usable from any thread (as its redis::connection); a lease belongs to one
/// coroutine at a time.

#include <cstddef>
#include <keel/framework/documents.hpp>
#include <keel/framework/redis/connection.hpp>
#include <memory>

namespace keel {

class recent_documents;

/// How a service's documents live in Redis: key prefix, lease length, lock wait, memory.
struct repository_options {
    /// The first part of every key.
    std::string prefix = "keel";
    /// Lease length. The holder renews it every lock_ttl / 3; a holder that stops (crash,
    /// pause) loses it after at most lock_ttl.
    std::chrono::milliseconds lock_ttl{10'000};
    /// How long lock() waits for a held lock by default.
    std::chrono::milliseconds lock_wait{5'000};
    /// The budget (keys, documents and bookkeeping) for the documents this process last wrote,
    /// from which an update starts without reading (read_for_update); least recently used out
    /// first. 0: every update reads first.
    std::size_t recent_bytes = 4 << 20;
};

/// keel::documents in Redis, with leases; see the file's description.
class redis_documents final : public documents {
  public:
    /// The connection must outlive this and every lease it gives.
    explicit redis_documents(redis::connection& redis, repository_options options = {});
    ~redis_documents() override;

    asio::awaitable<expected<std::optional<std::string>, model_error>> get(std::string model,
                                                                           std::string id) override;
    asio::awaitable<expected<void, model_error>> put(std::string model, std::string id,
                                                     std::string json) override;
    asio::awaitable<expected<bool, model_error>> remove(std::string model, std::string id) override;
    asio::awaitable<expected<acquired, model_error>> lock(std::string model, std::string id,
                                                          std::chrono::milliseconds wait) override;
    /// The document as this process last wrote it, or read it for an update, or found it
    /// when a put_if was refused; get() when it has none.
    asio::awaitable<expected<std::optional<std::string>, model_error>> read_for_update(
        std::string model, std::string id) override;
    /// One script: checks the lease and the document, then writes; refused, it answers with
    /// the stored document, which read_for_update() gives next.
    asio::awaitable<expected<put_if_result, model_error>> put_if(
        std::string model, std::string id, std::optional<std::string> expected,
        std::string json) override;
    std::chrono::milliseconds lock_wait() const noexcept override { return options_.lock_wait; }
    /// On this connection: its "doc" and "lock" keys.
    std::optional<document_address> address(std::string_view model,
                                            std::string_view id) const override;
    /// Remembered as written (read_for_update answers it), or forgotten when unknown.
    void written_elsewhere(std::string_view model, std::string_view id,
                           std::optional<std::string> text) override;

    /// The options it was made with.
    const repository_options& options() const noexcept { return options_; }
    /// The key `<prefix>:{<model>:<id>}:<suffix>`.
    std::string key(std::string_view model, std::string_view id, std::string_view suffix) const;

    class local_locks;  // machinery: this process's holders and waiters

  private:
    redis::connection& redis_;
    repository_options options_;
    std::shared_ptr<local_locks> locks_;
    std::unique_ptr<recent_documents> recent_;
};

}  // namespace keel
