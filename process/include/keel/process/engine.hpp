#pragma once

/// @file
/// keel::process::engine: runs process instances of registered definitions against a store.
///
/// @code
///   engine eng(io.get_executor(), store, clock);
///   eng.add(order_fulfillment, container);          // dependencies resolved from the container
///   eng.run();                                      // timers, wake-ups, lease take-over
///   auto h = co_await eng.start(order_fulfillment, keel::ref<order>("order-123"));
///   co_await eng.deliver(h.id(), "/payment/order-123/received", payload, "webhook-42");
///   auto result = co_await h.wait();                // expected<fulfillment, failure>
/// @endcode
///
/// The engine executes instances (replaying their journals when they are not in memory),
/// commits their steps to the store, executes `run` side effects with retries, fires timers,
/// and keeps up to `max_hot` suspended instances in memory so a wake-up resumes them without
/// replay. Ownership is a lease per instance with a fencing epoch: a worker that lost its
/// lease can write nothing. All time comes from the keel::clock.
///
/// Rolling deploys: every engine announces the code version of each definition it runs
/// (engine_options::heartbeat). While a worker with newer code for a definition is alive, an
/// engine leaves it the instances that newer code started, and an instance whose journal its
/// own code cannot replay is given back (store::leave, with the reason) instead of parked:
/// only the newest live code parks (docs/versioning.md).
///
/// Thread-safety: an engine's instances live on its executor (one thread), or each on its
/// part's (see "Every core" below). Its coroutine calls (start, deliver, emit, describe,
/// status, wait, cancel, resume) may be awaited from any executor: they hop onto the
/// engine's (the instance's part's) and back. add() and run() are for
/// before the engine's threads run; stop() and poke() for one of its threads (or before).
/// Several engines (workers) may share one store.
///
/// Every core: built with several executors (a service's threads, one io_context each), the
/// engine is one part per executor under one worker name. Each instance belongs to one part,
/// by a hash of its id, and lives only on that part's thread; a call about an instance runs
/// on its part (no lock: a hop when the caller is on another thread), and an emit runs on
/// the caller's own part, handing each instance it reached to that instance's part. Each
/// part renews its own leases and looks for due work; due work of another part is handed
/// over. Part 0 announces the worker.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <functional>
#include <keel/framework/clock.hpp>
#include <keel/framework/expected.hpp>
#include <keel/framework/repository.hpp>
#include <keel/framework/trace.hpp>
#include <keel/process/definition.hpp>
#include <keel/process/journal.hpp>
#include <keel/process/request.hpp>
#include <keel/process/schedule.hpp>
#include <keel/process/store.hpp>
#include <keel/signals/update_with_step.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace keel::process {

/// How an engine runs. A value type.
struct engine_options {
    std::string worker;  ///< this worker's name; random when empty
    /// How many instances each part keeps in memory; past it, suspended ones are evicted
    /// (least recently used first) and replayed when they wake.
    std::size_t max_hot = 10'000;
    /// How long an instance's lease lasts unless renewed: the engine renews the leases of
    /// what it runs, and a worker that dies holds its instances this long at most.
    duration lease_ttl = std::chrono::seconds(30);
    /// Also look for work of other workers this often; unset: the store's poll_interval().
    std::optional<duration> poll_interval;
    std::uint64_t seed = 0;  ///< for retry jitter and ids; 0 = random
    /// How long an emit's idempotency key is remembered.
    duration emit_window = std::chrono::hours(24);
    /// How long the answer to a request (context::reply) is kept for its asker, and so how
    /// long an ask repeated with the same id gets it again (ask_options::id).
    duration answer_retention = std::chrono::hours(24);
    /// How often this worker announces itself and the code version of each definition it runs
    /// (store::announce); it counts as gone three heartbeats after its last. Zero: never (the
    /// worker then takes every instance and parks what it cannot replay).
    duration heartbeat = std::chrono::seconds(5);
    /// A store without an identity record is refused (in question) instead of being recorded
    /// as a new store: for deployments where an empty store is never expected, so that a
    /// worker started against a Redis that lost its data stops too (see store_in_question).
    bool store_must_exist = false;
    /// Where the engine's spans go (keel::app: the service's sink, from --otlp-endpoint); none
    /// when null. A signal's delivery to an instance is a span whose parent is the sender's
    /// (emit_options::trace), and each attempt of a step that follows is a child of it; a
    /// timer's firing is a span too. Must outlive the engine.
    trace::span_sink* spans = nullptr;
};

