#pragma once

/// @file
/// Typed signals: what a webhook (or any service code) tells suspended processes.
///
/// @code
///   struct payment_received { std::string tx_id; double amount; };   // with to/from_json
/// @endcode
///
/// @code
///   struct payment_signals : keel::signal_group {
///       keel::signal<payment_received, order> received{this, "/payment/:order/received"};
///       keel::signal<void, order> failed{this, "/payment/:order/failed"};
///   };
/// @endcode
///
/// @code
///   // in a controller (the group comes from DI):
///   keel::signals::emit_options once{.key = "tx-1"};
///   auto r = co_await payments.received.emit(order_ref, payment, once);
///   // r.reached: how many process instances got it; r.duplicate: the key was used before
/// @endcode
///
/// A signal has a path pattern, an optional payload type (void: none) and the model types of
/// its `:parameters`, in order; their count is checked at compile time. A process receives
/// every signal of the groups it injects whose parameters it can bind by model type from its
/// own parameters (see keel/process/definition.hpp), from the moment it starts: a signal
/// emitted before the handler waits for it waits in the instance's inbox.
///
/// Emitting goes through the group's emitter: the process engine attaches itself to every
/// group a registered process injects (engine::attach(group) for a group only emitted to). Emit
/// takes the signal's parameters as ref<M> or as locked<M>: an emitter that holds an entity's lock
/// keeps it while it emits, and a lock found lost is an error rather than a silent emit.
///
/// Thread-safety: a group and its signals are immutable after construction except attach(),
/// which the service calls at start-up; emit() may be called from any thread.

#include <array>
#include <boost/asio/awaitable.hpp>
#include <concepts>
#include <cstddef>
#include <keel/framework/model.hpp>
#include <keel/framework/path_pattern.hpp>
#include <keel/framework/repository.hpp>
#include <keel/signals/update_with_step.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace keel::signals {

namespace asio = boost::asio;

/// One emit as the emitter sees it: the concrete path, the subscription keys to look up (the
/// path itself and the path with each non-empty proper subset of its parameters as `*`, see
/// subscription_keys()), the payload as JSON, an idempotency key (empty: none), and the entity
/// documents to write in the same atomic step (update_and_emit; only those the emitter
/// writes_documents() for).
struct emit_request {
    /// The concrete path the signal is emitted to.
    std::string path;
    /// The subscription keys to look up, the path's own first.
    std::vector<std::string> subscriptions;
    /// The payload as JSON (null for a signal without one).
    nlohmann::json payload;
    /// The idempotency key as given (emit_options::key); empty: none.
    std::string key;
    /// Documents written in the same atomic step as the delivery.
    std::vector<keel::document_write> documents;
    std::string trace;  ///< emit_options::trace
};

/// What an emit did. `reached`: the running or suspended process instances subscribed to
/// the signal, each of which now holds it in its inbox or already received it under the same
/// key (for a duplicate: what the first emit with this key reached). `duplicate`: the key had
/// been used within the idempotency window, and nothing was delivered this time.
/// `documents_changed`: a document of the request was not as expected or was locked, and
/// nothing was written or delivered (update_and_emit reads the entity again and retries).
struct emit_result {
    /// Process instances that hold the signal in their inbox or already received it.
    std::size_t reached = 0;
    /// The key had been used within the idempotency window; nothing was delivered.
    bool duplicate = false;
    /// A document of the request was not as expected or was locked; nothing happened.
    bool documents_changed = false;
    friend bool operator==(const emit_result&, const emit_result&) = default;
};

/// Per-emit options.
struct emit_options {
    /// Idempotency key: a second emit of the same signal to the same path (the same
    /// entities) with the same key, within the emitter's window (24 h by default), delivers
    /// nothing and returns the first result. The same key on another signal or for another
    /// entity is a new emit. Empty: every emit delivers. At most max_key_bytes.
    std::string key;
    /// The sender's trace context, as a W3C traceparent (request::trace().traceparent();
    /// keel::http::emit_options_from fills it): kept with the signal in each inbox when the
    /// engine records spans (process::engine_options::spans), so that the span of the
    /// instance's resumption, and the spans of the steps after it, continue the sender's
    /// trace. Empty: none.
    std::string trace;
};

/// The longest idempotency key (emit_options::key) accepted.
inline constexpr std::size_t max_key_bytes = 256;

