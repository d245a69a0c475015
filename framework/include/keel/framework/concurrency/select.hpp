#pragma once

/// @file
/// select: wait for the first of several channel operations (Go's select).
///
/// @code
///   auto r = co_await select(case_recv(requests), case_send(replies, answer),
///                            case_timeout(std::chrono::seconds(1)));
///   switch (r.index()) {
///       case 0: /* std::get<0>(r): optional<T>, empty if `requests` is closed */ break;
///       case 1: /* the answer was sent */ break;
///       case 2: /* std::get<2>(r): timed_out */ break;
///   }
/// @endcode
///
/// The result is a variant with one alternative per case, in argument order: case_recv gives
/// std::optional<T> (empty: the channel is closed and drained), case_send gives `sent`,
/// case_timeout gives `timed_out`, case_default gives `nothing_ready`.
/// - When several cases are ready, one is chosen uniformly at random (from the executor's
///   random source, so the deterministic test scheduler's seed fixes it).
/// - Otherwise select waits for the first case to become ready and performs only that one.
///   With case_default it never waits; with case_timeout it waits at most that long on the
///   executor's keel::clock. A select may have one of these, never both.
/// - A send case on a closed channel throws channel_closed_error, as send does.
/// - Cancellation abandons every case: nothing was received or sent.
///
/// Thread-safety: as for channels (one executor).

#include <array>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cstddef>
#include <keel/framework/concurrency/channel.hpp>
#include <keel/framework/concurrency/context.hpp>
#include <tuple>
#include <type_traits>
#include <variant>

namespace keel::concurrency {

/// A receive from `ch`; made by case_recv().
template <class T>
struct recv_case {
    /// Its alternative in select's result: empty when the channel is closed and drained.
    using result_type = std::optional<T>;
    /// The channel.
    channel<T> ch;
};

/// A send of `value` on `ch`; made by case_send().
template <class T>
struct send_case {
    /// Its alternative in select's result.
    using result_type = sent;
    /// The channel.
    channel<T> ch;
    /// The value to send.
    T value;
};

/// A wait of `after`; made by case_timeout().
struct timeout_case {
    /// Its alternative in select's result.
    using result_type = timed_out;
    /// How long select waits.
    duration after;
};

/// Makes select not wait; made by case_default().
struct default_case {
    /// Its alternative in select's result: no other case was ready.
    using result_type = nothing_ready;
};

/// A case that receives from `ch`.
template <class T>
recv_case<T> case_recv(channel<T> ch) {
    return {std::move(ch)};
}
/// A case that sends `value` on `ch`.
template <class T, class U>
send_case<T> case_send(channel<T> ch, U&& value) {
    return {std::move(ch), T(std::forward<U>(value))};
}
/// A case that ends the select after `after` when no other case was ready.
inline timeout_case case_timeout(duration after) {
    return {after};
}
/// A case that ends the select at once when no other case is ready.
inline default_case case_default() {
    return {};
}

namespace detail {

template <class C>
inline constexpr bool is_wait_case =
    std::is_same_v<C, timeout_case> || std::is_same_v<C, default_case>;

// State of one blocked select, shared with its timer's completion handler.
class select_core final : public ref_counted {
  public:
    static constexpr std::size_t none = static_cast<std::size_t>(-1);

    class core_waiter final : public waiter {
      public:
        explicit core_waiter(select_core& core) : core_(core) {}

      protected:
        void on_cancel(asio::cancellation_type) override {
            core_.finish(none, asio::error::operation_aborted);
        }

      private:
        select_core& core_;
    };

    core_waiter wait{*this};
    std::size_t winner = none;
    bool settled = false;
    std::array<list_hook*, 16> cases{};
    std::size_t case_count = 0;
    asio::cancellation_signal timer;
    bool timer_armed = false;

    // Settles the select: unregisters every case, stops the timer, wakes the coroutine.
    void finish(std::size_t index, error_code ec = {}) {
        if (settled) return;
        settled = true;
        winner = index;
        for (std::size_t i = 0; i < case_count; ++i) cases[i]->unlink();
        if (timer_armed) {
            timer_armed = false;
            timer.emit(asio::cancellation_type::terminal);
        }
        wait.complete(ec);
    }
};

template <class T>
class select_receiver final : public receiver<T> {
  public:
    select_core* core = nullptr;
    std::size_t index = 0;
    std::optional<T> value;

    void deliver(T&& v) override {
        value.emplace(std::move(v));
        core->finish(index);
    }
    void closed() override { core->finish(index); }
};

template <class T>
class select_sender final : public sender<T> {
  public:
    select_core* core = nullptr;
    std::size_t index = 0;
    T* value = nullptr;
    bool was_closed = false;

    T take() override {
        core->finish(index);
        return std::move(*value);
    }
    void closed() override {
        was_closed = true;
        core->finish(index);
    }
};

struct select_timer_handler {
    ref<select_core> core;
    std::size_t index;

    using cancellation_slot_type = asio::cancellation_slot;
    cancellation_slot_type get_cancellation_slot() const noexcept { return core->timer.slot(); }

