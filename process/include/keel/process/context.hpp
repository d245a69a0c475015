#pragma once

/// @file
/// keel::process::context: what a handler uses to do anything durable. Every operation is
/// awaited (`co_await ctx.run(...)`), gets the next operation number, and is recorded in the
/// journal when it completes, so a replay returns the recorded result without doing it again.
///
/// @code
///   run(name, fn[, policy])    a side effect; fn returns T or asio::awaitable<T> (T JSON-able);
///                              without a policy, the definition's (definition::retry)
///   sleep(d)                   pauses: a durable timer, awaited at once ("sleep" in the journal)
///   timer(d) / timer_at(t)     a durable timer as a value, to race: auto expiry = ctx.timer(72h,
///                              "payment timeout"); ... r.is(expiry) ("timer" by default)
///   wait<T>(path) / wait(sig)  the oldest signal with this path in the instance's inbox;
///                              .or_timeout(d) gives std::optional<T> instead of waiting forever
///   now() / random() / uuid()  values recorded so replay sees the same
///   race / any / all           combinators over operations, helpers and spawned branches
///   spawn(helper(...))         a child branch running concurrently inside the instance
///   update(name, repo, ref, f) a step that changes one entity, written with the step's commit
///   lock(repo, ref)            an entity under its Redis lease, as held<T> (see below)
///   patched(change)            whether this instance runs a code change here (not awaited)
///   start(def, params...)      a child process, started once: child<R> (keel/process/child.hpp)
///   join(child) / call(...)    a child's result (child_failed when it failed or was cancelled);
///                              call = start + join
///   deliver(id, path, payload) a signal to another instance, exactly once
///   emit(signal, args...)      a typed signal to its subscribers, exactly once
///   receive(path)              the oldest request sent to this path (engine::ask), as a wait;
///   reply(req, v) / refuse     its answer, stored for the asker once (keel/process/request.hpp)
///   publish(name, value)       a value the outside reads without the journal (not awaited)
///   continue_as_new(params)    the run ends and starts over on an empty journal
///   http(name, client, req)    a step that makes an HTTP call, its response journaled, with an
///                              Idempotency-Key; declared here, defined in target
///                              keel::process_http: include keel/process/http_call.hpp
/// @endcode
///
/// sleep and timer are the same operation under two words, a verb for the step and a noun for
/// the race arm; their default names differ and are journaled, so neither replaces the other.
/// Signals are sent to an instance with engine::deliver, fanned out with emit, and waited for
/// with wait: one word each.
///
/// A context belongs to one instance; handlers take it by reference. Not thread-safe.
/// Below the context: the values handlers hold (held<T>, branch<T>, race_result<T...>). The
/// awaiters the operations return are machinery, in detail/operations.hpp and
/// detail/combinators.hpp; the exceptions are in errors.hpp.

#include <functional>
#include <keel/process/detail/combinators.hpp>
#include <keel/process/detail/operations.hpp>
#include <keel/process/errors.hpp>
#include <keel/process/request.hpp>
#include <keel/process/retry.hpp>
#include <keel/signals/signal.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace keel::http {
class client;
struct client_request;
}  // namespace keel::http

namespace keel::process {

template <auto Handler>
class definition;

// keel/process/http_call.hpp (target keel::process_http): named here only, so that the
// process module itself does not depend on keel::http.
class http_op;
struct http_call_options;
/// Makes a ctx.http request from the call's idempotency key (keel/process/http_call.hpp), for
/// a partner that wants the key in the body too.
using http_request_builder = std::function<http::client_request(const std::string& key)>;

/// What a handler uses to do anything durable (see the file's description). One per
/// instance; handlers take it by reference. Not thread-safe.
class context {
  public:
    /// The context of the instance `rt` runs (the engine makes it).
    explicit context(detail::runtime& rt) noexcept : rt_(&rt) {}
    context(const context&) = delete;
    context& operator=(const context&) = delete;

    /// The instance id, e.g. "order/order-123/fulfillment".
    const std::string& id() const noexcept { return rt_->id(); }

    ///@{
    /// A step named `name`: a side effect. `fn` returns T or asio::awaitable<T> (T JSON-able);
    /// it runs live only, retried by `policy`, and its result is journaled, so a replay returns
    /// it without running `fn`. co_await gives the T, or throws step_failed when the step
    /// failed for good. A step without a policy retries with the definition's
    /// (definition::retry). `.limited(l)` makes each attempt take a permit of limit `l` first
    /// (keel/process/limiter.hpp).
    template <class F>
    requires std::invocable<F&> run_op<F> run(std::string name, F fn) {
        return run_op<F>(*rt_, std::move(name), std::move(fn), step_policy_);
    }
    template <class F>
    requires std::invocable<F&> run_op<F> run(std::string name, F fn, retry_policy policy) {
        return run_op<F>(*rt_, std::move(name), std::move(fn), std::move(policy));
    }
    ///@}

