#pragma once

/// @file
/// Tasks and join handles.
///
/// A task is a coroutine started by a nursery (or a combinator) on the nursery's executor.
/// It is a node of the cancellation tree under its nursery, and owns the Asio cancellation
/// signal bound to its coroutine: cancelling the node emits the signal, so whatever the task
/// is waiting on (a socket, a timer, a clock wait, a channel, a Redis request) is cancelled
/// at once, and, as everywhere in Asio, every later co_await in the task throws
/// operation_aborted.
///
/// join_handle<T> observes one task. co_await h.join() returns its value, rethrows its error,
/// or throws cancelled_error when the task ended because it was cancelled; a finished task
/// answers at once. The value is moved out: join() succeeds once per value.
///
/// Thread-safety: none. A task, its handle and its nursery belong to the nursery's executor,
/// which must not run handlers concurrently (an io_context run by one thread, or a strand).

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/append.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/version.hpp>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <keel/framework/concurrency/cancellation.hpp>
#include <keel/framework/concurrency/context.hpp>
#include <keel/framework/concurrency/detail/waiter.hpp>
#include <keel/framework/concurrency/errors.hpp>
#include <list>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <variant>

namespace keel::concurrency {

/// Where a task stands: running, or how it ended.
enum class task_status : unsigned char { running, succeeded, failed, cancelled };

/// The value type of awaitable<T>, with void as std::monostate (for variants and tuples).
template <class T>
using value_t = std::conditional_t<std::is_void_v<T>, std::monostate, T>;

/// Gives the value type of an awaitable type.
template <class A>
struct awaitable_traits;
/// The value type of asio::awaitable<T>: T.
template <class T, class Executor>
struct awaitable_traits<asio::awaitable<T, Executor>> {
    /// T.
    using value_type = T;
};
/// The value type of awaitable type A (cv and reference removed).
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
    // For a task whose work co_spawn runs inline, up to its first suspension: the task
    // counts as started, and a cancellation that arrives before co_spawn returns is held
    // until end_inline() (Asio's entry point would rethrow it out of the io_context if the
    // work ended without ever suspending).
    void begin_inline() noexcept {
        started_ = true;
        inline_ = true;
    }
    void end_inline();
    void failed(std::exception_ptr error) noexcept { error_ = std::move(error); }
    // Called once the task's coroutine has completed.
    void finish(std::exception_ptr error);

    asio::cancellation_slot slot() noexcept { return signal_.slot(); }
    // Throws the task's error, or cancelled_error, unless it succeeded.
    void rethrow_unless_succeeded() const;

  protected:
    void on_cancel(asio::cancellation_type type) override;
    // The task's joiners are released (out of reach of their cancellation, all but the first
    // resumed) before the owner's policy runs, and the first is resumed after it. A joiner
    // waiting in a join coroutine is returned, one with a direct handler kept.
    virtual std::optional<waiter::pending> release_joiners() = 0;
    virtual void resume_first_joiner() = 0;

  private:
    // Laid out to fill the padding of the base classes: a task is allocated per spawn.
    std::uint32_t index_;
    scope* owner_;
    std::exception_ptr error_;
    asio::cancellation_signal signal_;
    bool counted_;
    bool started_ = false;
    bool inline_ = false;
    bool held_cancel_ = false;
    task_status status_ = task_status::running;
};

// A task whose value can be handed to co_spawn's and use_awaitable's handlers directly:
// co_spawn runs the work itself and a join is one asynchronous operation, with no wrapper
// coroutine frame. Other value types go through run_task and join_state.
template <class T>
inline constexpr bool direct_value = std::is_void_v<T> || (std::is_default_constructible_v<T> &&
                                                           std::is_move_constructible_v<T>);

template <class T>
struct join_signature {
    using type = void(std::exception_ptr, T);
};
template <>
struct join_signature<void> {
    using type = void(std::exception_ptr);
};

template <class T>
class task_state final : public task_base {
  public:
    using signature = typename join_signature<std::conditional_t<direct_value<T>, T, void>>::type;
    // The handler of a coroutine awaiting join(): stored as is, not type-erased.
    using join_handler =
        typename asio::async_result<asio::use_awaitable_t<>, signature>::handler_type;

    using task_base::task_base;

    template <class U>
    void set_value(U&& value) {
        value_.emplace(std::forward<U>(value));
    }
    // The value (moved out), or the task's error.
    T take() {
        rethrow_unless_succeeded();
        if constexpr (!std::is_void_v<T>) {
            if (!value_) throw std::logic_error("keel::concurrency: task value already taken");
            T v = std::move(*value_);
            value_.reset();
            return v;
        }
    }

    // Completes `h` with the outcome now (the task has finished), inline.
    void answer(join_handler h) { deliver(std::move(h), how::call); }