    void operator()(error_code ec) {
        if (ec || core->settled) return;
        core->timer_armed = false;
        core->finish(index);
    }
};

// What a case registers while select waits; arm() puts it where the channel finds it.
template <class C>
struct case_node {
    void arm(const asio::any_io_executor& ex, select_core& core, std::size_t index, C& c) {
        if constexpr (std::is_same_v<C, timeout_case>) {
            auto& clock = clock_of(ex);
            core.timer_armed = true;
            clock.async_wait_until(ex, clock.now() + c.after,
                                   select_timer_handler{ref<select_core>(&core), index});
        }
    }
};
template <class T>
struct case_node<recv_case<T>> {
    void arm(const asio::any_io_executor&, select_core& core, std::size_t index, recv_case<T>& c) {
        node.core = &core;
        node.index = index;
        c.ch.state().wait_recv(node);
        core.cases[core.case_count++] = &node;
    }
    select_receiver<T> node;
};
template <class T>
struct case_node<send_case<T>> {
    void arm(const asio::any_io_executor&, select_core& core, std::size_t index, send_case<T>& c) {
        node.core = &core;
        node.index = index;
        node.value = &c.value;
        c.ch.state().wait_send(node);
        core.cases[core.case_count++] = &node;
    }
    select_sender<T> node;
};

// Settles a select whose coroutine unwinds without having been woken (an exception, or a
// frame destroyed at shutdown), so no channel or timer keeps pointing into the frame.
struct select_guard {
    select_core& core;
    ~select_guard() { core.finish(select_core::none, asio::error::operation_aborted); }
};

template <class Nodes, class Cases, std::size_t... I>
void arm_all(const asio::any_io_executor& ex, select_core& core, Nodes& nodes, Cases& cases,
             std::index_sequence<I...>) {
    (std::get<I>(nodes).arm(ex, core, I, std::get<I>(cases)), ...);
}

template <class T>
bool ready(recv_case<T>& c) {
    return c.ch.state().recv_ready();
}
template <class T>
bool ready(send_case<T>& c) {
    return c.ch.state().send_ready();
}
inline bool ready(timeout_case&) {
    return false;
}
inline bool ready(default_case&) {
    return false;
}

template <class T>
std::optional<T> perform(recv_case<T>& c) {
    return c.ch.try_recv();
}
template <class T>
sent perform(send_case<T>& c) {
    c.ch.try_send(std::move(c.value));
    return {};
}
inline timed_out perform(timeout_case& c) {
    return {c.after};
}
inline nothing_ready perform(default_case&) {
    return {};
}

template <class C>
typename C::result_type outcome(C& c, case_node<C>&) {
    return perform(c);
}
template <class T>
std::optional<T> outcome(recv_case<T>&, case_node<recv_case<T>>& n) {
    return std::move(n.node.value);
}
template <class T>
sent outcome(send_case<T>&, case_node<send_case<T>>& n) {
    if (n.node.was_closed) throw channel_closed_error();
    return {};
}

template <class Result, class Tuple, class F, std::size_t... I>
Result visit_index(std::size_t index, Tuple& cases, F&& f, std::index_sequence<I...>) {
    std::optional<Result> result;
    ((I == index ? (result.emplace(std::in_place_index<I>,
                                   f(std::get<I>(cases), std::integral_constant<std::size_t, I>{})),
                    true)
                 : false) ||
     ...);
    return std::move(*result);
}

template <class Tuple, std::size_t... I>
std::size_t pick_ready(const asio::any_io_executor& ex, Tuple& cases, std::index_sequence<I...>) {
    std::array<std::size_t, sizeof...(I)> ready_cases{};
    std::size_t n = 0;
    ((ready(std::get<I>(cases)) ? (ready_cases[n++] = I, 0) : 0), ...);
    if (n == 0) return select_core::none;
    return n == 1 ? ready_cases[0] : ready_cases[random_below(ex, n)];
}

template <class Tuple, std::size_t... I>
constexpr std::size_t wait_case_index(std::index_sequence<I...>) {
    std::size_t index = select_core::none;
    ((is_wait_case<std::tuple_element_t<I, Tuple>> ? (index = I, 0) : 0), ...);
    return index;
}

}  // namespace detail

/// Waits for the first ready case and performs it; see the file's description.
template <class... Cases>
asio::awaitable<std::variant<typename Cases::result_type...>> select(Cases... cases) {
    static_assert(sizeof...(Cases) > 0 && sizeof...(Cases) <= 16, "select takes 1 to 16 cases");
    static_assert((0 + ... + (detail::is_wait_case<Cases> ? 1 : 0)) <= 1,
                  "select takes one case_timeout or one case_default, never both");
    using result = std::variant<typename Cases::result_type...>;
    using indices = std::index_sequence_for<Cases...>;
    constexpr std::size_t wait_index = detail::wait_case_index<std::tuple<Cases...>>(indices{});
    constexpr bool has_default = (std::is_same_v<Cases, default_case> || ...);

    auto ex = co_await asio::this_coro::executor;
    std::tuple<Cases&...> all(cases...);
    std::size_t index = detail::pick_ready(ex, all, indices{});
    if (index == detail::select_core::none && has_default) index = wait_index;
    if (index != detail::select_core::none) {
        co_return detail::visit_index<result>(
            index, all, [](auto& c, auto) { return detail::perform(c); }, indices{});
    }

    detail::ref<detail::select_core> core(new detail::select_core());
    std::tuple<detail::case_node<Cases>...> nodes;
    detail::select_guard guard{*core};
    detail::arm_all(ex, *core, nodes, all, indices{});
    co_await core->wait.async_wait(ex, asio::use_awaitable);
    co_return detail::visit_index<result>(
        core->winner, all,
        [&nodes](auto& c, auto i) {
            return detail::outcome(c, std::get<decltype(i)::value>(nodes));
        },
        indices{});
}

}  // namespace keel::concurrency
