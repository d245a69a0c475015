#pragma once

/// @file
/// keel::process::durable<T>: the coroutine type of process handlers and their helpers.
///
/// Not asio::awaitable, on purpose: replaying a journal must cost next to nothing per entry.
/// A durable operation already in the journal completes synchronously (await_ready), and a
/// helper coroutine that finishes without suspending hands control back to its caller by
/// returning from the caller's await_suspend instead of resuming it, so a replay of 100,000
/// entries through any chain of helpers runs in constant stack on every optimisation level.
/// (g++ 12 does not emit symmetric transfer as a tail call at -O0, so relying on it alone
/// would overflow the stack of Debug and sanitizer builds.) A helper that did suspend resumes
/// its caller by symmetric transfer.
///
/// durable<T> is lazy (starts when awaited), move-only, and owns its frame. It may only be
/// awaited from another durable<T> running inside a process instance. Not thread-safe: an
/// instance runs on one thread at a time.

#include <coroutine>
#include <exception>
#include <optional>
#include <type_traits>
#include <utility>

namespace keel::process {

template <class T>
class durable;

namespace detail {

struct promise_base {
    std::coroutine_handle<> continuation;
    std::exception_ptr error;
    bool inline_start = false;  // the caller's await_suspend is still on the stack
    bool done = false;
    // Set for the root of a branch: told instead of resuming a continuation.
    void (*on_done)(void*) noexcept = nullptr;
    void* on_done_arg = nullptr;

    std::suspend_always initial_suspend() noexcept { return {}; }
    void unhandled_exception() noexcept { error = std::current_exception(); }

    struct final_awaiter {
        bool await_ready() noexcept { return false; }
        template <class P>
        std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) noexcept {
            promise_base& p = h.promise();
            p.done = true;
            if (p.on_done) {
                p.on_done(p.on_done_arg);
                return std::noop_coroutine();
            }
            if (p.inline_start || !p.continuation) return std::noop_coroutine();
            return p.continuation;
        }
        void await_resume() noexcept {}
    };
    final_awaiter final_suspend() noexcept { return {}; }
};

template <class T>
struct promise : promise_base {
    std::optional<T> value;
    durable<T> get_return_object() noexcept;
    template <class U>
    requires std::is_convertible_v<U&&, T>
    void return_value(U&& v) { value.emplace(std::forward<U>(v)); }
    T take() {
        if (error) std::rethrow_exception(error);
        return std::move(*value);
    }
};

template <>
struct promise<void> : promise_base {
    durable<void> get_return_object() noexcept;
    void return_void() noexcept {}
    void take() {
        if (error) std::rethrow_exception(error);
    }
};

}  // namespace detail

/// The coroutine type of process handlers and their helpers, whose result is a T (see the
/// file's description). Lazy, move-only; owns its frame.
template <class T = void>
class [[nodiscard]] durable {
  public:
    using promise_type = detail::promise<T>;  ///< the coroutine's promise (machinery)
    using value_type = T;                     ///< what co_await gives
    using handle_type = std::coroutine_handle<promise_type>;  ///< the frame's handle

    /// No coroutine: false as a bool; not to be awaited.
    durable() = default;
    /// Takes ownership of the frame `h` (the promise's get_return_object).
    explicit durable(handle_type h) noexcept : h_(h) {}
    ///@{
    /// Moves the frame; the source is left empty. Assigning destroys the frame it held.
    durable(durable&& o) noexcept : h_(std::exchange(o.h_, {})) {}
    durable& operator=(durable&& o) noexcept {
        if (this != &o) {
            reset();
            h_ = std::exchange(o.h_, {});
        }
        return *this;
    }
    ///@}
    ~durable() { reset(); }

    ///@{
    /// Awaiting runs the coroutine at once, on the caller's stack; if it finishes without
    /// suspending, the caller goes on without a resume. Its result is the coroutine's value,
    /// or its exception rethrown.
    bool await_ready() const noexcept { return false; }
    bool await_suspend(std::coroutine_handle<> caller) {
        auto& p = h_.promise();
        p.continuation = caller;
        p.inline_start = true;
        h_.resume();
        p.inline_start = false;
        return !p.done;  // finished already: the caller continues without a resume
    }
    T await_resume() { return h_.promise().take(); }
    ///@}

    /// For the engine and branches: the frame's handle, still owned.
    handle_type handle() const noexcept { return h_; }
    /// For the engine and branches: the frame's handle, which the caller now owns.
    handle_type release() noexcept { return std::exchange(h_, {}); }
    /// Whether it holds a coroutine (not default-constructed, moved from or released).
    explicit operator bool() const noexcept { return static_cast<bool>(h_); }

  private:
    void reset() noexcept {
        if (h_) std::exchange(h_, {}).destroy();
    }

    handle_type h_;
};

namespace detail {

template <class T>
durable<T> promise<T>::get_return_object() noexcept {
    return durable<T>(std::coroutine_handle<promise<T>>::from_promise(*this));
}

inline durable<void> promise<void>::get_return_object() noexcept {
    return durable<void>(std::coroutine_handle<promise<void>>::from_promise(*this));
}

}  // namespace detail

}  // namespace keel::process