/// What an emitter remembers for `key` on the concrete signal `path`: "<length>:<key> <path>"
/// (unambiguous, readable in Redis), or "sha256:<hex>" of both when that would be longer
/// than 128 bytes, so a long key costs the store 71 bytes. Empty for an empty key. Throws
/// emit_error for a key longer than max_key_bytes.
std::string scoped_key(std::string_view path, std::string_view key);

/// Thrown by emit(): the group has no emitter, the payload does not parse as the signal's
/// type (emit_json), a locked<M> parameter's lease was lost, or a parameter is not a valid
/// path segment.
class emit_error : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

/// Delivers signals into process inboxes. Implemented by keel::process::engine.
class emitter {
  public:
    /// Delivers one emit: writes its documents, if any, and the signal into every subscribed inbox.
    virtual asio::awaitable<emit_result> emit(emit_request request) = 0;
    /// Whether an emit_request can carry writes of documents at `where` (an address
    /// keel::documents gave). The default: no.
    virtual bool writes_documents(const keel::document_address& where) const {
        (void)where;
        return false;
    }

  protected:
    ~emitter() = default;
};

class signal_group;

/// The untyped part of every signal: its pattern, the model names of its parameters, and a
/// payload check. Signals are members of a group and never move.
class signal_base {
  public:
    signal_base(const signal_base&) = delete;
    signal_base& operator=(const signal_base&) = delete;

    /// The path pattern, e.g. "/payment/:order/received".
    std::string_view pattern() const noexcept { return pattern_; }
    /// The model names of the pattern's parameters, in order.
    const std::vector<std::string_view>& models() const noexcept { return models_; }
    /// The group the signal is a member of.
    signal_group& group() const noexcept { return *group_; }

    /// Empty when `payload` decodes as the signal's payload type, otherwise why not.
    virtual std::optional<std::string> check_payload(const nlohmann::json& payload) const = 0;

    /// Emits to the concrete path with an untyped payload, checked first (for HTTP routes and
    /// operators). Throws emit_error when the path does not match or the payload is wrong.
    asio::awaitable<emit_result> emit_json(std::string path, nlohmann::json payload,
                                           emit_options options) const;
    /// emit_json() with default options.
    asio::awaitable<emit_result> emit_json(std::string path, nlohmann::json payload) const {
        return emit_json(std::move(path), std::move(payload), emit_options());
    }

  protected:
    /// Registers the signal with `group`; `models` are the names of its parameters' models.
    signal_base(signal_group* group, std::string_view pattern,
                std::vector<std::string_view> models);
    ~signal_base() = default;

    /// Emits to the path made of the pattern and `values`.
    asio::awaitable<emit_result> emit_values(std::vector<std::string> values,
                                             nlohmann::json payload, emit_options options) const;
    /// The atomic change-and-emit behind signal::update_and_emit().
    template <keel::model T, class Change>
    asio::awaitable<expected<emit_result, model_error>> update_and_emit_values(
        keel::repository<T>& repo, keel::ref<T> entity, Change change,
        std::vector<std::string> values, nlohmann::json payload, emit_options options) const;
    /// The emitter (emit_error when none is attached), and the request for these values
    /// (emit_error when one is not a valid path segment): both checked before anything is
    /// written.
    emitter& attached_emitter() const;
    /// The request for `values`, checked as a path: emit_error for a value that is not a valid
    /// segment.
    emit_request request_for(std::vector<std::string> values, nlohmann::json payload,
                             emit_options options) const;

  private:
    signal_group* group_;
    std::string_view pattern_;
    std::vector<std::string_view> models_;
};

/// A set of signals, declared as a struct deriving from signal_group whose members are
/// keel::signal<...>{this, "/pattern"}. Register the group with DI like any service object;
/// process handlers and controllers take it by reference. Not copyable or movable: signals
/// point to their group.
class signal_group {
  public:
    signal_group() = default;
    signal_group(const signal_group&) = delete;
    signal_group& operator=(const signal_group&) = delete;

    /// The group's signals, in declaration order.
    const std::vector<const signal_base*>& signals() const noexcept { return signals_; }

    /// Sets where emits go. Called by the process engine for every group its processes
    /// inject; the first emitter attached wins (engines sharing a store are equivalent).
    void attach(emitter& e) noexcept {
        if (!emitter_) emitter_ = &e;
    }
    /// Whether an emitter is attached.
    bool attached() const noexcept { return emitter_ != nullptr; }
    /// The attached emitter; nullptr if none.
    emitter* get_emitter() const noexcept { return emitter_; }