    ///@{
    /// A step that changes one entity of `repo`: `change` as repository<T>::update takes it
    /// (bool(std::optional<T>&), false for "nothing to write"; it may run more than once, so
    /// it must depend only on the entity it is given). Returns whether it wrote; journaled as
    /// a run step of this name, so it replays like one.
    ///
    /// @code
    ///   co_await ctx.update("dispatch", orders, order_ref, [](std::optional<order>& o) {
    ///       if (!o || o->status == "shipped") return false;
    ///       o->status = "shipped";
    ///       return true;
    ///   });
    /// @endcode
    ///
    /// Where the process store can write the entity's document (redis_store and
    /// redis_documents on one Redis server: the application root's), the write is part of
    /// the commit that records the step: both happen or neither, in one round trip, and the
    /// write is made only if the entity is still as `change` saw it and unlocked (otherwise
    /// the instance runs the step again from the entity as it is now, a little later).
    /// Elsewhere (a cluster, memory stores in tests) the step writes with repo.update() and
    /// is then committed as ctx.run's are: a crash in between runs `change` again.
    template <model T, entity_change<T> Change>
    update_op<T, Change> update(std::string name, repository<T>& repo, keel::ref<T> entity,
                                Change change) {
        return update_op<T, Change>(*rt_, std::move(name), repo, std::move(entity),
                                    std::move(change), step_policy_);
    }
    template <model T, entity_change<T> Change>
    update_op<T, Change> update(std::string name, repository<T>& repo, keel::ref<T> entity,
                                Change change, retry_policy policy) {
        return update_op<T, Change>(*rt_, std::move(name), repo, std::move(entity),
                                    std::move(change), std::move(policy));
    }
    ///@}

    ///@{
    /// A step that sends an HTTP request with `client` and returns the response, journaled
    /// (replay returns it without sending again): see keel/process/http_call.hpp, which must be
    /// included, and target keel::process_http, which must be linked. `build` makes the
    /// request from the call's Idempotency-Key, for a partner that wants it in the body too.
    http_op http(std::string name, http::client& client, http::client_request request);
    http_op http(std::string name, http::client& client, http::client_request request,
                 http_call_options options);
    http_op http(std::string name, http::client& client, http_request_builder build);
    http_op http(std::string name, http::client& client, http_request_builder build,
                 http_call_options options);
    ///@}

    ///@{
    /// Starts a child process (keel/process/child.hpp): a step named `start <child id>`,
    /// exactly once however often it replays or runs again. Returns the child, to join.
    /// `options`: what becomes of it when this instance ends, and whether it is detached or
    /// queued (child_options).
    template <auto H, class... P>
    requires(definition<H>::template accepts<P...>())
        durable<child<typename definition<H>::result_type>> start(const definition<H>& def,
                                                                  P... params) {
        return start(child_options{}, def, std::move(params)...);
    }
    template <auto H, class... P>
    requires(definition<H>::template accepts<P...>())
        durable<child<typename definition<H>::result_type>> start(child_options options,
                                                                  const definition<H>& def,
                                                                  P... params) {
        auto id = def.instance_id(params...);  // the arguments used now, not kept
        auto started =
            start_child(std::string(def.name()), id, def.encode_params(params...), options);
        return started_child<typename definition<H>::result_type>(std::move(started),
                                                                  std::move(id));
    }
    ///@}
    /// Delivers a signal to another instance's inbox (engine::deliver) as a step: exactly
    /// once, also when this worker dies between the delivery and the step's commit (the key
    /// is this instance's id and the step's number, so a step run again delivers a
    /// duplicate, which the receiving inbox drops). True when the instance exists and is not
    /// final.
    durable<bool> deliver(std::string instance, std::string path, nlohmann::json payload);