/// How start() and its kin start an instance, beyond its definition and parameters. Name it
/// before the co_await (g++ 12: docs/architecture.md, "Toolchain traps"):
/// @code
///   keel::process::start_options in_request{.trace = req.trace()};
///   auto h = co_await eng.start(in_request, order_fulfillment, ref);
/// @endcode
struct start_options {
    /// The span the start is made in (a handler's req.trace()). With engine_options::spans,
    /// the start is a span ("start <definition>") that is its child, or the root of a new
    /// trace when unset; the instance keeps that span's context, so its first steps and,
    /// later, timers and signals that carry no trace of their own continue the trace of the
    /// request that started it, also after a restart.
    std::optional<trace::span_context> trace;
};

/// Why waiting for an instance gave no result.
struct failure {
    instance_status status =
        instance_status::failed;  ///< failed or cancelled (or running when unknown)
    std::string message;          ///< the instance's error, or why there is no result
};

/// What describe() reports about an instance: its status, and its result or error once final.
struct instance_info {
    std::string id;                                     ///< the instance id
    std::string definition;                             ///< the definition's name
    instance_status status = instance_status::running;  ///< its status as stored
    std::optional<nlohmann::json> result;               ///< once completed: its result
    std::optional<std::string> error;                   ///< once failed or cancelled: why
};
/// {"id", "definition", "status", "result", "error"} (result and error null when absent): how
/// a service shows an instance to its clients, e.g. `response::json(*info)`.
void to_json(nlohmann::json& out, const instance_info& info);

/// Why an operator's action on an instance (cancel, resume, retry, remove_signal) was refused.
struct refusal {
    /// The kinds of refusal.
    enum class reason : std::uint8_t {
        not_found,     ///< no such instance
        final,         ///< it is completed, cancelled or failed for good
        owned,         ///< another worker holds it and is running it
        wrong_state,   ///< not in the state the action needs (resume: parked; retry: final)
        out_of_range,  ///< retry: the position is past the journal
        conflict,      ///< it changed during the action; trying again may work
        /// retry: a signal to leave out is not one the retry would give back; remove_signal:
        /// the inbox holds no entry with that id
        unknown_signal,
    };
    reason why = reason::not_found;  ///< the kind of refusal
    std::string message;             ///< says which instance and why, for people
};
/// What an operator's action answers: done, or the refusal.
using action_result = expected<void, refusal>;

/// A step this worker is executing for an instance: which attempt, and why the last one
/// failed (empty after the first).
struct step_progress {
    std::uint64_t seq = 0;    ///< the step's operation number
    std::string name;         ///< the step's name
    int attempt = 0;          ///< the attempt running now (1: the first)
    std::string last_error;   ///< why the previous attempt failed; empty after the first
    std::string waiting_for;  ///< the limit its attempt waits for a permit of (describe(limit))
};

class engine;

/// A handle to one instance: its id, status, result and cancellation. A cheap value; valid
/// while its engine lives.
template <class R>
class handle {
  public:
    /// No instance: only to be assigned to.
    handle() = default;
    /// The instance `id` of engine `e`.
    handle(engine& e, std::string id) : engine_(&e), id_(std::move(id)) {}

    /// The instance id.
    const std::string& id() const noexcept { return id_; }
    /// The instance's status (engine::status).
    asio::awaitable<instance_status> status() const;
    /// Waits until the instance is final: its result, or why there is none (also a result
    /// that does not decode as an R).
    asio::awaitable<expected<R, failure>> wait() const;
    /// Cancels the instance (engine::cancel); false when that was refused.
    asio::awaitable<bool> cancel() const;

  private:
    engine* engine_ = nullptr;
    std::string id_;
};

/// Runs process instances of registered definitions against a store (see the file's
/// description).
///
/// The engine is also the emitter of the signal groups its processes inject: an emit fans
/// the signal out to every subscribed instance's inbox and wakes those that wait for it.
class engine final : public signals::emitter {
  public:
    /// Builds the handler of one instance from its stored parameters.
    using factory = std::function<durable<nlohmann::json>(context&, const nlohmann::json&)>;

