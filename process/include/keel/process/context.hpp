#pragma once

// keel::process::context: what a handler uses to do anything durable. Every operation is
// awaited (`co_await ctx.run(...)`), gets the next operation number, and is recorded in the
// journal when it completes, so a replay returns the recorded result without doing it again.
//
//   run(name, fn, policy)   a side effect; fn returns T or asio::awaitable<T> (T JSON-able)
//   sleep(d) / timer(d)     a durable timer (timer() reads better as a race arm)
//   wait<T>(path)           the oldest signal with this path in the instance's inbox
//   now() / random() / uuid()  values recorded so replay sees the same
//   race / any / all        combinators over operations, helpers and spawned branches
//   spawn(helper(...))      a child branch running concurrently inside the instance
//   lock(repo, ref)         an entity under its Redis lease, as held<T> (see below)
//
// A context belongs to one instance; handlers take it by reference. Not thread-safe.

#include <array>
#include <boost/asio/awaitable.hpp>
#include <concepts>
#include <cstddef>
#include <exception>
#include <keel/framework/repository.hpp>
#include <keel/process/detail/runtime.hpp>
#include <keel/process/durable.hpp>
#include <keel/process/journal.hpp>
#include <keel/process/retry.hpp>
#include <keel/signals/signal.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace keel::process {

// Thrown into the handler when a signal's payload does not decode as the awaited type
// (identically on replay: the signal was consumed and stays recorded).
class bad_signal_payload : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

// Thrown when joining a branch that was cancelled.
class branch_cancelled : public std::runtime_error {
  public:
    branch_cancelled() : std::runtime_error("branch cancelled") {}
};

namespace detail {

template <class T>
using slot_t = std::conditional_t<std::is_void_v<T>, std::monostate, T>;

template <class T>
struct awaitable_value {
    using type = T;
    static constexpr bool is_awaitable = false;
};
template <class T>
struct awaitable_value<asio::awaitable<T>> {
    using type = T;
    static constexpr bool is_awaitable = true;
};

template <class T>
bool decode(const nlohmann::json& j, std::optional<slot_t<T>>& out, std::string& reason) noexcept {
    try {
        if constexpr (std::is_void_v<T>)
            out.emplace();
        else if constexpr (std::is_same_v<T, time_point>)
            out.emplace(duration(j.get<duration::rep>()));  // recorded as a count of ticks
        else
            out.emplace(j.get<T>());
        return true;
    } catch (const std::exception& e) {
        reason = e.what();
        return false;
    }
}

// The message of a failed entry ({"message": ...}), or the recorded value as text.
inline std::string failure_message(const journal_entry& e) {
    if (e.value.is_object() && e.value.contains("message") && e.value["message"].is_string())
        return e.value["message"].get<std::string>();
    return e.value.dump();
}

// Base of the awaiters of operations that may have to wait (run, timer, signal).
class async_op : public op_sink {
  public:
    async_op(async_op&& o) noexcept : rt_(o.rt_) {}  // only before it is awaited
    async_op& operator=(async_op&&) = delete;

  protected:
    explicit async_op(runtime& rt) noexcept : rt_(&rt) {}
    ~async_op() {
        if (pending_) rt_->cancel_op(seq_);
    }

    // true: completed from the journal at once. Otherwise op_ is set when it must wait.
    bool begin(op_kind kind, const std::string& name) {
        seq_ = rt_->next_seq();
        switch (rt_->replay(seq_, kind, name, *this)) {
            case runtime::check::ready:
                return true;
            case runtime::check::parked:
                parked_ = true;
                return false;
            case runtime::check::wait:
                break;
        }
        op_ = &rt_->add_pending(seq_, kind, name, *this);
        pending_ = true;
        return false;
    }
    bool suspend(std::coroutine_handle<> h) noexcept {
        if (!parked_) rt_->set_waiter(seq_, h);
        return true;  // a parked instance is never resumed
    }