    /// The signal whose pattern matches `path`, with the parameter values; nullptr if none.
    const signal_base* find(std::string_view path, std::vector<std::string>& values) const;

  protected:
    ~signal_group() = default;

  private:
    friend class signal_base;
    std::vector<const signal_base*> signals_;
    emitter* emitter_ = nullptr;
};

namespace detail {

std::string entity_id(const std::string& id, bool lost, std::string_view model);

}  // namespace detail

/// An entity parameter of an emit: converts from ref<M>, or from locked<M> (whose lease must
/// still be held: a lost lock is an emit_error).
template <keel::model M>
struct entity_arg {
    /// The entity's id.
    std::string id;
    /// From a reference to the entity.
    entity_arg(const keel::ref<M>& r)  // NOLINT: implicit by design
        : id(detail::entity_id(r.id(), false, keel::model_traits<M>::name)) {}
    /// From a locked entity: emit_error when its lease was lost.
    entity_arg(const keel::locked<M>& l)  // NOLINT: implicit by design
        : id(detail::entity_id(l.entity().id(), l.lost(), keel::model_traits<M>::name)) {}
};

/// A signal with a payload of type Payload (void: none) and parameters of models Models...
template <class Payload, keel::model... Models>
class signal final : public signal_base {
    struct no_payload {};
    using payload_arg = std::conditional_t<std::is_void_v<Payload>, no_payload, Payload>;

  public:
    /// The payload's type; void for a signal without one.
    using payload_type = Payload;
    /// The number of parameters in the pattern.
    static constexpr std::size_t arity = sizeof...(Models);

    /// A member of `group` with the path pattern `pattern`, whose parameter count is checked at
    /// compile time.
    signal(signal_group* group, path_pattern<sizeof...(Models)> pattern)
        : signal_base(group, pattern.text, {keel::model_traits<Models>::name...}) {}

    std::optional<std::string> check_payload(const nlohmann::json& payload) const override {
        if constexpr (std::is_void_v<Payload>) {
            return std::nullopt;
        } else {
            try {
                (void)payload.get<Payload>();
                return std::nullopt;
            } catch (const std::exception& e) {
                return std::string(e.what());
            }
        }
    }

    /// emit(entities..., payload[, options]): one entity (ref<M> or locked<M>) per model, in
    /// the pattern's order, then the payload (left out for a signal without one), then
    /// optionally the options. Every parameter is taken by value and there are no default
    /// arguments: g++ 12 mishandles temporaries bound to references, and braced default
    /// arguments, in a full-expression that co_awaits (docs/architecture.md, "Toolchain
    /// traps"). For the same reason name the options before the co_await:
    /// @code
    ///   keel::signals::emit_options once{.key = tx_id};
    ///   co_await payments.received.emit(order, payment, once);
    /// @endcode
    asio::awaitable<emit_result> emit(entity_arg<Models>... entities, payload_arg payload,
                                      emit_options options) const
        requires(!std::is_void_v<Payload>) {
        return emit_values({std::move(entities.id)...}, nlohmann::json(payload),
                           std::move(options));
    }
    /// emit() without options.
    asio::awaitable<emit_result> emit(entity_arg<Models>... entities, payload_arg payload) const
        requires(!std::is_void_v<Payload>) {
        return emit_values({std::move(entities.id)...}, nlohmann::json(payload), emit_options());
    }
    /// emit() for a signal without a payload.
    asio::awaitable<emit_result> emit(entity_arg<Models>... entities,
                                      emit_options options) const requires std::is_void_v<Payload> {
        return emit_values({std::move(entities.id)...}, nlohmann::json(), std::move(options));
    }
    /// emit() for a signal without a payload, without options.
    asio::awaitable<emit_result> emit(
        entity_arg<Models>... entities) const requires std::is_void_v<Payload> {
        return emit_values({std::move(entities.id)...}, nlohmann::json(), emit_options());
    }

