#pragma once

// Entities in Redis: repository<T> stores JSON documents of model T by ref<T>, and
// lock(ref) gives a locked<T>: an exclusive lease on the entity with a fencing token,
// renewed in the background while held and released when the locked<T> goes out of scope.
// Saving through a locked<T> is one script that checks the token, so a holder whose lease
// expired (a pause, a partition) can no longer write: a stale write is rejected, not lost
// silently over someone else's.
//
//   keel::repository<order> orders(redis);
//   auto o = co_await orders.lock(keel::ref<order>("o-1"));     // waits up to lock_wait
//   if (!o) co_return problem(o.error().what());
//   (*o)->status = "paid";                                      // the entity, read under the lock
//   co_await o->save();                                         // fails if the lease was lost
//
// Keys (one hash tag per entity, so each script touches one Cluster slot):
//   <prefix>:{<model>:<id>}:doc    the JSON document
//   <prefix>:{<model>:<id>}:lock   the current holder's token, with a TTL
//   <prefix>:{<model>:<id>}:fence  the token counter (INCR): tokens only grow
//
// T needs nlohmann to_json/from_json. put() and remove() ignore locks: use them to create
// entities or for administration; read-modify-write goes through lock() and save().
//
// Thread-safety: a repository may be used from any thread (as its redis::connection). A
// locked<T> belongs to one coroutine at a time.

#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <keel/framework/expected.hpp>
#include <keel/framework/model.hpp>
#include <keel/framework/redis/connection.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace keel {

namespace asio = boost::asio;

// Why a repository call failed.
struct model_error {
    enum class code {
        unavailable,       // Redis did not answer (message says why)
        lock_timeout,      // the lock was held by someone else for the whole wait
        lock_lost,         // the lease expired or was taken over: the write was rejected
        invalid_document,  // the stored document does not decode as T
    };
    code kind;
    std::string message;
    std::string what() const { return message; }
};

