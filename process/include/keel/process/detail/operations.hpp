#pragma once

// The awaiters behind keel::process::context's operations (run_op, timer_op, signal_op,
// lock_op, immediate_op) and the state of entity locks and branches. Machinery: handlers
// use them through context.hpp, as `co_await ctx.run(...)` and so on, without naming them.

#include <boost/asio/awaitable.hpp>
#include <concepts>
#include <cstddef>
#include <exception>
#include <keel/framework/repository.hpp>
#include <keel/process/detail/runtime.hpp>
#include <keel/process/durable.hpp>
#include <keel/process/errors.hpp>
#include <keel/process/journal.hpp>
#include <keel/process/retry.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

namespace keel::process {

template <model T>
class held;
template <class T>
class timeout_op;

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
    // begin() for an operation the engine executes (run, update, lock): when it must wait,
    // the engine gets its body, made only then (a replayed one needs none), and its policy.
    template <class MakeBody>
    bool begin_executed(op_kind kind, const std::string& name, MakeBody make_body,
                        retry_policy& policy) {
        if (begin(kind, name)) return true;
        if (op_) {
            op_->body = make_body();
            op_->policy = std::move(policy);
        }
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

// What the steps (run, update, lock) do with a failed entry: keep its message, thrown by
// await_resume as step_failed.
class step_failure {
  protected:
    // True when `e` records a failure.
    bool failed_entry(const journal_entry& e) {
        if (!e.failed) return false;
        failed_ = true;
        error_ = failure_message(e);
        return true;
    }
    void throw_if_failed(const std::string& name) const {
        if (failed_) throw step_failed(name, error_);
    }

  private:
    bool failed_ = false;
    std::string error_;
};

// A step's body behind a limit (run_op::limited): each attempt takes a permit first.
class limited_body final : public run_body {
  public:
    limited_body(std::shared_ptr<run_body> inner, limit l, runtime& rt, std::uint64_t seq)
        : inner_(std::move(inner)), limit_(std::move(l)), rt_(&rt), seq_(seq) {}
    asio::awaitable<nlohmann::json> attempt(step_writes& writes) override;

  private:
    std::shared_ptr<run_body> inner_;
    limit limit_;
    runtime* rt_;
    std::uint64_t seq_;
};

template <class F, class T>
class run_body_impl final : public run_body {
  public:
    explicit run_body_impl(F fn) : fn_(std::move(fn)) {}
    asio::awaitable<nlohmann::json> attempt(step_writes&) override {
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
class [[nodiscard]] run_op : public detail::async_op, detail::step_failure {
    using raw = std::invoke_result_t<F&>;

  public:
    using value_type = typename detail::awaitable_value<raw>::type;

    run_op(detail::runtime& rt, std::string name, F fn, retry_policy policy)
        : async_op(rt), name_(std::move(name)), fn_(std::move(fn)), policy_(std::move(policy)) {}
    run_op(run_op&&) noexcept = default;

    // Each attempt first takes a permit of `l` (keel/process/limiter.hpp), waiting for it
    // without counting as an attempt: co_await ctx.run("charge", fn).limited(payments).
    run_op limited(limit l) && {
        limit_ = std::move(l);
        return std::move(*this);
    }

    bool await_ready() {
        auto body = [this]() -> std::shared_ptr<detail::run_body> {
            auto plain = std::make_shared<detail::run_body_impl<F, value_type>>(std::move(fn_));
            if (!limit_) return plain;
            return std::make_shared<detail::limited_body>(std::move(plain), std::move(*limit_),
                                                          *rt_, seq_);
        };
        return begin_executed(op_kind::run, name_, body, policy_);
    }
    bool await_suspend(std::coroutine_handle<> h) noexcept { return suspend(h); }
    value_type await_resume() {
        throw_if_failed(name_);
        if constexpr (!std::is_void_v<value_type>) return std::move(*value_);
    }

    bool accept(const journal_entry& e, std::string& reason) noexcept override {
        pending_ = false;
        if (failed_entry(e)) return true;
        return detail::decode<value_type>(e.value, value_, reason);
    }

  private:
    std::string name_;
    F fn_;
    retry_policy policy_;
    std::optional<limit> limit_;
    std::optional<detail::slot_t<value_type>> value_;
};

namespace detail {

// The side effect of context::update: the entity's change, its write left to the step's
// commit when the store can make it there, else made here with repository<T>::update.
template <model T, class Change>
class update_body final : public run_body {
  public:
    update_body(repository<T>& repo, keel::ref<T> entity, Change change)
        : repo_(&repo), entity_(std::move(entity)), change_(std::move(change)) {}

    bool changes_entities_only() const noexcept override { return true; }

    asio::awaitable<nlohmann::json> attempt(step_writes& writes) override {
        const std::string_view model = model_traits<T>::name;
        auto where = repo_->docs().address(model, entity_.id());
        if (!where || !writes.accepts(*where)) co_return co_await update_now();
        auto prepared = co_await repo_->prepare_update(entity_, change_);
        if (!prepared) throw std::runtime_error(describe() + prepared.error().what());
        if (!prepared->text) co_return nlohmann::json(false);
        staged_document staged{
            document_write{std::move(where->key), std::move(where->lock),
                           std::move(prepared->expected), std::move(*prepared->text)},
            &repo_->docs(), std::string(model), entity_.id()};
        writes.add(std::move(staged));
        co_return nlohmann::json(true);
    }

  private:
    asio::awaitable<nlohmann::json> update_now() {
        bool changed = false;
        auto tracked = [this, &changed](std::optional<T>& entity) {
            return changed = change_(entity);
        };
        auto stored = co_await repo_->update(entity_, tracked);
        if (!stored) throw std::runtime_error(describe() + stored.error().what());
        co_return nlohmann::json(changed);
    }
    std::string describe() const {
        return "updating " + std::string(model_traits<T>::name) + " " + entity_.id() + ": ";
    }

    repository<T>* repo_;
    keel::ref<T> entity_;
    Change change_;
};

}  // namespace detail

// co_await ctx.update(name, repo, ref, change): a step that changes one entity; true when
// it wrote. Journaled as a run step of that name with the answer.
template <model T, class Change>
class [[nodiscard]] update_op : public detail::async_op, detail::step_failure {
  public:
    using value_type = bool;

    update_op(detail::runtime& rt, std::string name, repository<T>& repo, keel::ref<T> entity,
              Change change, retry_policy policy)
        : async_op(rt),
          name_(std::move(name)),
          repo_(&repo),
          entity_(std::move(entity)),
          change_(std::move(change)),
          policy_(std::move(policy)) {}
    update_op(update_op&&) noexcept = default;

    bool await_ready() {
        auto body = [this] {
            return std::make_shared<detail::update_body<T, Change>>(*repo_, std::move(entity_),
                                                                    std::move(change_));
        };
        return begin_executed(op_kind::run, name_, body, policy_);
    }
    bool await_suspend(std::coroutine_handle<> h) noexcept { return suspend(h); }
    bool await_resume() {
        throw_if_failed(name_);
        return *written_;
    }

    bool accept(const journal_entry& e, std::string& reason) noexcept override {
        pending_ = false;
        if (failed_entry(e)) return true;
        return detail::decode<bool>(e.value, written_, reason);
    }

  private:
    std::string name_;
    repository<T>* repo_;
    keel::ref<T> entity_;
    Change change_;
    retry_policy policy_;
    std::optional<bool> written_;
};

// co_await ctx.sleep(d) / ctx.timer(d) / ctx.timer_at(t): completes when the durable timer
// fires (after d from when it is first awaited, or at t).
class [[nodiscard]] timer_op : public detail::async_op {
  public:
    using value_type = void;

    timer_op(detail::runtime& rt, duration d, std::string name)
        : async_op(rt), d_(d), name_(std::move(name)) {}
    timer_op(detail::runtime& rt, time_point at, std::string name)
        : async_op(rt), at_(at), name_(std::move(name)) {}
    timer_op(timer_op&&) noexcept = default;

    bool await_ready() {
        if (begin(op_kind::timer, name_)) return true;
        if (op_) {
            auto [due, armed] = at_ ? rt_->timer_due(seq_, *at_) : rt_->timer_due(seq_, d_);
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
    duration d_{};
    std::optional<time_point> at_;
    std::string name_;
};

// co_await ctx.wait<T>(path): consumes the oldest signal with this path and returns its payload.
template <class T = nlohmann::json>
class [[nodiscard]] signal_op : public detail::async_op {
  public:
    using value_type = T;

    signal_op(detail::runtime& rt, std::string path) : async_op(rt), path_(std::move(path)) {}
    signal_op(signal_op&&) noexcept = default;

    // co_await ctx.wait(sig).or_timeout(d): the payload, or nullopt (false for a void
    // signal) when the timer ("timeout", or `name`) fires first. Journaled as the race of
    // the wait and the timer it is.
    timeout_op<T> or_timeout(duration d) && { return std::move(*this).or_timeout(d, "timeout"); }
    timeout_op<T> or_timeout(duration d, std::string name) &&;

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
    asio::awaitable<nlohmann::json> attempt(step_writes&) override {
        relock_result got = co_await slot_->acquire();
        if (got.failed) throw std::runtime_error(got.value["message"].get<std::string>());
        co_return std::move(got.value);
    }

  private:
    std::shared_ptr<entity_slot<T>> slot_;
};

}  // namespace detail

// co_await ctx.lock(repo, ref): takes the entity's lease (waiting up to the repository's
// lock_wait) and reads it; recorded as a `lock` entry with the entity's JSON. Replay returns
// the recorded entity and takes no lock. A lock not obtained fails like a run step
// (retried per the policy; then step_failed "lock order/o-1").
template <model T>
class [[nodiscard]] lock_op : public detail::async_op, detail::step_failure {
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
        auto body = [this] { return std::make_shared<detail::lock_body<T>>(slot_); };
        return begin_executed(op_kind::lock, slot_->name(), body, policy_);
    }
    bool await_suspend(std::coroutine_handle<> h) noexcept { return suspend(h); }
    held<T> await_resume() {
        throw_if_failed("lock " + slot_->name());
        return held<T>(std::move(slot_));
    }

    bool accept(const journal_entry& e, std::string& reason) noexcept override {
        pending_ = false;
        if (failed_entry(e)) {
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

}  // namespace keel::process
