#pragma once

// race / any / all: the combinator awaiter that runs each arm as a branch of the instance,
// records the winner (race, any) and hands the result over; and timeout_op, the race of a
// wait and a timer behind signal_op::or_timeout. Machinery of context.hpp.

#include <array>
#include <concepts>
#include <cstddef>
#include <keel/process/detail/operations.hpp>
#include <keel/signals/signal.hpp>
#include <memory>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

namespace keel::process {

template <class T>
class branch;
template <class... T>
class race_result;

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
inline constexpr bool is_branch = false;
template <class T>
inline constexpr bool is_branch<branch<T>> = true;

// What identifies an arm in the race_result: a signal, or an operation or branch passed by
// name (an lvalue: a temporary's address could be reused by a later named arm).
template <class A>
const void* tag_of(const std::remove_reference_t<A>& a) noexcept {
    using D = std::remove_cvref_t<A>;
    if constexpr (is_signal<D>)
        return &a;
    else if constexpr (std::is_lvalue_reference_v<A> && (op_descriptor<D> || is_branch<D>))
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

// What signal_op::or_timeout returns: the race of a wait and a timer, as an optional payload.
template <class T>
class [[nodiscard]] timeout_op {
    using race_type = detail::combinator<detail::combine::race, T, void>;

  public:
    using value_type = std::conditional_t<std::is_void_v<T>, bool, std::optional<T>>;

    timeout_op(detail::runtime& rt, signal_op<T> wait, timer_op timer)
        : race_(rt, tags(), detail::make_arm(std::move(wait)), detail::make_arm(std::move(timer))) {
    }

    bool await_ready() { return race_.await_ready(); }
    bool await_suspend(std::coroutine_handle<> h) noexcept { return race_.await_suspend(h); }
    value_type await_resume() {
        auto r = race_.await_resume();
        if constexpr (std::is_void_v<T>)
            return r.index() == 0;
        else if (r.index() == 0)
            return std::optional<T>(std::move(r.template get<0>()));
        else
            return std::optional<T>();
    }

  private:
    static std::array<const void*, 2> tags() noexcept { return {nullptr, nullptr}; }

    race_type race_;
};

template <class T>
timeout_op<T> signal_op<T>::or_timeout(duration d, std::string name) && {
    detail::runtime& rt = *rt_;
    return timeout_op<T>(rt, std::move(*this), timer_op(rt, d, std::move(name)));
}

}  // namespace keel::process
