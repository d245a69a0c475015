#pragma once

/// @file
/// Where repository<T> keeps entities: JSON documents by model name and id, and exclusive
/// leases on them with fencing tokens. A service registers one keel::documents in its DI graph
/// (the application root registers redis_documents, on the service's Redis) and its
/// repositories take it by reference, so a unit test swaps Redis for memory_documents
/// (keel::process::testing does) without touching them:
///
/// @code
///   class order_book {
///     public:
///       using inject = keel::di::inject<keel::documents&>;
///       explicit order_book(keel::documents& docs) : orders_(docs) {}
///     private:
///       keel::repository<order> orders_;
///   };
/// @endcode
///
/// Implementations: redis_documents (redis_documents.hpp) and memory_documents
/// (memory_documents.hpp). Most code uses repository<T> and never calls this interface.

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <keel/framework/expected.hpp>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace keel {

namespace asio = boost::asio;

namespace redis {
class connection;
}

/// Where a document lives, for a store that can write it in an atomic step of its own (a
/// process step that changes an entity: keel::process::context::update): the Redis
/// connection it is on, its key and the key of its lock.
struct document_address {
    /// The connection the document is on.
    const redis::connection* redis = nullptr;
    /// The document's key.
    std::string key;
    /// The key of the document's lock.
    std::string lock;
};

/// A document written in an atomic step of another store (a process step's commit, an emit):
/// `key` is set to `text` only if it holds `expected` (nullopt: there is no document) and
/// `lock`, the key of the entity's lock, does not exist; otherwise that step writes nothing
/// and reports the document changed. With `text` equal to `expected` it is a check only: the
/// step happens only if the document is as read and unlocked, and nothing is written. Made
/// from a document_address and repository<T>::prepare_update.
struct document_write {
    /// The document's key.
    std::string key;
    /// The key of the entity's lock, which must not exist.
    std::string lock;
    /// What the document must hold; nullopt: there must be none.
    std::optional<std::string> expected;
    /// What it is set to.
    std::string text;
};

/// Why a repository call failed.
struct model_error {
    /// The kinds of failure.
    enum class code {
        unavailable,       ///< the store did not answer (message says why)
        lock_timeout,      ///< the lock was held by someone else for the whole wait
        lock_lost,         ///< the lease expired or was taken over: the write was rejected
        invalid_document,  ///< the stored document does not decode as T
    };
    /// What kind of failure.
    code kind;
    /// Says why, naming the entity.
    std::string message;
    /// The message.
    std::string what() const { return message; }

    ///@{
    /// The lease errors every keel::documents gives, worded once; entity: "order o-1".
    static model_error lock_lost_on(std::string_view entity) {
        return {code::lock_lost, std::string(entity) +
                                     ": the lock was lost (expired or taken over by a newer "
                                     "holder); the write was rejected"};
    }
    static model_error lock_timeout_on(std::string_view entity, std::chrono::milliseconds wait) {
        return {code::lock_timeout, std::string(entity) +
                                        " is locked by another holder; gave up after " +
                                        std::to_string(wait.count()) + " ms"};
    }
    ///@}
};

/// An exclusive lease on one document, held until release() or destruction.
class document_lease {
  public:
    virtual ~document_lease() = default;

    /// The fencing token: grows with every acquisition of the document's lock.
    virtual std::uint64_t token() const noexcept = 0;
    /// True once the lease is known to be gone (expired, taken over): save() fails.
    virtual bool lost() const noexcept = 0;
    /// Writes the document if this lease is still the current one; model_error::lock_lost if
    /// not (the write is rejected, never applied over a newer holder's).
    virtual asio::awaitable<expected<void, model_error>> save(std::string json) = 0;
    /// save(), then release(): an implementation may do both in one step (redis_documents:
    /// one script, one round trip). The lease is given up whatever the outcome.
    virtual asio::awaitable<expected<void, model_error>> save_and_release(std::string json) {
        auto saved = co_await save(std::move(json));
        release();
        co_return saved;
    }
    /// Gives the lease up now. Idempotent; never blocks.
    virtual void release() noexcept = 0;
};

/// The store of a service's entities: JSON documents by model name and id, with leases; see the
/// file's description.
class documents {
  public:
    /// A lease and the document as read under it (nullopt: no such document).
    struct acquired {
        /// Held until released or destroyed.
        std::unique_ptr<document_lease> lease;
        /// The document as read under the lease.
        std::optional<std::string> document;
    };

    /// How a put_if() ended.
    enum class put_if_result {
        written,  ///< the document was as expected, nobody held its lease: written
        changed,  ///< the document is not as expected: nothing written
        locked,   ///< someone holds the document's lease: nothing written
    };

    virtual ~documents() = default;

    /// The document; nullopt when there is none.
    virtual asio::awaitable<expected<std::optional<std::string>, model_error>> get(
        std::string model, std::string id) = 0;
    /// Writes regardless of leases: creation and administration.
    virtual asio::awaitable<expected<void, model_error>> put(std::string model, std::string id,
                                                             std::string json) = 0;
    /// True when there was something to remove. Ignores leases.
    virtual asio::awaitable<expected<bool, model_error>> remove(std::string model,
                                                                std::string id) = 0;
    /// Waits up to `wait` for the document's lease (model_error::lock_timeout after), then
    /// reads the document under it.
    virtual asio::awaitable<expected<acquired, model_error>> lock(
        std::string model, std::string id, std::chrono::milliseconds wait) = 0;
    /// The document as a read-modify-write starts from: it may be an earlier version than the
    /// stored one, for put_if() checks it (redis_documents answers from the documents this
    /// process last wrote, without a round trip; repository_options::recent_bytes). This
    /// default reads with get().
    virtual asio::awaitable<expected<std::optional<std::string>, model_error>> read_for_update(
        std::string model, std::string id);
    /// Writes `json` only if the stored document is still `expected` (nullopt: there is none)
    /// and nobody holds its lease, checked and written in one step: the write of an optimistic
    /// read-modify-write (repository<T>::update). Leaves the fencing token as it is. This
    /// default takes the lease without waiting (an implementation does better in one step:
    /// redis_documents and memory_documents do).
    virtual asio::awaitable<expected<put_if_result, model_error>> put_if(
        std::string model, std::string id, std::optional<std::string> expected, std::string json);
    /// How long lock() waits when its caller does not say (repository<T>::lock(ref)).
    virtual std::chrono::milliseconds lock_wait() const noexcept = 0;

    /// Where the document lives, when another store can write it (document_address); nullopt
    /// (the default) when only this object writes its documents.
    virtual std::optional<document_address> address(std::string_view model,
                                                    std::string_view id) const {
        (void)model, (void)id;
        return std::nullopt;
    }
    /// Told after another store wrote the document at address(): `text` is what it holds now,
    /// nullopt when that is unknown (a write that may or may not have happened), so that
    /// read_for_update() does not answer from an older version. The default ignores it.
    virtual void written_elsewhere(std::string_view model, std::string_view id,
                                   std::optional<std::string> text) {
        (void)model, (void)id, (void)text;
    }
};

}  // namespace keel
