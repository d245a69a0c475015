#pragma once

// Tasks and join handles.
//
// A task is a coroutine started by a nursery (or a combinator) on the nursery's executor.
// It is a node of the cancellation tree under its nursery, and owns the Asio cancellation
// signal bound to its coroutine: cancelling the node emits the signal, so whatever the task
// is waiting on (a socket, a timer, a clock wait, a channel, a Redis request) is cancelled
// at once, and, as everywhere in Asio, every later co_await in the task throws
// operation_aborted.
//
// join_handle<T> observes one task. co_await h.join() returns its value, rethrows its error,
// or throws cancelled_error when the task ended because it was cancelled; a finished task
// answers at once. The value is moved out: join() succeeds once per value.
//
// Thread-safety: none. A task, its handle and its nursery belong to the nursery's executor,
// which must not run handlers concurrently (an io_context run by one thread, or a strand).

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cstddef>
#include <exception>
#include <keel/framework/concurrency/cancellation.hpp>
#include <keel/framework/concurrency/detail/waiter.hpp>
#include <keel/framework/concurrency/errors.hpp>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <variant>

namespace keel::concurrency {

enum class task_status { running, succeeded, failed, cancelled };

// The value type of awaitable<T>, with void as std::monostate (for variants and tuples).
template <class T>
using value_t = std::conditional_t<std::is_void_v<T>, std::monostate, T>;

template <class A>
struct awaitable_traits;
template <class T, class Executor>
struct awaitable_traits<asio::awaitable<T, Executor>> {
    using value_type = T;
};
template <class A>
using awaitable_value_t = typename awaitable_traits<std::remove_cvref_t<A>>::value_type;

namespace detail {

class scope;

// What every task shares, whatever its value type.
class task_base : public cancel_node {
  public:
    task_base(scope& owner, std::size_t index, bool counted);

    task_status status() const noexcept { return status_; }
    bool finished() const noexcept { return status_ != task_status::running; }
    const std::exception_ptr& error() const noexcept { return error_; }
    std::size_t index() const noexcept { return index_; }

    // Called by the task's coroutine when it starts, and with its outcome.
    void started();
    void failed(std::exception_ptr error) noexcept { error_ = std::move(error); }
    // Called once the task's coroutine has completed.
    void finish(std::exception_ptr error);

    asio::cancellation_slot slot() noexcept { return signal_.slot(); }
    // `w` is completed when the task finishes.
    void add_joiner(list_waiter& w) { joiners_.push_back(w); }
    // Throws the task's error, or cancelled_error, unless it succeeded.
    void rethrow_unless_succeeded() const;

  protected:
    void on_cancel(asio::cancellation_type type) override;

  private:
    scope* owner_;
    std::size_t index_;
    bool counted_;
    bool started_ = false;
    task_status status_ = task_status::running;
    std::exception_ptr error_;
    asio::cancellation_signal signal_;
    list<list_waiter> joiners_;
};

template <class T>
class task_state final : public task_base {
  public:
    using task_base::task_base;

    template <class U>
    void set_value(U&& value) {
        value_.emplace(std::forward<U>(value));
    }
    // The value (moved out), or the task's error.
    T take() {
        rethrow_unless_succeeded();
        if (!value_) throw std::logic_error("keel::concurrency: task value already taken");
        T v = std::move(*value_);
        value_.reset();
        return v;
    }

  private:
    std::optional<T> value_;
};

template <>
class task_state<void> final : public task_base {
  public:
    using task_base::task_base;
    void take() { rethrow_unless_succeeded(); }
};

// The coroutine a task runs: the work, with its outcome recorded in the state. The state
// is kept alive by the completion handler, which outlives this coroutine.
template <class T>
asio::awaitable<void> run_task(task_state<T>* t, asio::awaitable<T> work) {
    t->started();
    try {
        if constexpr (std::is_void_v<T>)
            co_await std::move(work);
        else
            t->set_value(co_await std::move(work));
    } catch (...) {
        t->failed(std::current_exception());
    }
    // A task cancelled while it never suspended must still complete cleanly.
    co_await asio::this_coro::throw_if_cancelled(false);
}

// co_spawn's completion handler for a task. It carries the task's cancellation slot and no
// executor, so the slot's emissions reach the coroutine synchronously.
struct task_completion {
    ref<task_base> task;