    /// Changes one entity as repository<T>::update(entity, change) does and emits, both or
    /// neither: where the engine's store can write the entity's document (the application
    /// root's wiring: documents and processes on one Redis server), the document is checked
    /// and written in the emit's own atomic step, so a webhook that records something on an
    /// entity and signals it costs one round trip, and no crash can leave one done without
    /// the other. A document changed or locked since it was read makes the emit write and
    /// deliver nothing; the entity is read again and `change` runs again on it (so `change`
    /// must depend only on the entity it is given, as for update()); after a few refusals
    /// (signals::update_with_step), and where the store cannot write the document, it is
    /// update() then emit(). When `change` returns false nothing is written, and the emit
    /// still happens only on the entity `change` decided on: the emit checks that the document
    /// is as read (and, again, reads and retries when it is not), so a webhook that only needs
    /// an entity to exist, or to be in some state, checks and emits in one round trip when
    /// this process knows the entity, with no window between the two.
    /// An exception from `change` propagates, nothing written or emitted; an error reading or
    /// writing the entity is the model_error.
    ///
    /// @code
    ///   auto pay = [&](std::optional<order>& o) {
    ///       ...;
    ///       o->payments.push_back(paid);
    ///       return true;
    ///   };
    ///   keel::signals::emit_options once{.key = tx_id};
    ///   auto sent = co_await payments.received.update_and_emit(orders, ref, pay, ref, paid, once);
    ///   auto exists = [&](std::optional<order>& o) {
    ///       if (!o) throw not_found();
    ///       return false;
    ///   };
    ///   auto done = co_await shipping.delivered.update_and_emit(orders, ref, exists, ref, once);
    /// @endcode
    template <keel::model T, keel::entity_change<T> Change>
    asio::awaitable<expected<emit_result, model_error>> update_and_emit(
        keel::repository<T>& repo, keel::ref<T> entity, Change change,
        entity_arg<Models>... entities, payload_arg payload, emit_options options) const
        requires(!std::is_void_v<Payload>) {
        return update_and_emit_values(repo, std::move(entity), std::move(change),
                                      {std::move(entities.id)...}, nlohmann::json(payload),
                                      std::move(options));
    }
    /// update_and_emit() for a signal without a payload.
    template <keel::model T, keel::entity_change<T> Change>
    asio::awaitable<expected<emit_result, model_error>> update_and_emit(
        keel::repository<T>& repo, keel::ref<T> entity, Change change,
        entity_arg<Models>... entities,
        emit_options options) const requires std::is_void_v<Payload> {
        return update_and_emit_values(repo, std::move(entity), std::move(change),
                                      {std::move(entities.id)...}, nlohmann::json(),
                                      std::move(options));
    }
};

template <keel::model T, class Change>
asio::awaitable<expected<emit_result, model_error>> signal_base::update_and_emit_values(
    keel::repository<T>& repo, keel::ref<T> entity, Change change, std::vector<std::string> values,
    nlohmann::json payload, emit_options options) const {
    emitter& target = attached_emitter();
    auto req = request_for(std::move(values), std::move(payload), std::move(options));
    auto where = repo.docs().address(keel::model_traits<T>::name, entity.id());
    if (where && !target.writes_documents(*where)) where.reset();
    auto with_write = [&](std::optional<keel::document_write> write)
        -> asio::awaitable<std::optional<emit_result>> {
        emit_request attempt = req;
        if (write) attempt.documents.push_back(std::move(*write));
        auto sent = co_await target.emit(std::move(attempt));
        if (sent.documents_changed) co_return std::nullopt;
        co_return sent;
    };
    auto plain = [&]() -> asio::awaitable<emit_result> { return target.emit(std::move(req)); };
    auto read = keel::repository<T>::entity_read::stored;
    co_return co_await update_with_step(repo, entity, change, std::move(where), with_write, plain,
                                        read);
}

/// The subscription keys under which an emit to `path` (of a signal with this pattern) looks
/// for subscribers: the path itself, then the path with each non-empty proper subset of its
/// parameters replaced by '*' (a process that binds only some parameters of a signal subscribes
/// with '*' for the others). A signal without parameters has one key, its path.
std::vector<std::string> subscription_keys(std::string_view pattern,
                                           const std::vector<std::string>& values);

/// The subscription key of a process that binds the parameters in `bound` (nullopt: not bound).
std::string subscription_key(std::string_view pattern,
                             const std::vector<std::optional<std::string>>& bound);

}  // namespace keel::signals

namespace keel {
using signals::signal;
/// keel::signals::signal_group.
using signal_group = signals::signal_group;
}  // namespace keel
