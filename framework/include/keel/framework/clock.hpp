#pragma once

/// @file
/// The injectable clock. Everything in Keel that reads the time or waits for it (durable
/// timers, sleeps, retry backoff) goes through a keel::clock, so tests can swap the system
/// clock for a manual one and let three days pass in a millisecond.
///
/// Time is wall-clock time (std::chrono::system_clock): durable timers are stored as absolute
/// instants and must mean the same thing after a restart. Socket and request deadlines that
/// only matter to a live connection use Asio's steady timers directly and are not clock-driven.

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>

namespace keel {

namespace asio = boost::asio;
/// Asio's error code, as clock waits complete with it.
using error_code = boost::system::error_code;
/// An instant of wall-clock time.
using time_point = std::chrono::system_clock::time_point;
/// A length of wall-clock time.
using duration = std::chrono::system_clock::duration;

/// Abstract clock. Thread-safe: now() and waits may be called from any thread; a wait
/// completes on the executor associated with its completion handler.
class clock {
  public:
    /// The completion signature of a wait.
    using wait_signature = void(error_code);
    /// A wait's type-erased completion handler.
    using wait_handler = asio::any_completion_handler<wait_signature>;

    virtual ~clock() = default;

    /// The current time.
    virtual time_point now() const = 0;

    /// Completes with success once now() >= when (at once if it already is), or with
    /// asio::error::operation_aborted when the handler's cancellation slot is triggered.
    template <asio::completion_token_for<wait_signature> Token>
    auto async_wait_until(const asio::any_io_executor& ex, time_point when, Token&& token) {
        return asio::async_initiate<Token, wait_signature>(
            [this](auto handler, asio::any_io_executor ex, time_point when) {
                do_wait_until(std::move(ex), when, wait_handler(std::move(handler)));
            },
            token, ex, when);
    }

    /// Coroutine conveniences: suspend the calling coroutine; throw system_error
    /// (operation_aborted) when it is cancelled.
    ///@{
    asio::awaitable<void> sleep_until(time_point when);
    asio::awaitable<void> sleep_for(duration d);
    ///@}

  protected:
    /// Starts a wait: `handler` completes as async_wait_until() says.
    virtual void do_wait_until(asio::any_io_executor ex, time_point when, wait_handler handler) = 0;
};

/// The real clock: std::chrono::system_clock, waits on an Asio steady timer.
class system_clock final : public clock {
  public:
    time_point now() const override;

  protected:
    void do_wait_until(asio::any_io_executor ex, time_point when, wait_handler handler) override;
};

/// A clock that moves only when told to. Waits complete, in due-time order, when advance()
/// or advance_to() passes their due time. next_deadline() lets a test executor jump straight
/// to the next timer when nothing else is ready.
class manual_clock final : public clock {
  public:
    /// A clock at `start` (by default 2019-12-20, a fixed instant for reproducible tests).
    explicit manual_clock(time_point start = time_point{std::chrono::hours{24 * 365 * 50}});
    ~manual_clock() override;

    time_point now() const override;
    /// Moves time forward by `d`, completing the waits now due, in order.
    void advance(duration d);
    /// Moves time to `t` (never backwards), completing the waits now due, in order.
    void advance_to(time_point t);
    /// The earliest pending wait's due time; nullopt when nothing waits.
    std::optional<time_point> next_deadline() const;
    /// How many waits are pending.
    std::size_t waiting() const;

  protected:
    void do_wait_until(asio::any_io_executor ex, time_point when, wait_handler handler) override;

  private:
    struct state;
    std::shared_ptr<state> state_;
};

}  // namespace keel