    /// An engine on one executor, over store `s`, on `clock`; both must outlive it.
    engine(asio::any_io_executor ex, store& s, keel::clock& clock, engine_options options = {});
    /// One part per executor (see "Every core" above); at least one.
    engine(std::span<const asio::any_io_executor> executors, store& s, keel::clock& clock,
           engine_options options = {});
    ~engine();
    engine(const engine&) = delete;
    engine& operator=(const engine&) = delete;

    /// Registers a definition; dependencies come from `deps` (keel::di::container, a scope,
    /// or anything with `template <class T> T& get()`), which must outlive the engine.
    /// The signal groups the handler injects are attached to this engine, and each instance
    /// subscribes, from its start, to every signal of them whose parameters it binds by model
    /// type; a binding that is ambiguous (two parameters of the signal's model) throws
    /// std::invalid_argument naming the process and the signal. Before run().
    ///@{
    template <auto H, class Resolver>
    void add(const definition<H>& def, Resolver& deps) {
        auto groups = definition<H>::signal_groups(deps);
        subscribe(std::string(def.name()), definition<H>::param_models(), groups);
        add_definition(
            std::string(def.name()),
            [def, &deps](context& ctx, const nlohmann::json& p) {
                return def.instantiate(ctx, p, deps);
            },
            std::string(def.version()));
    }
    /// (Without `deps`: for a handler without dependencies.)
    template <auto H>
    void add(const definition<H>& def) {
        add_definition(
            std::string(def.name()),
            [def](context& ctx, const nlohmann::json& p) {
                no_dependencies none;
                return def.instantiate(ctx, p, none);
            },
            std::string(def.version()));
    }
    ///@}
    /// Registers a definition by name, with `f` building the handler of each instance (add()
    /// without the signal subscriptions); registering a name again replaces it. `version`:
    /// recorded with every instance it starts (definition::version).
    void add_definition(std::string name, factory f, std::string version = {});

    ///@{
    /// Starts an instance unless it exists (idempotent); a handle to it either way.
    template <auto H, class... P>
    asio::awaitable<handle<typename definition<H>::result_type>> start(const definition<H>& def,
                                                                       P... params) {
        return start(start_options{}, def, std::move(params)...);
    }
    template <auto H, class... P>
    asio::awaitable<handle<typename definition<H>::result_type>> start(start_options options,
                                                                       const definition<H>& def,
                                                                       P... params) {
        auto id = def.instance_id(params...);
        std::vector<document_write> none;
        co_await start_instance(std::string(def.name()), id, def.encode_params(params...),
                                std::move(none), options);
        co_return handle<typename definition<H>::result_type>(*this, std::move(id));
    }
    ///@}
    /// start() by the definition's name, with the instance id and the parameters as stored
    /// (definition::encode_params). std::invalid_argument for a definition not registered;
    /// keel::unavailable_error while the store is in question (store_in_question).
    asio::awaitable<void> start_instance(std::string definition, std::string id,
                                         nlohmann::json params);

    /// Starts an instance as start() does and changes one entity in the same atomic step, as
    /// repository<T>::update(entity, change) would: where the store can write the entity's
    /// document (the application root's wiring: documents and processes on one Redis server)
    /// both are written or neither, in one round trip, so no crash leaves an entity without
    /// the process that goes with it; elsewhere it is update() then start(). The document is
    /// written also when the instance exists already (start is idempotent, the change decides
    /// by the entity; when it returns false, the start checks that the document is as read).
    /// A document changed or locked since it was read makes the start write nothing; the
    /// entity is read again and `change` runs again (keel::signals::update_with_step).
    /// An exception from `change` propagates, nothing written or started; an error reading or
    /// writing the entity is the model_error. `options`: as start()'s.
    ///
    /// @code
    ///   bool created = false;
    ///   auto create = [&](std::optional<order>& o) {   // the order unless it exists
    ///       created = !o;
    ///       if (created) o = fresh;
    ///       return created;
    ///   };
    ///   auto h = co_await eng.update_and_start(orders, ref, create, order_fulfillment, ref);
    /// @endcode
    ///@{
    template <model T, entity_change<T> Change, auto H, class... P>
    asio::awaitable<expected<handle<typename definition<H>::result_type>, model_error>>
    update_and_start(start_options options, repository<T>& repo, keel::ref<T> entity, Change change,
                     const definition<H>& def, P... params) {
        auto read = repository<T>::entity_read::stored;
        co_return co_await start_with_write(options, repo, std::move(entity), change, read, def,
                                            std::move(params)...);
    }
    template <model T, entity_change<T> Change, auto H, class... P>
    asio::awaitable<expected<handle<typename definition<H>::result_type>, model_error>>
    update_and_start(repository<T>& repo, keel::ref<T> entity, Change change,
                     const definition<H>& def, P... params) {
        return update_and_start(start_options{}, repo, std::move(entity), std::move(change), def,
                                std::move(params)...);
    }
    ///@}