    /// Emits a typed signal to every instance subscribed to it (signal::emit, with the same
    /// arguments: its entities, then its payload) as a step: exactly once, also when this
    /// worker dies between the emit and the step's commit (the key is this instance's id
    /// and the step's number; a step run again is a duplicate the emitter drops). Returns how
    /// many instances it reached. The signal's group must outlive the instance and be
    /// attached to an engine (injected into some process, or engine::attach).
    ///
    /// @code
    ///   co_await ctx.emit(warehouse.pick_requested, order_ref, pick_list);
    /// @endcode
    template <class P, class... M, class... A>
    durable<std::size_t> emit(const signals::signal<P, M...>& s, A... args) {
        // Read just before the step takes its seq, as for deliver().
        auto key = id() + "#" + std::to_string(rt_->upcoming_seq());
        auto body = [&s, key, args...] { return emit_body(s, key, args...); };
        auto step = run("emit " + std::string(s.pattern()), std::move(body));
        auto reached = co_await step;
        co_return reached.template get<std::size_t>();
    }

    /// The oldest request sent to `path` (engine::ask): a wait for the signal that carries it,
    /// so it races like one. A plain signal at the path is a request with an empty id, which
    /// nobody awaits.
    durable<request> receive(std::string path);
    /// Answers the request: a step (`reply <request id>`) that stores the answer for the
    /// asker. Exactly once per request however often the step runs.
    durable<void> reply(const request& r, nlohmann::json value);
    /// Answers it with a refusal (the asker's ask_error::refused, with `why`): a validator's
    /// way to turn a request down and go on waiting.
    durable<void> refuse(const request& r, std::string why);

    /// Published state: the latest value under `name` that the outside may read without the
    /// journal (engine::published, the admin instance view, `keel show`), e.g. a flow's
    /// progress. Written with the instance's next commit; not awaited. Replayed, it writes
    /// nothing: a later value may have replaced it.
    template <class T>
    void publish(std::string name, const T& value) {
        rt_->publish(std::move(name), nlohmann::json(value));
    }

    /// Continue as new, for a handler that loops for ever (a schedule, a subscription that
    /// renews each month): the run ends here and the handler runs again from the top with
    /// `params` (as the definition encodes them, definition::encode_params) on an empty
    /// journal, so the journal stays bounded. Signals in the inbox, published values and the
    /// retry history stay; timers and waits do not, and children are neither closed nor
    /// joined (start them detached or with parent_close::abandon). A step ("continue as new")
    /// first records whether every live worker can run the new start (store_level_restart);
    /// while one of an earlier Keel build is alive it returns and the handler goes on. Call it
    /// in the handler's own flow: from a spawned branch it ends the run only when the
    /// handler awaits that branch.
    durable<void> continue_as_new(nlohmann::json params);
    /// How many operations this run has recorded so far (the journal's length once
    /// replayed): what a looping handler compares with its bound before continue_as_new.
    std::uint64_t journal_length() const noexcept { return rt_->upcoming_seq(); }

    /// start() by the definition's name, with the child's id and parameters as stored.
    durable<void> start_child(std::string definition, std::string id, nlohmann::json params,
                              child_options options);
    /// The child's result once it completes; child_failed when it failed or was cancelled. A
    /// wait for the signal the child sends when it ends, so it races like one.
    template <class R>
    durable<R> join(child<R> c) {
        auto arrived = wait<nlohmann::json>(child_path(c.id()));
        auto outcome = co_await arrived;
        rt_->note_joined(c.id());
        co_return detail::child_result<R>(c.id(), outcome);
    }
    /// start, then join.
    template <auto H, class... P>
    requires(definition<H>::template accepts<P...>())
        durable<typename definition<H>::result_type> call(const definition<H>& def, P... params) {
        return joined(start(def, std::move(params)...));
    }

    /// Pauses for `d`: a durable timer, awaited at once, journaled as `name` ("sleep" by
    /// default). The same operation as timer(); see the file's description.
    timer_op sleep(duration d, std::string name = "sleep") {
        return timer_op(*rt_, d, std::move(name));
    }
    /// A durable timer due in `d`, as a value to race (auto expiry = ctx.timer(72h, "payment
    /// timeout"); ... r.is(expiry)), or to await; journaled as `name` ("timer" by default).
    timer_op timer(duration d, std::string name = "timer") {
        return timer_op(*rt_, d, std::move(name));
    }
    /// A durable timer due at `at` (at once when it has passed): for deadlines computed once,
    /// e.g. from ctx.now(), without arithmetic at every wait.
    timer_op timer_at(time_point at, std::string name = "timer") {
        return timer_op(*rt_, at, std::move(name));
    }

    /// The oldest signal with this path in the instance's inbox, consumed: its payload as a
    /// T (bad_signal_payload when it does not decode). `.or_timeout(d)` gives
    /// std::optional<T> instead of waiting forever.
    template <class T = nlohmann::json>
    signal_op<T> wait(std::string path) {
        return signal_op<T>(*rt_, std::move(path));
    }