    runtime* rt_;
    std::uint64_t seq_ = 0;
    pending_op* op_ = nullptr;
    bool pending_ = false;
    bool parked_ = false;
};

template <class F, class T>
class run_body_impl final : public run_body {
  public:
    explicit run_body_impl(F fn) : fn_(std::move(fn)) {}
    asio::awaitable<nlohmann::json> attempt() override {
        using raw = std::invoke_result_t<F&>;
        if constexpr (awaitable_value<raw>::is_awaitable) {
            if constexpr (std::is_void_v<T>) {
                co_await fn_();
                co_return nlohmann::json();
            } else {
                T value = co_await fn_();
                co_return nlohmann::json(std::move(value));
            }
        } else {
            if constexpr (std::is_void_v<T>) {
                fn_();
                co_return nlohmann::json();
            } else {
                co_return nlohmann::json(fn_());
            }
        }
    }

  private:
    F fn_;
};

}  // namespace detail

// co_await ctx.run(name, fn): returns fn's result, recorded; throws step_failed when it failed
// for good.
template <class F>
class [[nodiscard]] run_op : public detail::async_op {
    using raw = std::invoke_result_t<F&>;

  public:
    using value_type = typename detail::awaitable_value<raw>::type;

    run_op(detail::runtime& rt, std::string name, F fn, retry_policy policy)
        : async_op(rt), name_(std::move(name)), fn_(std::move(fn)), policy_(std::move(policy)) {}
    run_op(run_op&&) noexcept = default;

    bool await_ready() {
        if (begin(op_kind::run, name_)) return true;
        if (op_) {
            op_->body = std::make_shared<detail::run_body_impl<F, value_type>>(std::move(fn_));
            op_->policy = std::move(policy_);
        }
        return false;
    }
    bool await_suspend(std::coroutine_handle<> h) noexcept { return suspend(h); }
    value_type await_resume() {
        if (failed_) throw step_failed(name_, error_);
        if constexpr (!std::is_void_v<value_type>) return std::move(*value_);
    }

    bool accept(const journal_entry& e, std::string& reason) noexcept override {
        pending_ = false;
        if (e.failed) {
            failed_ = true;
            error_ = detail::failure_message(e);
            return true;
        }
        return detail::decode<value_type>(e.value, value_, reason);
    }

  private:
    std::string name_;
    F fn_;
    retry_policy policy_;
    std::optional<detail::slot_t<value_type>> value_;
    std::string error_;
    bool failed_ = false;
};

// co_await ctx.sleep(d) / ctx.timer(d): completes when the durable timer fires.
class [[nodiscard]] timer_op : public detail::async_op {
  public:
    using value_type = void;

    timer_op(detail::runtime& rt, duration d, std::string name)
        : async_op(rt), d_(d), name_(std::move(name)) {}
    timer_op(timer_op&&) noexcept = default;

    bool await_ready() {
        if (begin(op_kind::timer, name_)) return true;
        if (op_) {
            auto [due, armed] = rt_->timer_due(seq_, d_);
            op_->due = due;
            op_->armed = armed;
        }
        return false;
    }
    bool await_suspend(std::coroutine_handle<> h) noexcept { return suspend(h); }
    void await_resume() const noexcept {}

    bool accept(const journal_entry&, std::string&) noexcept override {
        pending_ = false;
        return true;
    }

  private:
    duration d_;
    std::string name_;
};

// co_await ctx.wait<T>(path): consumes the oldest signal with this path and returns its payload.
template <class T = nlohmann::json>
class [[nodiscard]] signal_op : public detail::async_op {
  public:
    using value_type = T;

    signal_op(detail::runtime& rt, std::string path) : async_op(rt), path_(std::move(path)) {}
    signal_op(signal_op&&) noexcept = default;

    bool await_ready() { return begin(op_kind::signal, path_); }
    bool await_suspend(std::coroutine_handle<> h) noexcept { return suspend(h); }
    T await_resume() {
        if (!value_) throw bad_signal_payload("signal " + path_ + ": " + error_);
        if constexpr (!std::is_void_v<T>) return std::move(*value_);
    }