struct repository_options {
    std::string prefix = "keel";
    // Lease length. The holder renews it every lock_ttl / 3; a holder that stops (crash,
    // pause) loses it after at most lock_ttl.
    std::chrono::milliseconds lock_ttl{10'000};
    // How long lock() waits for a held lock by default.
    std::chrono::milliseconds lock_wait{5'000};
};

namespace detail {

// A held lease: shared by a locked<T> and the coroutine renewing it.
struct lease_state;

// The untyped core of repository<T>: documents as JSON text, leases with fencing tokens.
class document_store {
  public:
    document_store(redis::connection& redis, repository_options options, std::string_view model);

    asio::awaitable<expected<std::optional<std::string>, model_error>> get(std::string id);
    asio::awaitable<expected<void, model_error>> put(std::string id, std::string json);
    asio::awaitable<expected<bool, model_error>> remove(std::string id);

    // Takes the lease and reads the document in one script.
    struct acquired {
        std::shared_ptr<lease_state> lease;
        std::optional<std::string> document;
    };
    asio::awaitable<expected<acquired, model_error>> lock(std::string id,
                                                          std::chrono::milliseconds wait);
    asio::awaitable<expected<void, model_error>> save(const std::shared_ptr<lease_state>& lease,
                                                      std::string json);
    // Stops renewing and deletes the lock if it still holds this token. Never blocks.
    static void release(const std::shared_ptr<lease_state>& lease);
    static std::uint64_t token(const lease_state& lease);
    static bool lost(const lease_state& lease);

    const repository_options& options() const { return options_; }
    std::string key(std::string_view id, std::string_view suffix) const;

  private:
    redis::connection& redis_;
    repository_options options_;
    std::string model_;
};

}  // namespace detail

template <model T>
class repository;

// An entity held under an exclusive lease. Move-only; releases the lease when destroyed.
// value() is the entity as read when the lease was taken (nullopt if it does not exist);
// change it and save().
template <model T>
class locked {
  public:
    locked(locked&&) noexcept = default;
    locked& operator=(locked&& other) noexcept {
        if (this != &other) {
            release();
            store_ = other.store_;
            ref_ = std::move(other.ref_);
            lease_ = std::move(other.lease_);
            value_ = std::move(other.value_);
        }
        return *this;
    }
    ~locked() { release(); }

    const keel::ref<T>& entity() const { return ref_; }
    // The fencing token: grows with every acquisition of this entity's lock.
    std::uint64_t token() const { return detail::document_store::token(*lease_); }
    // True once the lease could not be renewed: save() will fail.
    bool lost() const { return detail::document_store::lost(*lease_); }

    std::optional<T>& value() { return value_; }
    const std::optional<T>& value() const { return value_; }
    T& operator*() { return *value_; }
    T* operator->() { return &*value_; }

    // Writes value() if this lease is still the current one; model_error::lock_lost if not.
    asio::awaitable<expected<void, model_error>> save() {
        if (!value_)
            co_return unexpected(model_error{model_error::code::invalid_document,
                                             "nothing to save: the entity has no value"});
        co_return co_await store_->save(lease_, nlohmann::json(*value_).dump());
    }

    // Gives the lease up now (the destructor does it too). Idempotent.
    void release() {
        if (lease_) detail::document_store::release(lease_);
        lease_.reset();
    }

  private:
    friend class repository<T>;
    locked(detail::document_store& store, keel::ref<T> r,
           std::shared_ptr<detail::lease_state> lease, std::optional<T> value)
        : store_(&store), ref_(std::move(r)), lease_(std::move(lease)), value_(std::move(value)) {}

    detail::document_store* store_;
    keel::ref<T> ref_;
    std::shared_ptr<detail::lease_state> lease_;
    std::optional<T> value_;
};

// The documents of model T in Redis.
template <model T>
class repository {
  public:
    // The connection must outlive the repository and every locked<T> it gave.
    explicit repository(redis::connection& redis, repository_options options = {})
        : store_(redis, std::move(options), model_traits<T>::name) {}

    asio::awaitable<expected<std::optional<T>, model_error>> get(const keel::ref<T>& r) {
        auto doc = co_await store_.get(r.id());
        if (!doc) co_return unexpected(std::move(doc).error());
        co_return decode(r, *doc);
    }

    asio::awaitable<expected<void, model_error>> put(const keel::ref<T>& r, const T& value) {
        co_return co_await store_.put(r.id(), nlohmann::json(value).dump());
    }

    // True when there was something to remove.
    asio::awaitable<expected<bool, model_error>> remove(const keel::ref<T>& r) {
        co_return co_await store_.remove(r.id());
    }

    // Waits up to `wait` (default: options.lock_wait) for the lease, then reads the entity.
    asio::awaitable<expected<locked<T>, model_error>> lock(const keel::ref<T>& r) {
        return lock(r, std::nullopt);
    }
    asio::awaitable<expected<locked<T>, model_error>> lock(
        const keel::ref<T>& r, std::optional<std::chrono::milliseconds> wait) {
        auto got = co_await store_.lock(r.id(), wait.value_or(store_.options().lock_wait));
        if (!got) co_return unexpected(std::move(got).error());
        auto value = decode(r, got->document);
        if (!value) {
            detail::document_store::release(got->lease);
            co_return unexpected(std::move(value).error());
        }
        co_return locked<T>(store_, r, std::move(got->lease), std::move(*value));
    }

  private:
    static expected<std::optional<T>, model_error> decode(const keel::ref<T>& r,
                                                          const std::optional<std::string>& doc) {
        if (!doc) return std::optional<T>{};
        try {
            return std::optional<T>(nlohmann::json::parse(*doc).get<T>());
        } catch (const std::exception& e) {
            return unexpected(model_error{model_error::code::invalid_document,
                                          std::string(model_traits<T>::name) + " " + r.id() +
                                              ": stored document does not decode: " + e.what()});
        }
    }

    detail::document_store store_;
};

}  // namespace keel
