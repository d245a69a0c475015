#pragma once

/// @file
/// The nursery: a scope that owns the tasks spawned into it (Trio's nursery, Kotlin's
/// coroutineScope).
///
/// @code
///   co_await keel::concurrency::open_nursery([&](nursery& n) -> asio::awaitable<void> {
///       n.spawn(serve(socket));
///       auto h = n.spawn(fetch(key));
///       auto value = co_await h.join();
///   });
/// @endcode
///
/// open_nursery runs the body as the nursery's first task and returns only when the body and
/// every child have finished. Rules:
/// - The first failure (body or child) cancels every other task at its next suspension point,
///   waits for their cleanup, and is the error open_nursery throws. Errors of tasks that
///   were cancelled are suppressed.
/// - Cancelling the coroutine that awaits open_nursery (or the parent token in the options)
///   cancels everything inside, nested nurseries included; open_nursery then throws
///   cancelled_error once all have stopped.
/// - nursery::cancel() stops everything inside from within: the nursery then ends normally,
///   returning the body's value if the body had finished (a void body that was cancelled
///   counts as finished).
/// - Children run on the nursery's executor, the one of the coroutine that opened it. A
///   child that must run elsewhere awaits run_on(executor, work) (combinators.hpp).
/// - At most max_children children run at once (the body not counted); spawn beyond that
///   throws spawn_limit_error. spawn after the nursery has ended throws std::logic_error.
/// - A task spawned into a nursery that is already cancelled is cancelled at its first
///   co_await: its work does not start.
///
/// Thread-safety: none; a nursery and its tasks belong to the executor of the coroutine that
/// opened it. Use it only from that executor.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/this_coro.hpp>
#include <concepts>
#include <cstddef>
#include <keel/framework/concurrency/cancellation.hpp>
#include <keel/framework/concurrency/task.hpp>
#include <type_traits>

namespace keel::concurrency {

namespace detail {
struct nursery_access;
}

/// How open_nursery bounds and attaches a nursery.
struct nursery_options {
    /// Children running at once, the body not counted; spawn beyond it throws spawn_limit_error.
    std::size_t max_children = 1024;
    /// An additional parent in the cancellation tree: cancelling it cancels the nursery.
    cancel_token parent;
};

/// A scope that owns the tasks spawned into it; made by open_nursery(); see the file's description.
class nursery {
  public:
    nursery(const nursery&) = delete;
    nursery& operator=(const nursery&) = delete;

    /// Starts `work` as a child; its handle may be dropped.
    template <class T>
    join_handle<T> spawn(asio::awaitable<T> work) {
        return join_handle<T>(scope_->spawn(std::move(work), 0));
    }

    /// Spawns f(), keeping the callable (and its captures) alive until the task ends.
    template <class F>
    requires std::invocable<F&>
    auto spawn(F f) {
        using T = awaitable_value_t<std::invoke_result_t<F&>>;
        return spawn(invoke_owned<T>(std::move(f)));
    }

    /// Cancels the body and every child; the nursery then ends without error.
    void cancel() { scope_->cancel_from(detail::scope::cause::inside); }
    /// Whether the nursery was cancelled, from inside or outside.
    bool cancelled() const noexcept { return scope_->cancelled(); }
    /// A token cancelled with the nursery.
    cancel_token token() const { return cancel_token(detail::ref<detail::cancel_node>(scope_)); }
    /// Running tasks, the body included.
    std::size_t active() const noexcept { return scope_->active(); }
    /// The executor its tasks run on.
    const asio::any_io_executor& get_executor() const noexcept { return scope_->executor(); }

  private:
    explicit nursery(detail::ref<detail::scope> s) : scope_(std::move(s)) {}

    template <class T, class F>
    static asio::awaitable<T> invoke_owned(F f) {
        co_return co_await f();
    }

    friend struct detail::nursery_access;

    detail::ref<detail::scope> scope_;
};

namespace detail {

struct nursery_access {
    static nursery make(ref<scope> s) { return nursery(std::move(s)); }
    static scope& scope_of(nursery& n) { return *n.scope_; }
};

// What open_nursery returns or throws once every task has finished.
template <class T>
T nursery_outcome(scope& s, task_state<T>& body) {
    if (s.first_error()) std::rethrow_exception(s.first_error());
    if (s.cancel_cause() == scope::cause::outside) throw cancelled_error();
    if (body.status() == task_status::failed) std::rethrow_exception(body.error());
    if constexpr (std::is_void_v<T>) {
        return;
    } else {
        return body.take();
    }
}

}  // namespace detail

/// Runs body(nursery&) as the first task of a new nursery and returns its value once every
/// task of the nursery has finished. See the rules above.
template <class F>
requires std::invocable<F&, nursery&> std::invoke_result_t<F&, nursery&> open_nursery(
    F body, nursery_options options) {
    auto ex = co_await asio::this_coro::executor;
    // From here the nursery must wait for its children even if this coroutine is cancelled.
    const bool checks = co_await asio::this_coro::throw_if_cancelled();
    co_await asio::this_coro::throw_if_cancelled(false);
    nursery n = detail::nursery_access::make(detail::ref<detail::scope>(
        new detail::scope(ex, options.parent.node(), options.max_children)));
    auto& s = detail::nursery_access::scope_of(n);
    auto main = s.spawn(body(n), 0, false);
    co_await s.join_all();
    s.close();
    co_await asio::this_coro::throw_if_cancelled(checks);
    co_return detail::nursery_outcome(s, *main);
}

/// The same with the default options. An overload, not a default argument: a braced default
/// argument in a co_awaited call is destroyed twice by g++ 12 (docs/architecture.md).
template <class F>
requires std::invocable<F&, nursery&> std::invoke_result_t<F&, nursery&> open_nursery(F body) {
    return open_nursery(std::move(body), nursery_options());
}

}  // namespace keel::concurrency