    bool accept(const journal_entry& e, std::string& reason) noexcept override {
        pending_ = false;
        const nlohmann::json* payload =
            e.value.is_object() && e.value.contains("payload") ? &e.value["payload"] : nullptr;
        if (!payload) {
            reason = "no payload recorded";
            return false;
        }
        detail::decode<T>(*payload, value_, error_);
        return true;  // a payload of the wrong type is the sender's error: thrown in the handler
    }

  private:
    std::string path_;
    std::optional<detail::slot_t<T>> value_;
    std::string error_;
};

// Thrown by held<T>::value() (and * and ->) when the lock could not be taken again when the
// instance resumed: the entity was not read again, so there is no current value to give.
class lock_lost : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

namespace detail {

// The state behind a held<T>: the entity as the handler sees it, and the live lease when
// there is one. Shared by the held<T>, the runtime's lock registry and the acquiring body.
template <model T>
class entity_slot final : public lock_slot {
  public:
    entity_slot(repository<T>& repo, keel::ref<T> r)
        : repo_(&repo),
          ref_(std::move(r)),
          name_(std::string(model_traits<T>::name) + "/" + ref_.id()) {}
    ~entity_slot() override { release(); }

    const std::string& name() const noexcept override { return name_; }
    bool locked() const noexcept override { return lease_ && !lease_->lost(); }

    // Takes the lease and reads the entity (the lock operation's body, and relocks): the
    // lease waits in fresh_ until the recorded entry is applied.
    asio::awaitable<relock_result> acquire() {
        std::optional<std::chrono::milliseconds> wait;  // the repository's lock_wait
        auto got = co_await repo_->lock(ref_, wait);
        relock_result out;
        if (!got) {
            out.failed = true;
            out.value = nlohmann::json{{"message", got.error().message}};
            co_return out;
        }
        if (got->value()) out.value = nlohmann::json(*got->value());
        fresh_.emplace(std::move(*got));
        co_return out;
    }
    asio::awaitable<relock_result> reacquire() override { return acquire(); }

    // A lock or relock entry: the recorded entity becomes the value; the fresh lease (live
    // only) becomes the held one. A failed entry leaves no value and no lease.
    bool apply(const journal_entry& e, std::string& reason) noexcept override {
        lease_.reset();
        if (e.failed) {
            fresh_.reset();
            failed_ = true;
            error_ = detail::failure_message(e);
            value_.reset();
            return true;
        }
        try {
            if (e.value.is_null())
                value_.reset();
            else
                value_.emplace(e.value.get<T>());
        } catch (const std::exception& x) {
            fresh_.reset();
            reason = x.what();
            return false;
        }
        failed_ = false;
        error_.clear();
        if (fresh_) lease_.emplace(std::move(*fresh_));
        fresh_.reset();
        return true;
    }

    void release() noexcept override {
        if (lease_) lease_->release();
        lease_.reset();
        fresh_.reset();  // (its destructor releases too)
    }

    // Registered with the runtime under `seq` until close().
    void registered(runtime& rt, std::uint64_t seq) noexcept {
        rt_ = &rt;
        seq_ = seq;
    }
    void close() noexcept {
        if (rt_) std::exchange(rt_, nullptr)->unregister_lock(seq_);
        release();
    }

    const keel::ref<T>& entity() const noexcept { return ref_; }
    bool failed() const noexcept { return failed_; }
    std::optional<T>& value() {
        if (failed_)
            throw lock_lost(
                std::string(model_traits<T>::name) + " " + ref_.id() +
                ": the lock could not be taken again when the instance resumed: " + error_);
        return value_;
    }

    asio::awaitable<expected<void, model_error>> save() {
        if (!locked())
            co_return unexpected(model_error{
                model_error::code::lock_lost,
                std::string(model_traits<T>::name) + " " + ref_.id() +
                    ": the lock is not held (lost, or not taken again when the instance "
                    "resumed); the write was rejected"});
        lease_->value() = value_;
        co_return co_await lease_->save();
    }