    /// What create_and_start() answers.
    template <class R>
    struct created_and_started {
        handle<R> process;     ///< the started (or found) instance
        bool created = false;  ///< the entity was written now
    };
    /// update_and_start with repository<T>::create(entity, value)'s change: the entity written
    /// unless it exists, and its process started unless it exists, in one step. `created`:
    /// the entity was written now (false: a retried request, which finds both). No read
    /// first: the write is made as for a new entity, and read only when it is refused.
    /// `options`: as start()'s.
    ///
    /// @code
    ///   auto started = co_await eng.create_and_start(orders, ref, fresh, order_fulfillment, ref);
    ///   if (started) reply(started->created ? 201 : 200, started->process.id());
    /// @endcode
    ///@{
    template <model T, auto H, class... P>
    asio::awaitable<expected<created_and_started<typename definition<H>::result_type>, model_error>>
    create_and_start(repository<T>& repo, keel::ref<T> entity, T value, const definition<H>& def,
                     P... params) {
        return create_and_start(start_options{}, repo, std::move(entity), std::move(value), def,
                                std::move(params)...);
    }
    template <model T, auto H, class... P>
    asio::awaitable<expected<created_and_started<typename definition<H>::result_type>, model_error>>
    create_and_start(start_options options, repository<T>& repo, keel::ref<T> entity, T value,
                     const definition<H>& def, P... params) {
        bool created = false;
        auto if_absent = [&](std::optional<T>& e) {
            created = !e;
            if (created) e = value;
            return created;
        };
        auto read = repository<T>::entity_read::assume_absent;
        auto started = co_await start_with_write(options, repo, std::move(entity), if_absent, read,
                                                 def, params...);
        if (!started) co_return unexpected(std::move(started).error());
        using result = created_and_started<typename definition<H>::result_type>;
        co_return result{std::move(*started), created};
    }
    ///@}

  private:
    template <model T, class Change, auto H, class... P>
    asio::awaitable<expected<handle<typename definition<H>::result_type>, model_error>>
    start_with_write(const start_options& options, repository<T>& repo, keel::ref<T> entity,
                     Change& change, typename repository<T>::entity_read read,
                     const definition<H>& def, P... params) {
        auto id = def.instance_id(params...);
        auto name = std::string(def.name());
        auto encoded = def.encode_params(params...);
        auto where = repo.docs().address(model_traits<T>::name, entity.id());
        if (where && !writes_documents(*where)) where.reset();
        auto with_write =
            [&](std::optional<document_write> write) -> asio::awaitable<std::optional<bool>> {
            std::vector<document_write> documents;
            if (write) documents.push_back(std::move(*write));
            bool written =
                co_await start_instance(name, id, encoded, std::move(documents), options);
            co_return written ? std::optional<bool>(true) : std::nullopt;
        };
        auto plain = [&]() -> asio::awaitable<bool> {
            std::vector<document_write> none;
            co_await start_instance(name, id, encoded, std::move(none), options);
            co_return true;
        };
        auto done = co_await signals::update_with_step(repo, entity, change, std::move(where),
                                                       with_write, plain, read);
        if (!done) co_return unexpected(std::move(done).error());
        co_return handle<typename definition<H>::result_type>(*this, std::move(id));
    }

