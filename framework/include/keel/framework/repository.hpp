#pragma once

/// @file
/// Entities: repository<T> stores JSON documents of model T by ref<T>, and lock(ref) gives a
/// locked<T>: an exclusive lease on the entity with a fencing token, held until the locked<T>
/// goes out of scope. Saving through a locked<T> checks the token in the same step as the
/// write, so a holder whose lease expired (a pause, a partition) can no longer write: a stale
/// write is rejected, not lost silently over someone else's.
///
/// @code
///   keel::repository<order> orders(documents);                  // a keel::documents&
///   auto o = co_await orders.lock(keel::ref<order>("o-1"));     // waits up to lock_wait
///   if (!o) co_return problem(o.error().what());
///   (*o)->status = "paid";                                      // the entity, read under the lock
///   co_await o->save();                                         // fails if the lease was lost
/// @endcode
///
/// Where the documents live is the keel::documents given (documents.hpp): Redis in a service
/// (redis_documents.hpp: keys, lease renewal), memory in unit tests (memory_documents.hpp).
/// repository(redis::connection&, options) is a shorthand that makes its own redis_documents.
///
/// T needs nlohmann to_json/from_json; a model that also writes its own text (model.hpp,
/// writes_json_text) is written with it. A repository remembers the entities it decoded (and,
/// for a model that declares exact_json, those it wrote) with their documents, up to a byte
/// budget, and reads the same document again as a copy instead of a parse
/// (detail/decoded_entities.hpp). create(ref, value) writes an entity only if there is
/// none. put() and remove() ignore locks: use them for administration. Read-modify-write goes
/// through update(ref, change), which writes only if nobody changed the entity since it was read
/// (and takes the lock when there is contention), or through lock() and save() when the holder must
/// keep the entity across other work: a lock excludes every other writer, update() included, until
/// released.
///
/// Thread-safety: as the documents it uses. A locked<T> belongs to one coroutine at a time.

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <concepts>
#include <cstdint>
#include <keel/framework/detail/decoded_entities.hpp>
#include <keel/framework/detail/model_text.hpp>
#include <keel/framework/documents.hpp>
#include <keel/framework/expected.hpp>
#include <keel/framework/json_text.hpp>
#include <keel/framework/model.hpp>
#include <keel/framework/redis_documents.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>

namespace keel {

template <model T>
class repository;

/// What repository<T>::update applies: bool(std::optional<T>&), false for "nothing to write".
template <class F, class T>
concept entity_change = requires(F& change, std::optional<T>& entity) {
    { change(entity) } -> std::convertible_to<bool>;
};

/// An entity held under an exclusive lease. Move-only; releases the lease when destroyed.
/// value() is the entity as read when the lease was taken (nullopt if it does not exist);
/// change it and save().
template <model T>
class locked {
  public:
    /// The entity's reference.
    const keel::ref<T>& entity() const { return ref_; }
    /// The fencing token: grows with every acquisition of this entity's lock.
    std::uint64_t token() const { return lease_->token(); }
    /// True once the lease is known to be gone: save() will fail.
    bool lost() const { return lease_->lost(); }

    ///@{
    /// The entity as read under the lease, with the caller's changes; nullopt: it does not exist.
    std::optional<T>& value() { return value_; }
    const std::optional<T>& value() const { return value_; }
    ///@}
    ///@{
    /// The entity; only when value() holds one.
    T& operator*() { return *value_; }
    T* operator->() { return &*value_; }
    ///@}

    /// Writes value() if this lease is still the current one; model_error::lock_lost if not.
    asio::awaitable<expected<void, model_error>> save() { return write(false); }
    /// save() and release() in one step, for a read-modify-write that is done with the entity
    /// (one round trip to Redis instead of two). The lease is given up whatever the outcome.
    asio::awaitable<expected<void, model_error>> save_and_release() { return write(true); }

    /// Gives the lease up now (the destructor does it too). Idempotent.
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
        auto json = detail::model_text(*value_);
        if (and_release) co_return co_await lease_->save_and_release(std::move(json));
        co_return co_await lease_->save(std::move(json));
    }

    keel::ref<T> ref_;
    std::unique_ptr<document_lease> lease_;  // releases when destroyed
    std::optional<T> value_;
};

/// The documents of model T.
template <model T>
class repository {
  public:
    /// The budget of the entities a repository remembers with their documents, by default.
    static constexpr std::size_t default_memory_bytes = 4 << 20;

    /// On the given documents, which must outlive the repository and every locked<T> it gave;
    /// `memory_bytes` bounds the entities it remembers (0: none, every read decodes).
    explicit repository(documents& docs, std::size_t memory_bytes = default_memory_bytes)
        : docs_(&docs), decoded_(make_memory(memory_bytes)) {}
    /// On Redis, with a redis_documents of its own; the connection must outlive the
    /// repository and every locked<T> it gave.
    explicit repository(redis::connection& redis, repository_options options = {})
        : owned_(std::make_unique<redis_documents>(redis, std::move(options))),
          docs_(owned_.get()),
          decoded_(make_memory(default_memory_bytes)) {}