  private:
    repository<T>* repo_;
    keel::ref<T> ref_;
    std::string name_;
    std::optional<T> value_;
    std::optional<keel::locked<T>> lease_;  // the live lease, while held
    std::optional<keel::locked<T>> fresh_;  // taken, not yet applied
    bool failed_ = false;
    std::string error_;
    runtime* rt_ = nullptr;
    std::uint64_t seq_ = 0;
};

// The lock operation's side effect, executed by the engine like a run step.
template <model T>
class lock_body final : public run_body {
  public:
    explicit lock_body(std::shared_ptr<entity_slot<T>> slot) : slot_(std::move(slot)) {}
    asio::awaitable<nlohmann::json> attempt() override {
        relock_result got = co_await slot_->acquire();
        if (got.failed) throw std::runtime_error(got.value["message"].get<std::string>());
        co_return std::move(got.value);
    }

  private:
    std::shared_ptr<entity_slot<T>> slot_;
};

}  // namespace detail

// An entity locked by the handler with ctx.lock: the entity as read under its lease, and the
// lease while the instance runs. Move-only; destroying it (or release()) gives the lease up.
//
// The lease is never held while the instance is suspended: the engine releases it before
// every suspension, and when the instance resumes live it takes it again and reads the
// entity again, so after a co_await that suspended, value() is the entity's current state
// ("rehydration"). Code replayed from the journal takes no lock: it sees the recorded
// states (locked() is false while replaying). Writes are side effects: save() belongs in a
// ctx.run step, which runs live only:
//
//   auto o = co_await ctx.lock(orders, order_ref);          // held<order>
//   co_await ctx.wait("/order/" + order_ref.id() + "/paid"); // lease released meanwhile
//   o->status = "paid";                                     // o: the state after the resume
//   co_await ctx.run("save", [&]() -> asio::awaitable<bool> {
//       co_return (co_await o.save()).has_value();
//   });
template <model T>
class held {
  public:
    explicit held(std::shared_ptr<detail::entity_slot<T>> slot) : slot_(std::move(slot)) {}
    held(held&&) noexcept = default;
    held& operator=(held&& other) noexcept {
        if (this != &other) {
            release();
            slot_ = std::move(other.slot_);
        }
        return *this;
    }
    ~held() { release(); }

    const keel::ref<T>& entity() const noexcept { return slot_->entity(); }
    // The entity (nullopt when it does not exist) as read under the lock when it was taken or
    // last taken again; changes stay local until save(). Throws lock_lost when the lock could
    // not be taken again at the last resume.
    std::optional<T>& value() { return slot_->value(); }
    T& operator*() { return *value(); }
    T* operator->() { return &*value(); }

    // Whether this worker holds the entity's lease right now (false while replaying, when the
    // lease was lost, and after a failed re-acquisition). Not recorded: branch on it only
    // inside a run step, never in the handler's own code (a replay would take the other way).
    bool locked() const noexcept { return slot_ && slot_->locked(); }
    // Whether the lock could not be taken again at the last resume (value() throws).
    bool lost() const noexcept { return slot_ && slot_->failed(); }

    // Writes value() through the live lease (fenced): model_error::lock_lost when the lease is
    // not held or was lost. A side effect: call it inside ctx.run.
    asio::awaitable<expected<void, model_error>> save() { return slot_->save(); }

    // Gives the lease up and stops holding the entity (the destructor does it too).
    void release() noexcept {
        if (slot_) std::exchange(slot_, nullptr)->close();
    }

  private:
    std::shared_ptr<detail::entity_slot<T>> slot_;
};

// co_await ctx.lock(repo, ref): takes the entity's lease (waiting up to the repository's
// lock_wait) and reads it; recorded as a `lock` entry with the entity's JSON. Replay returns
// the recorded entity and takes no lock. A lock not obtained fails like a run step
// (retried per the policy; then step_failed "lock order/o-1").
template <model T>
class [[nodiscard]] lock_op : public detail::async_op {
  public:
    using value_type = held<T>;

    lock_op(detail::runtime& rt, repository<T>& repo, keel::ref<T> r, retry_policy policy)
        : async_op(rt),
          slot_(std::make_shared<detail::entity_slot<T>>(repo, std::move(r))),
          policy_(std::move(policy)) {}
    lock_op(lock_op&&) noexcept = default;
    ~lock_op() {
        if (slot_) slot_->close();  // never handed to the handler
    }

