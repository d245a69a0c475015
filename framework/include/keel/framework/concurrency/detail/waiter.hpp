#pragma once

// A suspended coroutine waiting for an event. The waiter lives in the waiting coroutine's
// frame and holds its completion handler; whoever causes the event calls complete(), which
// posts the handler, so a waker is never re-entered by the coroutine it wakes.
// Cancelling the waiting coroutine through its cancellation slot calls on_cancel().

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/append.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>
#include <keel/framework/concurrency/detail/intrusive.hpp>
#include <optional>
#include <utility>

namespace keel::concurrency::detail {

namespace asio = boost::asio;
using error_code = boost::system::error_code;

class waiter {
  public:
    using handler_type = asio::any_completion_handler<void(error_code)>;

    waiter() = default;
    waiter(const waiter&) = delete;
    waiter& operator=(const waiter&) = delete;
    virtual ~waiter() = default;

    bool waiting() const noexcept { return static_cast<bool>(handler_); }

    // Posts the handler with `ec`. No-op once completed.
    void complete(error_code ec = {}) {
        if (!handler_) return;
        auto handler = std::move(handler_);
        handler_ = nullptr;
        asio::post(executor_, asio::append(std::move(handler), ec));
    }

    // A completion taken out of its waiter, to be run once the waker is done.
    class pending {
      public:
        pending(handler_type h, asio::any_io_executor ex)
            : handler_(std::move(h)), executor_(std::move(ex)) {}
        pending(pending&&) = default;
        pending& operator=(pending&&) = delete;  // any_completion_handler's recurses in 1.81
        // Resumes the waiter inline when the caller runs on its executor (as co_spawn
        // resumes the coroutine awaiting it), else posts.
        void dispatch(error_code ec = {}) {
            asio::dispatch(executor_, asio::append(std::move(handler_), ec));
        }

      private:
        handler_type handler_;
        asio::any_io_executor executor_;
    };

    // Ends the wait without resuming the waiter yet; cancellation no longer reaches it.
    std::optional<pending> detach() {
        if (!handler_) return std::nullopt;
        auto handler = std::move(handler_);
        handler_ = nullptr;
        return pending(std::move(handler), executor_);
    }

    // Suspends until complete() is called. The caller makes the waiter findable first.
    template <class Token>
    auto async_wait(const asio::any_io_executor& ex, Token&& token) {
        return asio::async_initiate<Token, void(error_code)>(
            [this, ex](auto handler) {
                auto slot = asio::get_associated_cancellation_slot(handler);
                executor_ = asio::get_associated_executor(handler, ex);
                // Asio 1.81's move assignment of any_completion_handler recurses: swap.
                handler_type erased(std::move(handler));
                handler_.swap(erased);
                if (slot.is_connected()) {
                    slot.assign([this](asio::cancellation_type type) {
                        if (waiting()) on_cancel(type);
                    });
                }
            },
            token);
    }

  protected:
    // Called when the waiting coroutine is cancelled while it waits.
    virtual void on_cancel(asio::cancellation_type) = 0;

  private:
    handler_type handler_;
    asio::any_io_executor executor_;
};

// A waiter kept in a list; cancelling it leaves the list with operation_aborted.
class list_waiter : public waiter, public list_hook {
  public:
    void wake(error_code ec = {}) {
        unlink();
        complete(ec);
    }

  protected:
    void on_cancel(asio::cancellation_type) override { wake(asio::error::operation_aborted); }
};

// Wakes every waiter of a list.
inline void wake_all(list<list_waiter>& waiters) {
    while (auto* w = waiters.pop_front()) w->complete();
}

}  // namespace keel::concurrency::detail