    /// The entity; nullopt when it does not exist.
    asio::awaitable<expected<std::optional<T>, model_error>> get(const keel::ref<T>& r) {
        auto doc = co_await docs_->get(name(), r.id());
        if (!doc) co_return unexpected(std::move(doc).error());
        co_return decode(r, *doc);
    }

    /// Writes the entity regardless of leases: creation and administration (documents::put).
    asio::awaitable<expected<void, model_error>> put(const keel::ref<T>& r, const T& value) {
        co_return co_await docs_->put(name(), r.id(), encode(value));
    }

    /// Writes `value` only if the entity does not exist: true when it wrote it, false when
    /// there was one already (left as it is). One conditional write when nobody holds the
    /// entity's lock (redis_documents: one script, no read); while someone does, it waits
    /// for the lock as update() does.
    ///
    /// @code
    ///   auto created = co_await orders.create(ref, order{...});   // false: a retried request
    /// @endcode
    asio::awaitable<expected<bool, model_error>> create(const keel::ref<T>& r, const T& value) {
        auto put = co_await docs_->put_if(name(), r.id(), std::nullopt, encode(value));
        if (!put) co_return unexpected(std::move(put).error());
        if (*put != documents::put_if_result::locked)
            co_return *put == documents::put_if_result::written;
        bool created = false;
        auto if_absent = [&](std::optional<T>& entity) {
            created = !entity;
            if (created) entity = value;
            return created;
        };
        auto stored = co_await update(r, if_absent);
        if (!stored) co_return unexpected(std::move(stored).error());
        co_return created;
    }

    /// True when there was something to remove.
    asio::awaitable<expected<bool, model_error>> remove(const keel::ref<T>& r) {
        co_return co_await docs_->remove(name(), r.id());
    }

    /// Read-modify-write without holding the lock (optimistic): reads the entity, lets
    /// `change` modify it (std::optional<T>&: nullopt when it does not exist; give it a value
    /// to create it; return false for "nothing to write"), and writes the result only if the
    /// stored document is still the one read and nobody holds the entity's lock. On a
    /// conflict it reads again and calls `change` again, so `change` must depend only on the
    /// entity it is given; after a few conflicts, or while the lock is held, it takes the lock
    /// (waiting up to lock_wait) and makes the change under it. An exception from `change`
    /// propagates, nothing written. Returns the entity as the last call of `change` left it:
    /// what was written, or, when it returned false, what it was given.
    ///
    /// @code
    ///   auto paid = [&](std::optional<order>& o) {
    ///       if (!o || o->status == "paid") return false;
    ///       o->status = "paid";
    ///       return true;
    ///   };
    ///   auto now = co_await orders.update(ref, paid);
    /// @endcode
    ///
    /// Uncontended it is one read and one conditional write (redis_documents: a GET and one
    /// script), against lock() and save_and_release()'s two scripts and the lease's renewal;
    /// the read is skipped when the documents remember what this process last wrote
    /// (documents::read_for_update), so a flow that changes the same entity step after step
    /// pays one script per change. `change` may then first see that remembered version, which
    /// the conditional write refuses if it is no longer the stored one.
    template <entity_change<T> Change>
    asio::awaitable<expected<std::optional<T>, model_error>> update(const keel::ref<T>& r,
                                                                    Change change);

    /// What prepare_update() gives: the document read and the one to write in its place.
    struct prepared_update {
        std::optional<std::string> expected;  ///< the document read; nullopt: there was none
        std::optional<std::string> text;      ///< nullopt: `change` returned false
    };
    /// Whether prepare_update() reads the entity, or assumes there is none.
    enum class entity_read : std::uint8_t { stored, assume_absent };
    /// update() without its write, for a store that makes the write in an atomic step of its
    /// own (keel::process::context::update: with the step's commit; an emit or a start,
    /// keel::signals::update_with_step): reads the entity as update() does and applies `change`.
    /// Gives the document read (`expected`, nullopt: there was none) and, when `change` returned
    /// true, the one to write in its place (`text`), which whoever writes it must write only if
    /// the stored one is still the one read and nobody holds the lock (documents::put_if's
    /// condition). With entity_read::assume_absent it does not read: `change` sees no entity,
    /// as for a create that expects none (the conditional write refuses it when there is one).
    template <entity_change<T> Change>
    asio::awaitable<expected<prepared_update, model_error>> prepare_update(
        const keel::ref<T>& r, Change& change, entity_read read = entity_read::stored) {
        expected<changed_entity, model_error> got = changed_entity{};
        if (read == entity_read::assume_absent)
            got = change_absent(change);
        else
            got = co_await read_and_change(r, change);
        if (!got) co_return unexpected(std::move(got).error());
        prepared_update prepared{std::move(got->read), std::nullopt};
        if (got->changed) prepared.text = encode(*got->value);
        co_return std::move(prepared);
    }