    // Keeps `h` until the task finishes; cancelling the joiner completes it with
    // cancelled_error.
    void add_direct_joiner(join_handler h) {
        auto slot = asio::get_associated_cancellation_slot(h);
        if (!has_first_) {
            emplace_first(std::move(h));
        } else {
            if (!more_) more_ = std::make_unique<std::list<join_handler>>();
            more_->push_back(std::move(h));
        }
        if (slot.is_connected()) slot.template emplace<join_cancel>(ref<task_state>(this), slot);
    }

    // A joiner waiting in a join coroutine (value types that need one).
    void add_joiner(list_waiter& w) { waiters_.push_back(w); }

    ~task_state() override {
        if (has_first_) destroy_first();
    }

  protected:
    std::optional<waiter::pending> release_joiners() override {
        std::optional<waiter::pending> first;
        if constexpr (!direct_value<T>) {
            auto* w = waiters_.pop_front();
            if (w) first = w->detach();
            while (auto* other = waiters_.pop_front()) other->complete();
        }
        if (!has_first_ && more_ && !more_->empty()) {
            emplace_first(std::move(more_->front()));
            more_->pop_front();
        }
        first_released_ = true;  // out of reach of its cancellation
        if (!more_) return first;
        // The first joiner takes the value: the others see it taken, as they would if they
        // asked after the first.
        for (auto& h : *more_) {
            if constexpr (!std::is_void_v<T>) {
                if (status() == task_status::succeeded) {
                    complete(std::move(h),
                             std::make_exception_ptr(
                                 std::logic_error("keel::concurrency: task value already taken")),
                             {}, how::post);
                    continue;
                }
            }
            deliver(std::move(h), how::post);
        }
        more_.reset();
        return first;
    }

    void resume_first_joiner() override {
        if (!has_first_) return;
        join_handler h(std::move(first()));
        destroy_first();
        deliver(std::move(h), how::dispatch);
    }

  private:
    // Left in a joiner's cancellation slot. A waiting joiner is known by its slot, which
    // belongs to its coroutine and to no other joiner while it waits.
    struct join_cancel {
        ref<task_state> task;
        asio::cancellation_slot slot;
        void operator()(asio::cancellation_type) const { task->cancel_joiner(slot); }
    };

    join_handler& first() noexcept {
        return *std::launder(reinterpret_cast<join_handler*>(first_));
    }
    void emplace_first(join_handler&& h) {
        new (first_) join_handler(std::move(h));
        has_first_ = true;
    }
    void destroy_first() noexcept {
        first().~join_handler();
        has_first_ = false;
    }

    void cancel_joiner(const asio::cancellation_slot& slot) {
        std::optional<join_handler> h;
        if (has_first_ && !first_released_ &&
            asio::get_associated_cancellation_slot(first()) == slot) {
            h.emplace(std::move(first()));
            destroy_first();
        } else if (more_) {
            for (auto it = more_->begin(); it != more_->end(); ++it) {
                if (asio::get_associated_cancellation_slot(*it) != slot) continue;
                h.emplace(std::move(*it));
                more_->erase(it);
                break;
            }
        }
        if constexpr (direct_value<T>) {
            if (h)
                complete(std::move(*h), std::make_exception_ptr(cancelled_error()), {}, how::post);
        }
    }

  private:
    // How a joiner is completed: called here (the joiner is the caller: a join of a finished
    // task), dispatched to its executor (inline when the caller runs there), or posted.
    enum class how { call, dispatch, post };

    // Completes `h` with this task's outcome, taking the value.
    void deliver(join_handler h, how post) {
        if constexpr (direct_value<T>) {
            std::exception_ptr error;
            value_t<T> value{};
            try {
                if constexpr (std::is_void_v<T>)
                    take();
                else
                    value = take();
            } catch (...) {
                error = std::current_exception();
            }
            complete(std::move(h), std::move(error), std::move(value), post);
        }
    }

    static void complete(join_handler h, std::exception_ptr error, value_t<T> value, how way) {
        if constexpr (direct_value<T>) {
            auto run = [&](auto&& target) {
                if constexpr (std::is_void_v<T>)
                    target(std::move(h), std::move(error));
                else
                    target(std::move(h), std::move(error), std::move(value));
            };
            auto ex = asio::get_associated_executor(h);
            if (way == how::dispatch) {
                // What asio::dispatch would do, without wrapping the handler in a function.
                if (runs_in_this_thread(ex)) way = how::call;
            }
            if (way == how::call) {
                run([](join_handler&& h, auto&&... args) { std::move(h)(std::move(args)...); });
            } else if (way == how::post) {
                run([&](join_handler&& h, auto&&... args) {
                    asio::post(ex, asio::append(std::move(h), std::move(args)...));
                });
            } else {
                run([&](join_handler&& h, auto&&... args) {
                    asio::dispatch(ex, asio::append(std::move(h), std::move(args)...));
                });
            }
        }
    }