    bool await_ready() {
        if (begin(op_kind::lock, slot_->name())) return true;
        if (op_) {
            op_->body = std::make_shared<detail::lock_body<T>>(slot_);
            op_->policy = std::move(policy_);
        }
        return false;
    }
    bool await_suspend(std::coroutine_handle<> h) noexcept { return suspend(h); }
    held<T> await_resume() {
        if (failed_) throw step_failed("lock " + slot_->name(), error_);
        return held<T>(std::move(slot_));
    }

    bool accept(const journal_entry& e, std::string& reason) noexcept override {
        pending_ = false;
        if (e.failed) {
            failed_ = true;
            error_ = detail::failure_message(e);
            slot_->release();
            return true;
        }
        if (!slot_->apply(e, reason)) return false;
        try {
            rt_->register_lock(seq_, slot_, slot_->locked());
        } catch (const std::exception& x) {
            reason = x.what();
            return false;
        }
        slot_->registered(*rt_, seq_);
        return true;
    }

  private:
    std::shared_ptr<detail::entity_slot<T>> slot_;
    retry_policy policy_;
    std::string error_;
    bool failed_ = false;
};

// co_await ctx.now() / random() / uuid(): recorded at once.
template <class T>
class [[nodiscard]] immediate_op {
  public:
    using value_type = T;
    using live_fn = nlohmann::json (*)(detail::runtime&);

    immediate_op(detail::runtime& rt, op_kind kind, live_fn live)
        : rt_(&rt), kind_(kind), live_(live) {}

    bool await_ready() {
        auto seq = rt_->next_seq();
        auto* rt = rt_;
        auto live = live_;
        const nlohmann::json* v = rt_->immediate(seq, kind_, "", [rt, live] { return live(*rt); });
        if (!v) return false;
        std::string reason;
        if (!detail::decode<T>(*v, value_, reason)) {
            rt_->park("the recorded value of " + describe(kind_, "") +
                      " does not decode: " + reason);
            return false;
        }
        return true;
    }
    bool await_suspend(std::coroutine_handle<>) const noexcept { return true; }
    T await_resume() { return std::move(*value_); }

  private:
    detail::runtime* rt_;
    op_kind kind_;
    live_fn live_;
    std::optional<T> value_;
};

namespace detail {

template <class T>
class branch_state final : public branch_node {
  public:
    explicit branch_state(durable<T> task) : task_(std::move(task)) {}
    ~branch_state() override {
        if (rt && !done) rt->cancel_branch(*this);
    }

    promise_base& promise() noexcept override { return task_.handle().promise(); }
    std::coroutine_handle<> frame() noexcept override { return task_.handle(); }
    std::coroutine_handle<> release_frame() noexcept override { return task_.release(); }

    slot_t<T> take() {
        if (cancelled) throw branch_cancelled();
        if constexpr (std::is_void_v<T>) {
            task_.handle().promise().take();
            return {};
        } else {
            return task_.handle().promise().take();
        }
    }

  private:
    durable<T> task_;
};

}  // namespace detail

// A child branch started with ctx.spawn: runs concurrently with its parent inside the same
// instance (deterministically interleaved). co_await joins it; destroying the handle cancels
// it if it has not finished. Pass it to race/any/all by reference.
template <class T>
class [[nodiscard]] branch {
  public:
    using value_type = T;

    explicit branch(std::unique_ptr<detail::branch_state<T>> s) : state_(std::move(s)) {}
    branch(branch&&) noexcept = default;
    branch& operator=(branch&&) noexcept = default;

    bool done() const noexcept { return state_->done; }
    void cancel() noexcept { state_->rt->cancel_branch(*state_); }

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

    detail::branch_state<T>* state() noexcept { return state_.get(); }

  private:
    std::unique_ptr<detail::branch_state<T>> state_;
};

// The outcome of race/any: which arm won and its value.
template <class... T>
class race_result {
  public:
    template <std::size_t I, class V>
    race_result(std::in_place_index_t<I> i, V&& v) : value_(i, std::forward<V>(v)) {}