  public:
    /// start_instance with entity documents written in the same step (update_and_start): false
    /// when one changed or is locked, and then nothing was written or started.
    asio::awaitable<bool> start_instance(std::string definition, std::string id,
                                         nlohmann::json params,
                                         std::vector<document_write> documents,
                                         start_options options);

    /// Emits through this engine (signals::emitter): fans the signal out to the subscribed
    /// instances and wakes those waiting for it. May be called from any thread.
    asio::awaitable<signals::emit_result> emit(signals::emit_request request) override;
    /// Whether an emit can write documents at `where` with its fan-out (the store's
    /// writes_documents: signal::update_and_emit).
    bool writes_documents(const document_address& where) const override;
    /// Attaches a group that no registered process injects (so that it can emit).
    void attach(signals::signal_group& group) { group.attach(*this); }
    /// Records which signals of `groups` instances of `definition` subscribe to (add() calls
    /// it); `models` are the model names of the definition's parameters.
    void subscribe(const std::string& definition, const std::vector<std::string_view>& models,
                   const std::vector<signals::signal_group*>& groups);

    ///@{
    /// Delivers a signal to an instance's inbox and wakes it if it waits for it. An empty key
    /// means no idempotency (every call delivers); a key is scoped to `path`
    /// (signals::scoped_key).
    /// (emit fans a signal out to its subscribers; deliver sends it to one instance.)
    asio::awaitable<delivery> deliver(std::string instance, std::string path,
                                      nlohmann::json payload, std::string key);
    asio::awaitable<delivery> deliver(std::string instance, std::string path,
                                      nlohmann::json payload) {
        return deliver(std::move(instance), std::move(path), std::move(payload), std::string());
    }
    ///@}

    // ---- requests and published state (keel/process/request.hpp) ----
    ///@{
    /// Sends a request to `path` of the instance (a signal it takes with context::receive)
    /// and waits for its answer (context::reply): the value, or why there is none. Any thread.
    /// No default argument, and name the options before the co_await (g++ 12 mishandles
    /// braced temporaries in a full-expression that co_awaits: docs/architecture.md,
    /// "Toolchain traps"):
    /// @code
    ///   keel::process::ask_options once{.timeout = 5s, .id = key};
    ///   auto answer = co_await eng.ask(id, "/cancel", body, once);
    /// @endcode
    asio::awaitable<expected<nlohmann::json, ask_error>> ask(std::string instance, std::string path,
                                                             nlohmann::json body,
                                                             ask_options options);
    asio::awaitable<expected<nlohmann::json, ask_error>> ask(std::string instance, std::string path,
                                                             nlohmann::json body) {
        return ask(std::move(instance), std::move(path), std::move(body), ask_options());
    }
    ///@}
    /// The instance's latest value published under `name` (context::publish); nullopt when
    /// it published none or does not exist.
    asio::awaitable<std::optional<nlohmann::json>> published(std::string instance,
                                                             std::string name);

    // ---- queues (keel/process/queue.hpp) ----
    /// Registers a queue with this engine: its part 0 admits the queue's instances from run()
    /// on (every worker that registers it admits; the store keeps one count for all). Before
    /// run(). std::invalid_argument for a bad queue (check(queue)) or a second registration
    /// of the name.
    void add_queue(const queue& q);
    ///@{
    /// Starts an instance on the queue: created at once (start's idempotence holds) and
    /// `queued` until admitted, then its handler runs. The handle names the instance that
    /// does the work: another one when `options.dedup` names an instance queued or running
    /// (enqueue the same definition under one dedup id). std::invalid_argument for a queue
    /// not registered or bad options. Any thread. Name the options before the co_await
    /// (g++ 12: docs/architecture.md, "Toolchain traps").
    template <auto H, class... P>
    asio::awaitable<handle<typename definition<H>::result_type>> enqueue(const queue& q,
                                                                         enqueue_options options,
                                                                         const definition<H>& def,
                                                                         P... params) {
        auto id = def.instance_id(params...);
        auto doing = co_await enqueue_instance(q.name, std::move(options), std::string(def.name()),
                                               std::move(id), def.encode_params(params...));
        co_return handle<typename definition<H>::result_type>(*this, std::move(doing));
    }
    template <auto H, class... P>
    asio::awaitable<handle<typename definition<H>::result_type>> enqueue(const queue& q,
                                                                         const definition<H>& def,
                                                                         P... params) {
        return enqueue(q, enqueue_options(), def, std::move(params)...);
    }
    ///@}
    /// enqueue by name, with the instance id and the parameters as stored: the id of the
    /// instance that does the work.
    asio::awaitable<std::string> enqueue_instance(std::string queue, enqueue_options options,
                                                  std::string definition, std::string id,
                                                  nlohmann::json params);
    /// The queues registered with this engine, by name.
    std::vector<queue> queues() const;
    /// A registered queue's depth and admitted instances, in all and for its first `top`
    /// partitions by name; nullopt for a queue this engine does not know.
    asio::awaitable<std::optional<queue_state>> describe_queue(std::string name, std::size_t top);