    /// Waits for a typed signal addressed to this instance: the parameters the process binds
    /// by model type come from its own parameters; any others are given here, as ref<M>
    /// (ctx.wait(shipping.parcel_delivered, parcel)). Returns the payload (nothing for void).
    template <class P, class... M, class... X>
    signal_op<P> wait(const signals::signal<P, M...>& s, const keel::ref<X>&... others) {
        return signal_op<P>(*rt_, signal_path(s, {{keel::model_traits<X>::name, others.id()}...}));
    }

    /// The concrete path of signal `s` for this instance (see wait()); std::logic_error when a
    /// parameter is neither bound nor given.
    std::string signal_path(const signals::signal_base& s,
                            std::vector<std::pair<std::string_view, std::string>> others) const;
    /// Internal: records a model-typed parameter of the instance, for binding signals.
    void bind_entity(std::string_view model, std::string id) {
        entities_.emplace_back(model, std::move(id));
    }
    /// Internal: the policy of steps that pass none (the definition's).
    void set_step_policy(retry_policy policy) { step_policy_ = std::move(policy); }

    /// Changing code under running instances (docs/versioning.md). patched(change) is true
    /// where this instance runs the new code at this point: it started with it, or it reaches
    /// this point for the first time with it (a marker is recorded); false where its journal
    /// shows it passed here, or waits here, with the code before the change. Replay answers
    /// the same, so both branches stay valid until the old instances have finished:
    ///
    /// @code
    ///   if (ctx.patched("carrier-v2"))
    ///       co_await ctx.run("book carrier", [&] { return carriers.book_v2(order); });
    ///   else
    ///       co_await ctx.run("dispatch", [&] { return warehouse.dispatch(order); });
    /// @endcode
    bool patched(std::string_view change) { return rt_->patched(change); }
    /// Once no instance runs the old branch any more: drop it and the patched() call, and put
    /// deprecate_patch(change) where the call was, so that instances that recorded the marker
    /// still replay past it. New instances record nothing; when those that did have finished,
    /// the line can go too.
    void deprecate_patch(std::string_view change) { rt_->deprecate_patch(change); }

    /// The engine clock's time, recorded: a replay sees the time of the first execution.
    immediate_op<time_point> now();
    /// A random 64-bit number, recorded. From the instance's own generator (seeded by the
    /// engine), not for secrets.
    immediate_op<std::uint64_t> random();
    /// A random (version 4) UUID as text, recorded; from the same generator as random(), so
    /// not for secrets.
    immediate_op<std::string> uuid();

    /// The first arm to finish wins (its failure too); the others are cancelled. Recorded.
    /// A typed signal is an arm too: ctx.race(payments.received, ctx.timer(3d)), and then
    /// r.is(payments.received) / r.get(payments.received).
    template <class... A>
    auto race(A&&... arms) {
        return detail::combinator<detail::combine::race, detail::arm_value_t<A>...>(
            *rt_, {detail::tag_of<A>(arms)...}, detail::make_arm(adapt(std::forward<A>(arms)))...);
    }
    /// The first arm to succeed wins; fails with the last error when all fail. Recorded.
    template <class... A>
    auto any(A&&... arms) {
        return detail::combinator<detail::combine::any, detail::arm_value_t<A>...>(
            *rt_, {detail::tag_of<A>(arms)...}, detail::make_arm(adapt(std::forward<A>(arms)))...);
    }
    /// Every arm's value, as a tuple; the first failure cancels the rest and is rethrown.
    template <class... A>
    auto all(A&&... arms) {
        return detail::combinator<detail::combine::all, detail::arm_value_t<A>...>(
            *rt_, {detail::tag_of<A>(arms)...}, detail::make_arm(adapt(std::forward<A>(arms)))...);
    }

    /// The entity `entity` of `repo` (a dependency of the handler) under its lock, as
    /// held<T>: see held<T> for the lease's life across suspensions and replays. The lock is
    /// tried once (waiting up to the repository's lock_wait); with a policy, retried like a
    /// run step. A lock not obtained throws step_failed ("lock order/o-1").
    ///@{
    template <model T>
    lock_op<T> lock(repository<T>& repo, keel::ref<T> entity) {
        return lock_op<T>(*rt_, repo, std::move(entity), retry_policy::once());
    }
    template <model T>
    lock_op<T> lock(repository<T>& repo, keel::ref<T> entity, retry_policy policy) {
        return lock_op<T>(*rt_, repo, std::move(entity), std::move(policy));
    }
    ///@}