    std::size_t index() const noexcept { return value_.index(); }
    template <std::size_t I>
    bool is() const noexcept {
        return value_.index() == I;
    }
    template <std::size_t I>
    auto& get() {
        return std::get<I>(value_);
    }
    template <std::size_t I>
    const auto& get() const {
        return std::get<I>(value_);
    }

    // Whether this signal's arm won: r.is(payments.received).
    bool is(const signals::signal_base& s) const noexcept { return tags_[index()] == &s; }
    // The payload of the winning signal arm; std::logic_error if that signal did not win.
    template <class P, class... M>
    detail::slot_t<P>& get(const signals::signal<P, M...>& s) {
        if (!is(s))
            throw std::logic_error("race: signal " + std::string(s.pattern()) + " did not win");
        detail::slot_t<P>* out = nullptr;
        find_value(out, std::index_sequence_for<T...>{});
        return *out;
    }

    // The arms' tags (a signal's address for a signal arm), set by the combinator.
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

namespace detail {

template <class Op>
concept op_descriptor = std::derived_from<std::remove_cvref_t<Op>, async_op>;

template <class Op>
durable<typename Op::value_type> as_durable(Op op) {
    if constexpr (std::is_void_v<typename Op::value_type>) {
        co_await op;
        co_return;
    } else {
        co_return co_await op;
    }
}

template <class T>
struct arm {
    std::unique_ptr<branch_state<T>> owned;
    branch_state<T>* node = nullptr;
};

template <class T>
arm<T> make_arm(durable<T>&& d) {
    arm<T> a;
    a.owned = std::make_unique<branch_state<T>>(std::move(d));
    a.node = a.owned.get();
    return a;
}
template <class T>
arm<T> make_arm(branch<T>& b) {
    return arm<T>{nullptr, b.state()};
}
template <op_descriptor Op>
auto make_arm(Op&& op) {
    return make_arm(as_durable(std::forward<Op>(op)));
}

template <class A>
struct arm_value;
template <class T>
struct arm_value<durable<T>> {
    using type = T;
};
template <class T>
struct arm_value<branch<T>> {
    using type = T;
};
template <op_descriptor Op>
struct arm_value<Op> {
    using type = typename Op::value_type;
};
template <class P, class... M>
struct arm_value<signals::signal<P, M...>> {
    using type = P;
};

template <class A>
inline constexpr bool is_signal = false;
template <class P, class... M>
inline constexpr bool is_signal<signals::signal<P, M...>> = true;

template <class A>
const void* tag_of(const A& a) noexcept {
    if constexpr (is_signal<A>)
        return &a;
    else
        return nullptr;
}
template <class A>
using arm_value_t = typename arm_value<std::remove_cvref_t<A>>::type;

enum class combine { race, any, all };

template <combine Mode, class... T>
class combinator final : public combinator_base {
    static constexpr std::size_t count = sizeof...(T);
    static constexpr std::size_t none = static_cast<std::size_t>(-1);

  public:
    combinator(runtime& rt, std::array<const void*, count> tags, arm<T>... arms)
        : rt_(&rt), arms_(std::move(arms)...), tags_(tags) {}
    combinator(combinator&& o) noexcept : rt_(o.rt_), arms_(std::move(o.arms_)), tags_(o.tags_) {}

    bool await_ready() {
        if constexpr (Mode != combine::all) seq_ = rt_->next_seq();
        attach(std::index_sequence_for<T...>{});
        return resolved_ && !parked_;
    }
    bool await_suspend(std::coroutine_handle<> h) noexcept {
        parent_ = h;
        parent_branch_ = rt_->current_branch();
        suspended_ = true;
        return true;
    }
    auto await_resume() {
        if constexpr (Mode == combine::all) {
            if (winner_ != none) rethrow(std::index_sequence_for<T...>{});
            return take_all(std::index_sequence_for<T...>{});
        } else {
            return take_winner(std::index_sequence_for<T...>{});
        }
    }