    // ---- schedules (keel/process/schedule.hpp) ----
    /// Declares schedule `options.name`, whose ticks start `def` with `params` and the tick
    /// (the handler's last parameter, a std::string): created when absent, changed to this
    /// declaration when declared otherwise. std::invalid_argument naming the schedule and the
    /// field for a bad name, expression, zone or window, or a definition not registered.
    template <auto H, class... P>
    requires(definition<H>::template accepts<P..., std::string>()) asio::awaitable<void> schedule(
        schedule_options options, const definition<H>& def, P... params) {
        return schedule_named(std::move(options), std::string(def.name()),
                              definition<H>::encode_params(params...));
    }
    /// schedule() by the definition's name, with the parameters as stored (without the tick).
    asio::awaitable<void> schedule_named(schedule_options options, std::string definition,
                                         nlohmann::json params);
    /// No ticks until resumed; the ticks of the pause are not caught up. Like the calls
    /// below, a signal to the schedule's process: the delivery says whether it exists
    /// (no_instance: no such schedule).
    asio::awaitable<delivery> pause_schedule(std::string name);
    /// Ticks again from now on, after pause_schedule (the ticks of the pause are skipped).
    asio::awaitable<delivery> resume_schedule(std::string name);
    /// A tick now (the overlap policy applies).
    asio::awaitable<delivery> trigger_schedule(std::string name);
    /// Runs the calendar's ticks in [from, to] that have not run (each tick's instance exists
    /// once), all at once and detached, whatever the overlap policy: e.g. after an outage
    /// longer than the catch-up window. std::invalid_argument naming the field when from is
    /// after to or the range holds more than max_backfill ticks.
    asio::awaitable<delivery> backfill_schedule(std::string name, time_point from, time_point to);
    /// Ends the schedule; instances its ticks started run on.
    asio::awaitable<action_result> delete_schedule(std::string name);
    /// Whether `definition` is registered with this engine.
    bool runs(const std::string& definition) const;

    /// The instance's status and result as stored, or nullopt when there is no such instance.
    asio::awaitable<std::optional<instance_info>> describe(std::string id);
    /// The instance's status as stored; std::invalid_argument when there is no such
    /// instance.
    asio::awaitable<instance_status> status(std::string id);
    /// Waits until the instance is final: its result as JSON, or why there is none (no such
    /// instance; failed or cancelled; status running when the engine stopped meanwhile).
    asio::awaitable<expected<nlohmann::json, failure>> wait(std::string id);
    /// Cancels an instance that is not final: its handler is abandoned (destructors run), its
    /// timers cancelled. Refused when it is final, unknown, or owned by another worker.
    asio::awaitable<action_result> cancel(std::string id);
    /// Runs again an instance parked by a journal mismatch (after the code was fixed).
    asio::awaitable<action_result> resume(std::string id);
    /// Runs a final or parked instance again from journal position `from` (a failed one
    /// after a fix, a completed one whose outcome was wrong, a cancelled one): entries
    /// 0..from-1 are kept and replayed, the rest of the old journal is kept for audit, and
    /// the handler continues live from there (steps after the position run again; signals
    /// they had consumed are delivered again; timers start anew). See store::rewind.
    asio::awaitable<action_result> retry(std::string id, std::uint64_t from);
    /// retry() without giving back the consumed signals whose inbox ids are in `left_out` (a
    /// signal that made the handler fail): each must be one the retry would give back, i.e.
    /// consumed by a journal entry at or after `from` (else unknown_signal). Recorded in the
    /// instance's retry_record.
    asio::awaitable<action_result> retry(std::string id, std::uint64_t from,
                                         std::vector<std::uint64_t> left_out);
    /// Takes one signal out of an instance's inbox, while no worker runs the instance
    /// (suspended without a lease, or final; else wrong_state or owned), and answers it.
    /// Recorded in instance_snapshot::removed. See store::remove_signal.
    asio::awaitable<expected<inbox_entry, refusal>> remove_signal(std::string id,
                                                                  std::uint64_t inbox_id);