    /// Starts `child` (a helper coroutine) as a branch running concurrently inside the
    /// instance, deterministically interleaved; co_await the branch to join it, or pass it to
    /// race/any/all.
    template <class T>
    branch<T> spawn(durable<T> child) {
        auto state = std::make_unique<detail::branch_state<T>>(std::move(child));
        rt_->spawn(*state);
        return branch<T>(std::move(state));
    }

  private:
    template <class R>
    static durable<child<R>> started_child(durable<void> start, std::string id) {
        co_await std::move(start);
        co_return child<R>(std::move(id));
    }
    template <class P, class... M, class... A>
    static asio::awaitable<nlohmann::json> emit_body(const signals::signal<P, M...>& s,
                                                     std::string key, A... args) {
        signals::emit_options once{.key = std::move(key)};
        auto sent = co_await s.emit(std::move(args)..., std::move(once));
        co_return nlohmann::json(sent.reached);
    }
    template <class R>
    durable<R> joined(durable<child<R>> started) {
        auto c = co_await std::move(started);
        auto result = join(std::move(c));
        co_return co_await std::move(result);
    }

    template <class A>
    decltype(auto) adapt(A&& a) {
        if constexpr (detail::is_signal<std::remove_cvref_t<A>>)
            return wait(a);
        else if constexpr (detail::op_descriptor<A>)
            return std::move(a);  // an operation passed by name is consumed by the arm
        else
            return std::forward<A>(a);
    }

    detail::runtime* rt_;
    std::vector<std::pair<std::string_view, std::string>> entities_;
    retry_policy step_policy_;
};

/// An entity locked by the handler with ctx.lock: the entity as read under its lease, and the
/// lease while the instance runs. Move-only; destroying it (or release()) gives the lease up.
///
/// The lease is never held while the instance is suspended: the engine releases it before
/// every suspension, and when the instance resumes live it takes it again and reads the
/// entity again, so after a co_await that suspended, value() is the entity's current state
/// ("rehydration"). Code replayed from the journal takes no lock: it sees the recorded
/// states (locked() is false while replaying). Writes are side effects: save() belongs in a
/// ctx.run step, which runs live only:
///
/// @code
///   auto o = co_await ctx.lock(orders, order_ref);          // held<order>
///   co_await ctx.wait(payments.received);                   // lease released meanwhile
///   o->status = "paid";                                     // o: the state after the resume
///   co_await ctx.run("save", [&]() -> asio::awaitable<bool> {
///       co_return (co_await o.save()).has_value();
///   });
/// @endcode
template <model T>
class held {
  public:
    /// Holds the entity of `slot` (machinery: ctx.lock makes it).
    explicit held(std::shared_ptr<detail::entity_slot<T>> slot) : slot_(std::move(slot)) {}
    ///@{
    /// Moves the hold; assigning first gives up the lease this one held.
    held(held&&) noexcept = default;
    held& operator=(held&& other) noexcept {
        if (this != &other) {
            release();
            slot_ = std::move(other.slot_);
        }
        return *this;
    }
    ///@}
    ~held() { release(); }

    /// Which entity is held.
    const keel::ref<T>& entity() const noexcept { return slot_->entity(); }
    /// The entity (nullopt when it does not exist) as read under the lock when it was taken or
    /// last taken again; changes stay local until save(). Throws lock_lost when the lock could
    /// not be taken again at the last resume.
    std::optional<T>& value() { return slot_->value(); }
    ///@{
    /// The entity in value(), which must exist (check value() first when it may not).
    T& operator*() { return *value(); }
    T* operator->() { return &*value(); }
    ///@}

    /// Whether this worker holds the entity's lease right now (false while replaying, when the
    /// lease was lost, and after a failed re-acquisition). Not recorded: branch on it only
    /// inside a run step, never in the handler's own code (a replay would take the other way).
    bool locked() const noexcept { return slot_ && slot_->locked(); }
    /// Whether the lock could not be taken again at the last resume (value() throws).
    bool lost() const noexcept { return slot_ && slot_->failed(); }

    /// Writes value() through the live lease (fenced): model_error::lock_lost when the lease is
    /// not held or was lost. A side effect: call it inside ctx.run.
    asio::awaitable<expected<void, model_error>> save() { return slot_->save(); }

