#pragma once

/// @file
/// Combinators over awaitables. Each runs its branches as tasks of a private scope on the
/// caller's executor, and returns only once every branch has stopped: a branch that lost or
/// is no longer needed is cancelled, and the combinator waits for it (its cleanup included).
/// Cancelling the caller cancels every branch; the combinator then throws cancelled_error
/// (race and any return a winner that was decided before).
///
/// - race(a, b, ...) -> variant<T...>: the first branch to finish, success or failure, wins;
///   variant::index() names it. A failed winner's error is rethrown.
/// - all(a, b, ...) -> tuple<T...>: every value; the first failure cancels the rest and is
///   rethrown.
/// - any(a, b, ...) -> variant<T...>: the first success; throws any_error if all failed.
/// - all_settled(a, b, ...) -> tuple<expected<T, exception_ptr>...>: every outcome.
/// - timeout(d, op) -> expected<T, timed_out>: op, or timed_out when d passes first on the
///   executor's keel::clock (op is cancelled and awaited).
/// - with_cancellation(token, op): op, cancelled when the token is.
/// - uncancellable(op): op runs to its end even if the caller is cancelled meanwhile; the
///   caller sees the cancellation at its next co_await. As Asio checks cancellation at every
///   co_await, a caller that is already cancelled must enter with
///   `co_await asio::this_coro::throw_if_cancelled(false)` first (or spawn the cleanup).
/// - run_on(executor, op): op on another executor (thread), awaited from this one; the
///   explicit way for work to change threads. Cancellation is forwarded.
///
/// void branches produce std::monostate. Thread-safety: as for nurseries; the branches run
/// on the caller's executor.

#include <array>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cstddef>
#include <keel/framework/concurrency/context.hpp>
#include <keel/framework/concurrency/task.hpp>
#include <keel/framework/expected.hpp>
#include <limits>
#include <tuple>
#include <variant>
#include <vector>

namespace keel::concurrency {

/// One branch's outcome in all_settled(): its value, or the exception it ended with.
template <class T>
using settled = expected<value_t<T>, std::exception_ptr>;

namespace detail {

enum class policy { settle, all, any, race };

// The scope of one combinator call. `decided` is the branch that settled it.
class group final : public scope {
  public:
    static constexpr std::size_t none = std::numeric_limits<std::size_t>::max();

    group(asio::any_io_executor ex, policy p, cancel_node* parent = nullptr)
        : scope(std::move(ex), parent, std::numeric_limits<std::size_t>::max()), policy_(p) {}

    std::size_t decided() const noexcept { return decided_; }

  protected:
    void on_child_finished(task_base& t) override {
        if (decided_ != none) return;
        bool decides = false;
        switch (policy_) {
            case policy::settle:
                break;
            case policy::all:
                decides = t.status() != task_status::succeeded;
                break;
            case policy::any:
                decides = t.status() == task_status::succeeded;
                break;
            case policy::race:
                decides = true;
                break;
        }
        if (!decides) return;
        decided_ = t.index();
        cancel_from(cause::inside);
    }