    using cancellation_slot_type = asio::cancellation_slot;
    cancellation_slot_type get_cancellation_slot() const noexcept { return task->slot(); }

    void operator()(std::exception_ptr error) { task->finish(std::move(error)); }
};

// A group of tasks: the core of a nursery and of every combinator. It counts running
// children and wakes join_all() when none is left. Its policy decides what a finished
// child means (the nursery's: the first failure cancels the rest).
class scope : public cancel_node {
  public:
    // Why the scope was cancelled: from outside (its waiter or parent token), from inside
    // (nursery::cancel, a combinator's decision), or by a child's failure.
    enum class cause { none, outside, inside, failure };

    scope(asio::any_io_executor executor, cancel_node* parent, std::size_t limit);

    const asio::any_io_executor& executor() const noexcept { return executor_; }
    std::size_t active() const noexcept { return active_; }
    cause cancel_cause() const noexcept { return cause_; }
    const std::exception_ptr& first_error() const noexcept { return first_error_; }

    template <class T>
    ref<task_state<T>> spawn(asio::awaitable<T> work, std::size_t index, bool counted = true) {
        check_spawn(counted);
        ref<task_state<T>> t(new task_state<T>(*this, index, counted));
        ++active_;
        if (counted) ++counted_;
        asio::co_spawn(executor_, run_task(t.get(), std::move(work)), task_completion{t});
        return t;
    }

    void cancel_from(cause c);
    // Suspends until no child runs. Cancelling the caller cancels the scope (cause
    // outside) and goes on waiting: a scope never returns before its children. The caller
    // must have turned off Asio's throw-if-cancelled check first, so that an already
    // cancelled caller still waits for the children.
    asio::awaitable<void> join_all();
    // The same, but the caller's cancellation does not reach the scope.
    asio::awaitable<void> join_all_shielded();
    void close() noexcept { closed_ = true; }

    void child_finished(task_base& t);

  protected:
    virtual void on_child_finished(task_base& t);
    void on_cancel(asio::cancellation_type) override;

  private:
    void check_spawn(bool counted) const;

    asio::any_io_executor executor_;
    std::size_t limit_;
    std::size_t active_ = 0;
    std::size_t counted_ = 0;
    bool closed_ = false;
    cause cause_ = cause::none;
    std::exception_ptr first_error_;
    list<list_waiter> idle_waiters_;

    friend class task_base;
};

}  // namespace detail

// Observes one task of a nursery. Move-only; dropping it does not affect the task, which
// the nursery still owns and waits for.
template <class T>
class join_handle {
  public:
    join_handle() = default;
    explicit join_handle(detail::ref<detail::task_state<T>> state) : state_(std::move(state)) {}

    // The task's value; its error rethrown; cancelled_error if it was cancelled.
    asio::awaitable<T> join() { return join_state(state_); }

    // Cancels this task only.
    void cancel() { state_->cancel(); }
    bool done() const noexcept { return state_->finished(); }
    task_status status() const noexcept { return state_->status(); }
    cancel_token token() const { return cancel_token(detail::ref<detail::cancel_node>(state_)); }

  private:
    static asio::awaitable<T> join_state(detail::ref<detail::task_state<T>> state) {
        if (!state->finished()) {
            detail::list_waiter w;
            state->add_joiner(w);
            co_await w.async_wait(co_await asio::this_coro::executor, asio::use_awaitable);
        }
        co_return state->take();
    }

    detail::ref<detail::task_state<T>> state_;
};

}  // namespace keel::concurrency
