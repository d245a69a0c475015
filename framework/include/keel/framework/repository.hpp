#pragma once

// Entities: repository<T> stores JSON documents of model T by ref<T>, and lock(ref) gives a
// locked<T>: an exclusive lease on the entity with a fencing token, held until the locked<T>
// goes out of scope. Saving through a locked<T> checks the token in the same step as the
// write, so a holder whose lease expired (a pause, a partition) can no longer write: a stale
// write is rejected, not lost silently over someone else's.
//
//   keel::repository<order> orders(documents);                  // a keel::documents&
//   auto o = co_await orders.lock(keel::ref<order>("o-1"));     // waits up to lock_wait
//   if (!o) co_return problem(o.error().what());
//   (*o)->status = "paid";                                      // the entity, read under the lock
//   co_await o->save();                                         // fails if the lease was lost
//
// Where the documents live is the keel::documents given (documents.hpp): Redis in a service
// (redis_documents.hpp: keys, lease renewal), memory in unit tests (memory_documents.hpp).
// repository(redis::connection&, options) is a shorthand that makes its own redis_documents.
//
// T needs nlohmann to_json/from_json. put() and remove() ignore locks: use them to create
// entities or for administration; read-modify-write goes through lock() and save().
//
// Thread-safety: as the documents it uses. A locked<T> belongs to one coroutine at a time.

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <keel/framework/documents.hpp>
#include <keel/framework/expected.hpp>
#include <keel/framework/model.hpp>
#include <keel/framework/redis_documents.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace keel {

template <model T>
class repository;

// An entity held under an exclusive lease. Move-only; releases the lease when destroyed.
// value() is the entity as read when the lease was taken (nullopt if it does not exist);
// change it and save().
template <model T>
class locked {
  public:
    const keel::ref<T>& entity() const { return ref_; }
    // The fencing token: grows with every acquisition of this entity's lock.
    std::uint64_t token() const { return lease_->token(); }
    // True once the lease is known to be gone: save() will fail.
    bool lost() const { return lease_->lost(); }

    std::optional<T>& value() { return value_; }
    const std::optional<T>& value() const { return value_; }
    T& operator*() { return *value_; }
    T* operator->() { return &*value_; }

    // Writes value() if this lease is still the current one; model_error::lock_lost if not.
    asio::awaitable<expected<void, model_error>> save() { return write(false); }
    // save() and release() in one step, for a read-modify-write that is done with the entity
    // (one round trip to Redis instead of two). The lease is given up whatever the outcome.
    asio::awaitable<expected<void, model_error>> save_and_release() { return write(true); }

    // Gives the lease up now (the destructor does it too). Idempotent.
    void release() {
        if (lease_) lease_->release();
    }

  private:
    friend class repository<T>;
    locked(keel::ref<T> r, std::unique_ptr<document_lease> lease, std::optional<T> value)
        : ref_(std::move(r)), lease_(std::move(lease)), value_(std::move(value)) {}

    asio::awaitable<expected<void, model_error>> write(bool and_release) {
        if (!value_)
            co_return unexpected(model_error{model_error::code::invalid_document,
                                             "nothing to save: the entity has no value"});
        if (!lease_)
            co_return unexpected(model_error{model_error::code::lock_lost,
                                             "the lock was released; the write was rejected"});
        auto json = nlohmann::json(*value_).dump();
        if (and_release) co_return co_await lease_->save_and_release(std::move(json));
        co_return co_await lease_->save(std::move(json));
    }

    keel::ref<T> ref_;
    std::unique_ptr<document_lease> lease_;  // releases when destroyed
    std::optional<T> value_;
};

// The documents of model T.
template <model T>
class repository {
  public:
    // On the given documents, which must outlive the repository and every locked<T> it gave.
    explicit repository(documents& docs) : docs_(&docs) {}
    // On Redis, with a redis_documents of its own; the connection must outlive the
    // repository and every locked<T> it gave.
    explicit repository(redis::connection& redis, repository_options options = {})
        : owned_(std::make_unique<redis_documents>(redis, std::move(options))),
          docs_(owned_.get()) {}

    asio::awaitable<expected<std::optional<T>, model_error>> get(const keel::ref<T>& r) {
        auto doc = co_await docs_->get(name(), r.id());
        if (!doc) co_return unexpected(std::move(doc).error());
        co_return decode(r, *doc);
    }

    asio::awaitable<expected<void, model_error>> put(const keel::ref<T>& r, const T& value) {
        co_return co_await docs_->put(name(), r.id(), nlohmann::json(value).dump());
    }

    // True when there was something to remove.
    asio::awaitable<expected<bool, model_error>> remove(const keel::ref<T>& r) {
        co_return co_await docs_->remove(name(), r.id());
    }

    // Waits up to `wait` (default: the documents' lock_wait) for the lease, then reads the
    // entity.
    asio::awaitable<expected<locked<T>, model_error>> lock(const keel::ref<T>& r) {
        return lock(r, std::nullopt);
    }
    asio::awaitable<expected<locked<T>, model_error>> lock(
        const keel::ref<T>& r, std::optional<std::chrono::milliseconds> wait) {
        auto got = co_await docs_->lock(name(), r.id(), wait.value_or(docs_->lock_wait()));
        if (!got) co_return unexpected(std::move(got).error());
        auto value = decode(r, got->document);
        if (!value) co_return unexpected(std::move(value).error());  // the lease goes with got
        co_return locked<T>(r, std::move(got->lease), std::move(*value));
    }

  private:
    static std::string name() { return std::string(model_traits<T>::name); }

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

    std::unique_ptr<documents> owned_;
    documents* docs_;
};

}  // namespace keel