    void arm_done(std::size_t i) noexcept override {
        if (resolved_) return;
        bool failed = failed_at(i, std::index_sequence_for<T...>{});
        if constexpr (Mode == combine::all) {
            if (!failed && ++finished_ < count) return;
            if (failed) winner_ = i;
        } else if constexpr (Mode == combine::any) {
            if (failed && ++finished_ < count) return;
            winner_ = i;
            if (!failed && !record(i)) return;
        } else {
            winner_ = i;
            if (!record(i)) return;
        }
        resolved_ = true;
        cancel_others(i, std::index_sequence_for<T...>{});
        if (suspended_) rt_->schedule(parent_, parent_branch_);
    }

  private:
    static constexpr op_kind kind = Mode == combine::any ? op_kind::any : op_kind::race;

    bool record(std::size_t i) noexcept {
        const nlohmann::json* v = rt_->immediate(seq_, kind, "", [i] { return nlohmann::json(i); });
        if (!v) {
            parked_ = true;
            return false;
        }
        if (!v->is_number_unsigned() || v->get<std::size_t>() != i) {
            rt_->park("journal mismatch: " + describe(kind, "") + " (operation #" +
                      std::to_string(seq_) + ") was won by arm " + v->dump() +
                      " but replay completed arm " + std::to_string(i) + " first");
            parked_ = true;
            return false;
        }
        return true;
    }

    template <std::size_t... I>
    void attach(std::index_sequence<I...>) {
        (attach_one<I>(), ...);
        // Spawned branches that had already finished complete the combinator in arm order.
        ((std::get<I>(arms_).node->done && !std::get<I>(arms_).owned ? arm_done(I) : void()), ...);
    }
    template <std::size_t I>
    void attach_one() {
        auto& a = std::get<I>(arms_);
        a.node->combinator = this;
        a.node->arm = I;
        if (a.owned) rt_->spawn(*a.node);
    }
    template <std::size_t... I>
    bool failed_at(std::size_t i, std::index_sequence<I...>) noexcept {
        bool failed = false;
        ((i == I ? (failed = std::get<I>(arms_).node->failed(), 0) : 0), ...);
        return failed;
    }
    template <std::size_t... I>
    void cancel_others(std::size_t i, std::index_sequence<I...>) noexcept {
        ((I != i ? rt_->cancel_branch(*std::get<I>(arms_).node) : void()), ...);
    }
    template <std::size_t... I>
    void rethrow(std::index_sequence<I...>) {
        ((winner_ == I ? (void)std::get<I>(arms_).node->take() : void()), ...);
    }
    template <std::size_t... I>
    std::tuple<slot_t<T>...> take_all(std::index_sequence<I...>) {
        return std::tuple<slot_t<T>...>(std::get<I>(arms_).node->take()...);
    }
    template <std::size_t... I>
    race_result<T...> take_winner(std::index_sequence<I...>) {
        std::optional<race_result<T...>> out;
        ((winner_ == I ? (void)out.emplace(std::in_place_index<I>, std::get<I>(arms_).node->take())
                       : void()),
         ...);
        out->set_tags(tags_);
        return std::move(*out);
    }

    runtime* rt_;
    std::tuple<arm<T>...> arms_;
    std::array<const void*, count> tags_;
    std::uint64_t seq_ = 0;
    std::coroutine_handle<> parent_;
    std::uint64_t parent_branch_ = 0;
    std::size_t winner_ = none;
    std::size_t finished_ = 0;
    bool resolved_ = false;
    bool suspended_ = false;
    bool parked_ = false;
};

}  // namespace detail

class context {
  public:
    explicit context(detail::runtime& rt) noexcept : rt_(&rt) {}
    context(const context&) = delete;
    context& operator=(const context&) = delete;

    // The instance id, e.g. "order/order-123/fulfillment".
    const std::string& id() const noexcept { return rt_->id(); }

    template <class F>
    requires std::invocable<F&> run_op<F> run(std::string name, F fn, retry_policy policy = {}) {
        return run_op<F>(*rt_, std::move(name), std::move(fn), std::move(policy));
    }