    /// Starts the wake-up loop (due timers, signals, expired leases, the heartbeat), which
    /// first opens the store (store::prepare), again after each failure with the outage
    /// backoff, until its Redis answers (store_open()). stop() ends it, drops every instance
    /// from memory without writing to it, and withdraws the worker's announcement (best
    /// effort: it also expires by itself).
    void run();
    /// Ends what run() started (see run()); waits for nothing.
    void stop();
    /// Looks for due work now (after a clock jump or another worker's failure).
    void poke();
    /// Stops announcing this worker and removes its announcement, at the start of a graceful
    /// shutdown: while it drains, other workers no longer count on it for the versions it
    /// runs. It goes on running what it holds until stop().
    asio::awaitable<void> withdraw();

    /// The live workers sharing this engine's store and the versions they run.
    asio::awaitable<std::vector<worker_record>> workers();

    /// Why the store is in question, or nullopt (docs/architecture.md, "A store that comes
    /// back empty"). At each heartbeat the worker compares the store's identity record with the
    /// one it has been using; when the record is gone or another one is in its place and no
    /// operator confirmed it, the engine starts nothing (start() throws
    /// keel::unavailable_error: HTTP 503) and claims no work, and says so at critical level,
    /// until the record is the known one again or an operator confirms the store. Any thread.
    std::optional<std::string> store_in_question() const;
    /// Whether the engine has opened its store (store::prepare), which run() begins and
    /// repeats, backing off, until the store's Redis answers: a service is not ready before.
    /// Any thread.
    bool store_open() const;
    /// An operator accepts the store as it is (`keel store confirm`): its record is made when
    /// there is none and marked confirmed, so that every worker trusts it at its next
    /// heartbeat, this one at once. Returns the store's id.
    asio::awaitable<std::string> confirm_store();

    /// The steps this worker is executing for an instance (none when another worker holds
    /// it, or it is not running).
    asio::awaitable<std::vector<step_progress>> steps_in_flight(std::string id);

    /// The engine's figures as Prometheus text (see metrics.hpp), with the store's counts of
    /// instances by status. May be awaited from any executor.
    asio::awaitable<std::string> render_metrics();

    /// The instances held in memory now, summed over the parts.
    std::size_t hot_count() const noexcept;
    std::size_t parts() const noexcept;  ///< executors the engine runs on
    /// This worker's name (engine_options::worker, or the random one it got).
    const std::string& worker() const noexcept;
    /// The clock the engine runs on.
    keel::clock& clock() noexcept;

    struct impl;

  private:
    void add_schedules();  // the schedules' own definition, on every engine
    std::shared_ptr<impl> owner_of(const std::string& id) const;
    std::shared_ptr<impl> part_for(const asio::any_io_executor& caller) const;

    std::vector<std::shared_ptr<impl>> parts_;
};

template <class R>
asio::awaitable<instance_status> handle<R>::status() const {
    return engine_->status(id_);
}

template <class R>
asio::awaitable<expected<R, failure>> handle<R>::wait() const {
    auto r = co_await engine_->wait(id_);
    if (!r) co_return unexpected(std::move(r.error()));
    try {
        if constexpr (std::is_void_v<R>)
            co_return expected<R, failure>();
        else
            co_return r->template get<R>();
    } catch (const std::exception& e) {
        co_return unexpected(
            failure{instance_status::failed, std::string("result does not decode: ") + e.what()});
    }
}

template <class R>
asio::awaitable<bool> handle<R>::cancel() const {
    auto done = co_await engine_->cancel(id_);
    co_return done.has_value();
}

}  // namespace keel::process