    /// Gives the lease up and stops holding the entity (the destructor does it too).
    void release() noexcept {
        if (slot_) std::exchange(slot_, nullptr)->close();
    }

  private:
    std::shared_ptr<detail::entity_slot<T>> slot_;
};

/// A child branch started with ctx.spawn: runs concurrently with its parent inside the same
/// instance (deterministically interleaved). co_await joins it; destroying the handle cancels
/// it if it has not finished. Pass it to race/any/all by reference.
template <class T>
class [[nodiscard]] branch {
  public:
    using value_type = T;  ///< what joining it gives

    /// The branch of `s` (machinery: ctx.spawn makes it).
    explicit branch(std::unique_ptr<detail::branch_state<T>> s) : state_(std::move(s)) {}
    ///@{
    /// Moves the handle; the branch runs on. (Assigning over a handle cancels its branch if
    /// it has not finished, as destroying it does.)
    branch(branch&&) noexcept = default;
    branch& operator=(branch&&) noexcept = default;
    ///@}

    /// Whether the branch has finished (returned, failed or been cancelled).
    bool done() const noexcept { return state_->done; }
    /// Cancels the branch and the branches it spawned, unless it has finished; joining it then
    /// throws branch_cancelled.
    void cancel() noexcept { state_->rt->cancel_branch(*state_); }

    ///@{
    /// The awaiter interface: co_await joins the branch, giving its value or rethrowing its
    /// exception (branch_cancelled when it was cancelled).
    bool await_ready() const noexcept { return state_->done; }
    void await_suspend(std::coroutine_handle<> h) noexcept {
        state_->joiner = h;
        state_->joiner_branch = state_->rt->current_branch();
    }
    T await_resume() {
        if constexpr (std::is_void_v<T>)
            state_->take();
        else
            return state_->take();
    }
    ///@}

    /// Machinery: the branch's state, for the combinators.
    detail::branch_state<T>* state() noexcept { return state_.get(); }

  private:
    std::unique_ptr<detail::branch_state<T>> state_;
};

/// The outcome of race/any: which arm won and its value.
template <class... T>
class race_result {
  public:
    /// Arm `I` won with value `v` (machinery: the combinator makes it).
    template <std::size_t I, class V>
    race_result(std::in_place_index_t<I> i, V&& v) : value_(i, std::forward<V>(v)) {}

    /// The winning arm's position among the arms, from 0.
    std::size_t index() const noexcept { return value_.index(); }
    /// Whether arm `I` (from 0) won.
    template <std::size_t I>
    bool is() const noexcept {
        return value_.index() == I;
    }
    ///@{
    /// The value of arm `I`, which must have won (std::bad_variant_access otherwise); a void
    /// arm's value is std::monostate.
    template <std::size_t I>
    auto& get() {
        return std::get<I>(value_);
    }
    template <std::size_t I>
    const auto& get() const {
        return std::get<I>(value_);
    }
    ///@}

    /// Whether this signal's arm won: r.is(payments.received).
    bool is(const signals::signal_base& s) const noexcept { return tags_[index()] == &s; }
    /// Whether this arm, passed to the combinator by name, won: r.is(expiry) for
    /// `auto expiry = ctx.timer(72h, "payment timeout")`, r.is(b) for a branch b.
    template <class A>
    requires(!std::derived_from<A, signals::signal_base>) bool is(const A& arm) const noexcept {
        return tags_[index()] == &arm;
    }
    /// The payload of the winning signal arm; std::logic_error if that signal did not win.
    template <class P, class... M>
    detail::slot_t<P>& get(const signals::signal<P, M...>& s) {
        if (!is(s))
            throw std::logic_error("race: signal " + std::string(s.pattern()) + " did not win");
        detail::slot_t<P>* out = nullptr;
        find_value(out, std::index_sequence_for<T...>{});
        return *out;
    }

    /// The arms' tags (a signal's address for a signal arm), set by the combinator.
    void set_tags(const std::array<const void*, sizeof...(T)>& tags) noexcept { tags_ = tags; }

  private:
    template <class V, std::size_t... I>
    void find_value(V*& out, std::index_sequence<I...>) {
        ((I == value_.index() ? take_if<I>(out) : void()), ...);
    }
    template <std::size_t I, class V>
    void take_if(V*& out) {
        if constexpr (std::is_same_v<std::variant_alternative_t<I, decltype(value_)>, V>)
            out = &std::get<I>(value_);
    }

    std::variant<detail::slot_t<T>...> value_;
    std::array<const void*, sizeof...(T)> tags_{};
};

}  // namespace keel::process