    timer_op sleep(duration d, std::string name = "sleep") {
        return timer_op(*rt_, d, std::move(name));
    }
    timer_op timer(duration d, std::string name = "timer") {
        return timer_op(*rt_, d, std::move(name));
    }

    template <class T = nlohmann::json>
    signal_op<T> wait(std::string path) {
        return signal_op<T>(*rt_, std::move(path));
    }

    // Waits for a typed signal addressed to this instance: the parameters the process binds
    // by model type come from its own parameters; any others are given here, as ref<M>
    // (ctx.wait(shipping.parcel_delivered, parcel)). Returns the payload (nothing for void).
    template <class P, class... M, class... X>
    signal_op<P> wait(const signals::signal<P, M...>& s, const keel::ref<X>&... others) {
        return signal_op<P>(*rt_, signal_path(s, {{keel::model_traits<X>::name, others.id()}...}));
    }

    // The concrete path of signal `s` for this instance (see wait()); std::logic_error when a
    // parameter is neither bound nor given.
    std::string signal_path(const signals::signal_base& s,
                            std::vector<std::pair<std::string_view, std::string>> others) const;
    // Internal: records a model-typed parameter of the instance, for binding signals.
    void bind_entity(std::string_view model, std::string id) {
        entities_.emplace_back(model, std::move(id));
    }
    // The same operation, named for use as a race arm.
    template <class T = nlohmann::json>
    signal_op<T> signal(std::string path) {
        return signal_op<T>(*rt_, std::move(path));
    }

    immediate_op<time_point> now();
    immediate_op<std::uint64_t> random();
    immediate_op<std::string> uuid();

    // The first arm to finish wins (its failure too); the others are cancelled. Recorded.
    // A typed signal is an arm too: ctx.race(payments.received, ctx.timer(3d)), and then
    // r.is(payments.received) / r.get(payments.received).
    template <class... A>
    auto race(A&&... arms) {
        return detail::combinator<detail::combine::race, detail::arm_value_t<A>...>(
            *rt_, {detail::tag_of(arms)...}, detail::make_arm(adapt(std::forward<A>(arms)))...);
    }
    // The first arm to succeed wins; fails with the last error when all fail. Recorded.
    template <class... A>
    auto any(A&&... arms) {
        return detail::combinator<detail::combine::any, detail::arm_value_t<A>...>(
            *rt_, {detail::tag_of(arms)...}, detail::make_arm(adapt(std::forward<A>(arms)))...);
    }
    // Every arm's value, as a tuple; the first failure cancels the rest and is rethrown.
    template <class... A>
    auto all(A&&... arms) {
        return detail::combinator<detail::combine::all, detail::arm_value_t<A>...>(
            *rt_, {detail::tag_of(arms)...}, detail::make_arm(adapt(std::forward<A>(arms)))...);
    }

    // The entity `entity` of `repo` (a dependency of the handler) under its lock, as
    // held<T>: see held<T> for the lease's life across suspensions and replays. The lock is
    // tried once (waiting up to the repository's lock_wait); with a policy, retried like a
    // run step. A lock not obtained throws step_failed ("lock order/o-1").
    template <model T>
    lock_op<T> lock(repository<T>& repo, keel::ref<T> entity) {
        return lock_op<T>(*rt_, repo, std::move(entity), retry_policy::once());
    }
    template <model T>
    lock_op<T> lock(repository<T>& repo, keel::ref<T> entity, retry_policy policy) {
        return lock_op<T>(*rt_, repo, std::move(entity), std::move(policy));
    }

    template <class T>
    branch<T> spawn(durable<T> child) {
        auto state = std::make_unique<detail::branch_state<T>>(std::move(child));
        rt_->spawn(*state);
        return branch<T>(std::move(state));
    }

  private:
    template <class A>
    decltype(auto) adapt(A&& a) {
        if constexpr (detail::is_signal<std::remove_cvref_t<A>>)
            return wait(a);
        else
            return std::forward<A>(a);
    }

    detail::runtime* rt_;
    std::vector<std::pair<std::string_view, std::string>> entities_;
};

}  // namespace keel::process