    // The first joiner (it takes the value), then any others (rare). The flags sit in the
    // padding at the end of task_base.
    bool has_first_ = false;
    bool first_released_ = false;  // out of reach of its cancellation
    alignas(join_handler) unsigned char first_[sizeof(join_handler)];
    std::unique_ptr<std::list<join_handler>> more_;
    struct no_waiters {};
    [[no_unique_address]] std::conditional_t<direct_value<T>, no_waiters, list<list_waiter>>
        waiters_;  // joiners in join coroutines
    [[no_unique_address]] std::conditional_t<std::is_void_v<T>, std::monostate, std::optional<T>>
        value_;
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

// co_spawn's completion handler for a task. It has no associated executor: the task is
// finished on the executor its coroutine ran on.
struct task_completion {
    ref<task_base> task;

    void operator()(std::exception_ptr error) { task->finish(std::move(error)); }
};

// co_spawn's completion handler for a task whose work co_spawn runs itself.
template <class T>
struct direct_completion {
    ref<task_state<T>> task;

    void operator()(std::exception_ptr error) { task->finish(std::move(error)); }
    template <class U>
    void operator()(std::exception_ptr error, U&& value) {
        if (!error) task->set_value(std::forward<U>(value));
        task->finish(std::move(error));
    }
};

// co_spawn(executor, work, handler) with `slot` as the handler's cancellation slot.
template <class T, class Handler>
void co_spawn_in_slot(const asio::any_io_executor& executor, asio::awaitable<T> work,
                      Handler handler, asio::cancellation_slot slot) {
    asio::co_spawn(executor, std::move(work),
                   asio::bind_cancellation_slot(slot, std::move(handler)));
}

// The same, with the slot given to the coroutine as its own. co_spawn puts a proxy handler
// between a handler's slot and the coroutine: one more allocation and 48 more bytes per
// task, and for a handler without an executor the proxy only forwards each emission,
// synchronously. On the Boost release Keel is built against (1.81) the coroutine is launched
// as co_spawn launches it, minus the proxy; cancellation behaves the same. Any other release
// takes co_spawn_in_slot.
template <class T, class Handler>
void spawn_in_slot(const asio::any_io_executor& executor, asio::awaitable<T> work, Handler handler,
                   asio::cancellation_slot slot) {
#if BOOST_VERSION == 108100
    asio::cancellation_state state(slot);
    auto entry = (asio::detail::co_spawn_entry_point)(
        static_cast<asio::awaitable<T>*>(nullptr), executor,
        asio::detail::awaitable_as_function<T, asio::any_io_executor>(std::move(work)),
        std::move(handler));
    asio::detail::awaitable_handler<asio::any_io_executor, void>(std::move(entry), executor, slot,
                                                                 state)
        .launch();
#else
    co_spawn_in_slot(executor, std::move(work), std::move(handler), slot);
#endif
}

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
        if constexpr (direct_value<T>) {
            if (!t->cancelled() && runs_inline()) {
                t->begin_inline();
                spawn_in_slot(executor_, std::move(work), direct_completion<T>{t}, t->slot());
                t->end_inline();
                return t;
            }
        }
        spawn_in_slot(executor_, run_task(t.get(), std::move(work)), task_completion{t}, t->slot());
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
    // Whether co_spawn on the scope's executor starts the coroutine before it returns: an
    // io_context's executor, called from a thread that runs it.
    bool runs_inline() const noexcept { return runs_in_this_thread(executor_); }

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

/// Observes one task of a nursery. Move-only; dropping it does not affect the task, which
/// the nursery still owns and waits for.
template <class T>
class join_handle {
  public:
    join_handle() = default;
    /// A handle on the task `state` (nursery::spawn makes them).
    explicit join_handle(detail::ref<detail::task_state<T>> state) : state_(std::move(state)) {}

    /// The task's value; its error rethrown; cancelled_error if it was cancelled.
    asio::awaitable<T> join() {
        if constexpr (detail::direct_value<T>) {
            return asio::async_initiate<const asio::use_awaitable_t<>&,
                                        typename detail::task_state<T>::signature>(
                join_initiation{state_}, asio::use_awaitable);
        } else {
            return join_state(state_);
        }
    }

    /// Cancels this task only.
    void cancel() { state_->cancel(); }
    /// Whether the task has finished.
    bool done() const noexcept { return state_->finished(); }
    /// Where the task stands.
    task_status status() const noexcept { return state_->status(); }
    /// A token cancelled with the task (or the nursery): for sources and registrations that must
    /// follow it.
    cancel_token token() const { return cancel_token(detail::ref<detail::cancel_node>(state_)); }

  private:
    struct join_initiation {
        detail::ref<detail::task_state<T>> state;
        void operator()(typename detail::task_state<T>::join_handler h) const {
            if (state->finished())
                state->answer(std::move(h));
            else
                state->add_direct_joiner(std::move(h));
        }
    };

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