  private:
    policy policy_;
    std::size_t decided_ = none;
};

template <class... T>
using task_refs = std::tuple<ref<task_state<T>>...>;

template <class... T, std::size_t... I>
task_refs<T...> spawn_branches(group& g, std::index_sequence<I...>, asio::awaitable<T>&... ops) {
    return task_refs<T...>{g.spawn(std::move(ops), I)...};
}

template <class T>
value_t<T> take_value(task_state<T>& t) {
    if constexpr (std::is_void_v<T>) {
        t.take();
        return {};
    } else {
        return t.take();
    }
}

template <class T>
settled<T> settle(task_state<T>& t) {
    try {
        return take_value(t);
    } catch (...) {
        return unexpected(std::current_exception());
    }
}

// variant alternative `index` from the task at that position.
template <class... T, std::size_t... I>
std::variant<value_t<T>...> pick(task_refs<T...>& tasks, std::size_t index,
                                 std::index_sequence<I...>) {
    std::optional<std::variant<value_t<T>...>> result;
    ((I == index ? (result.emplace(std::in_place_index<I>, take_value(*std::get<I>(tasks))), true)
                 : false) ||
     ...);
    return std::move(*result);
}

// Spawns one task per op into a fresh group and waits, immune to Asio's
// throw-if-cancelled check, until all have stopped.
template <class... T>
asio::awaitable<task_refs<T...>> run_group(ref<group> g, asio::awaitable<T>... ops) {
    const bool checks = co_await asio::this_coro::throw_if_cancelled();
    co_await asio::this_coro::throw_if_cancelled(false);
    auto tasks = spawn_branches(*g, std::index_sequence_for<T...>{}, ops...);
    co_await g->join_all();
    co_await asio::this_coro::throw_if_cancelled(checks);
    co_return tasks;
}

}  // namespace detail

/// The first branch to finish, success or failure, wins; its index names it, and a failed winner's
/// error is rethrown.
template <class... T>
asio::awaitable<std::variant<value_t<T>...>> race(asio::awaitable<T>... ops) {
    static_assert(sizeof...(T) > 0, "race() needs at least one branch");
    detail::ref<detail::group> g(
        new detail::group(co_await asio::this_coro::executor, detail::policy::race));
    auto tasks = co_await detail::run_group(g, std::move(ops)...);
    if (g->decided() == detail::group::none) throw cancelled_error();
    co_return detail::pick(tasks, g->decided(), std::index_sequence_for<T...>{});
}

/// Every branch's value; the first failure cancels the rest and is rethrown.
template <class... T>
asio::awaitable<std::tuple<value_t<T>...>> all(asio::awaitable<T>... ops) {
    detail::ref<detail::group> g(
        new detail::group(co_await asio::this_coro::executor, detail::policy::all));
    auto tasks = co_await detail::run_group(g, std::move(ops)...);
    if (g->decided() != detail::group::none) {
        auto branches = std::apply(
            [](auto&... t) { return std::array<detail::task_base*, sizeof...(T)>{t.get()...}; },
            tasks);
        branches[g->decided()]->rethrow_unless_succeeded();
    }
    if (g->cancel_cause() == detail::scope::cause::outside) throw cancelled_error();
    auto values =
        std::apply([](auto&... t) { return std::tuple{detail::take_value(*t)...}; }, tasks);
    co_return values;
}

/// The first success; any_error when every branch failed.
template <class... T>
asio::awaitable<std::variant<value_t<T>...>> any(asio::awaitable<T>... ops) {
    static_assert(sizeof...(T) > 0, "any() needs at least one branch");
    detail::ref<detail::group> g(
        new detail::group(co_await asio::this_coro::executor, detail::policy::any));
    auto tasks = co_await detail::run_group(g, std::move(ops)...);
    if (g->decided() != detail::group::none)
        co_return detail::pick(tasks, g->decided(), std::index_sequence_for<T...>{});
    if (g->cancel_cause() == detail::scope::cause::outside) throw cancelled_error();
    std::vector<std::exception_ptr> errors;
    std::apply([&](auto&... t) { (errors.push_back(t->error()), ...); }, tasks);
    throw any_error(std::move(errors));
}

/// Every branch's outcome, value or exception.
template <class... T>
asio::awaitable<std::tuple<settled<T>...>> all_settled(asio::awaitable<T>... ops) {
    detail::ref<detail::group> g(
        new detail::group(co_await asio::this_coro::executor, detail::policy::settle));
    auto tasks = co_await detail::run_group(g, std::move(ops)...);
    if (g->cancel_cause() == detail::scope::cause::outside) throw cancelled_error();
    auto outcomes = std::apply([](auto&... t) { return std::tuple{detail::settle(*t)...}; }, tasks);
    co_return outcomes;
}

/// `op`, or timed_out when `d` passes first on the executor's keel::clock (`op` is then cancelled
/// and awaited).
template <class T>
asio::awaitable<expected<T, timed_out>> timeout(duration d, asio::awaitable<T> op) {
    auto ex = co_await asio::this_coro::executor;
    auto deadline = clock_of(ex).now() + d;
    auto winner = co_await race(std::move(op), sleep_until(deadline));
    if (winner.index() == 1) co_return unexpected(timed_out{d});
    if constexpr (std::is_void_v<T>) {
        co_return expected<void, timed_out>{};
    } else {
        co_return std::move(std::get<0>(winner));
    }
}

/// `op`, cancelled when `token` is.
template <class T>
asio::awaitable<T> with_cancellation(cancel_token token, asio::awaitable<T> op) {
    detail::ref<detail::group> g(new detail::group(co_await asio::this_coro::executor,
                                                   detail::policy::settle, token.node()));
    auto tasks = co_await detail::run_group(g, std::move(op));
    co_return std::get<0>(tasks)->take();
}

/// `op` run to its end even if the caller is cancelled meanwhile; see the file's description.
template <class T>
asio::awaitable<T> uncancellable(asio::awaitable<T> op) {
    detail::ref<detail::group> g(
        new detail::group(co_await asio::this_coro::executor, detail::policy::settle));
    const bool checks = co_await asio::this_coro::throw_if_cancelled();
    co_await asio::this_coro::throw_if_cancelled(false);
    auto task = g->spawn(std::move(op), 0);
    co_await g->join_all_shielded();
    co_await asio::this_coro::throw_if_cancelled(checks);
    co_return task->take();
}

namespace detail {
template <class T>
asio::awaitable<std::optional<T>> optional_of(asio::awaitable<T> op) {
    co_return co_await std::move(op);
}
}  // namespace detail

/// `op` on `executor` (another thread), awaited from this one; cancellation is forwarded.
template <class T>
asio::awaitable<T> run_on(asio::any_io_executor executor, asio::awaitable<T> op) {
    if constexpr (std::is_void_v<T> || std::is_default_constructible_v<T>) {
        co_return co_await asio::co_spawn(std::move(executor), std::move(op), asio::use_awaitable);
    } else {
        auto value = co_await asio::co_spawn(
            std::move(executor), detail::optional_of(std::move(op)), asio::use_awaitable);
        co_return std::move(*value);
    }
}

}  // namespace keel::concurrency