    /// The documents this repository keeps its entities in.
    documents& docs() const noexcept { return *docs_; }

    ///@{
    /// Waits up to `wait` (default: the documents' lock_wait) for the lease, then reads the
    /// entity.
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
    ///@}

  private:
    static constexpr int optimistic_attempts = 3;

    static std::string name() { return std::string(model_traits<T>::name); }

    static model_error nothing_to_save() {
        return model_error{model_error::code::invalid_document,
                           "nothing to save: the entity has no value"};
    }

    // An update's first half: the entity as read_for_update() gives it, after `change`.
    struct changed_entity {
        std::optional<std::string> read;  // the document it was read from
        std::optional<T> value;
        bool changed = false;  // what `change` returned; then `value` is set
    };
    template <class Change>
    asio::awaitable<expected<changed_entity, model_error>> read_and_change(const keel::ref<T>& r,
                                                                           Change& change) {
        auto read = co_await docs_->read_for_update(name(), r.id());
        if (!read) co_return unexpected(std::move(read).error());
        auto value = decode(r, *read);
        if (!value) co_return unexpected(std::move(value).error());
        bool changed = change(*value);
        if (changed && !*value) co_return unexpected(nothing_to_save());
        changed_entity got{std::move(*read), std::move(*value), changed};
        co_return std::move(got);
    }

    template <class Change>
    static expected<changed_entity, model_error> change_absent(Change& change) {
        std::optional<T> value;
        bool changed = change(value);
        if (changed && !value) return unexpected(nothing_to_save());
        return changed_entity{std::nullopt, std::move(value), changed};
    }

    // The value of a stored document: remembered, or parsed (and then remembered).
    expected<std::optional<T>, model_error> decode(const keel::ref<T>& r,
                                                   const std::optional<std::string>& doc) {
        if (!doc) return std::optional<T>{};
        if constexpr (std::copy_constructible<T>) {
            if (decoded_) {
                if (auto known = decoded_->find(*doc)) return known;
            }
        }
        try {
            auto value = nlohmann::json::parse(*doc).get<T>();
            if constexpr (std::copy_constructible<T>) {
                if (decoded_) decoded_->remember(*doc, value);
            }
            return std::optional<T>(std::move(value));
        } catch (const std::exception& e) {
            return unexpected(model_error{model_error::code::invalid_document,
                                          std::string(model_traits<T>::name) + " " + r.id() +
                                              ": stored document does not decode: " + e.what()});
        }
    }

    // The document of a value about to be written; for an exact_json model, the value is
    // remembered as that document's, so the next read of it needs no parse.
    std::string encode(const T& value) {
        auto text = detail::model_text(value);
        if constexpr (exact_json<T> && std::copy_constructible<T>) {
            if (decoded_) {
#ifndef NDEBUG
                check_exact(text, value);
#endif
                decoded_->remember(text, value);
            }
        }
        return text;
    }

    // exact_json<T>'s claim, for this value (debug builds): its document decodes to a value
    // that writes the same document and, where T compares, equals it.
    static void check_exact(const std::string& text, const T& value) {
        auto back = nlohmann::json::parse(text).get<T>();
        bool same = dump_json(nlohmann::json(back)) == text;
        if constexpr (std::equality_comparable<T>) same = same && back == value;
        if (!same)
            throw std::logic_error(std::string(model_traits<T>::name) +
                                   " declares exact_json, but its JSON does not give back the "
                                   "value it was written from: " +
                                   text);
    }

    static std::unique_ptr<detail::decoded_entities<T>> make_memory(std::size_t bytes) {
        if constexpr (std::copy_constructible<T>) {
            if (bytes > 0) return std::make_unique<detail::decoded_entities<T>>(bytes);
        }
        return nullptr;
    }

    std::unique_ptr<documents> owned_;
    documents* docs_;
    std::unique_ptr<detail::decoded_entities<T>> decoded_;
};

template <model T>
template <entity_change<T> Change>
asio::awaitable<expected<std::optional<T>, model_error>> repository<T>::update(
    const keel::ref<T>& r, Change change) {
    for (int attempt = 0; attempt < optimistic_attempts; ++attempt) {
        auto got = co_await read_and_change(r, change);
        if (!got) co_return unexpected(std::move(got).error());
        if (!got->changed) co_return std::move(got->value);
        auto json = encode(*got->value);
        auto put = co_await docs_->put_if(name(), r.id(), std::move(got->read), std::move(json));
        if (!put) co_return unexpected(std::move(put).error());
        if (*put == documents::put_if_result::written) co_return std::move(got->value);
        if (*put == documents::put_if_result::locked) break;
    }
    auto held = co_await lock(r);
    if (!held) co_return unexpected(std::move(held).error());
    if (!change(held->value())) co_return std::move(held->value());
    auto saved = co_await held->save_and_release();
    if (!saved) co_return unexpected(std::move(saved).error());
    co_return std::move(held->value());
}

}  // namespace keel
