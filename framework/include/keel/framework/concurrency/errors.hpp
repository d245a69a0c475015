#pragma once

/// @file
/// Errors and result tags of the concurrency primitives.
///
/// Cancellation is reported the way Asio reports it: a boost::system::system_error with
/// asio::error::operation_aborted. cancelled_error is such an error, so code that already
/// handles a cancelled Asio operation handles a cancelled Keel task the same way.

#include <boost/asio/error.hpp>
#include <boost/system/system_error.hpp>
#include <cstddef>
#include <exception>
#include <keel/framework/clock.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace keel::concurrency {

/// A task, nursery or combinator was cancelled before it produced a result.
class cancelled_error : public boost::system::system_error {
  public:
    cancelled_error() : system_error(boost::asio::error::operation_aborted, "cancelled") {}
};

/// nursery::spawn beyond the nursery's max_children running children.
class spawn_limit_error : public std::runtime_error {
  public:
    /// The limit that was reached.
    explicit spawn_limit_error(std::size_t limit)
        : std::runtime_error("keel::concurrency: nursery spawn limit of " + std::to_string(limit) +
                             " running children reached (raise nursery_options::max_children)"),
          limit_(limit) {}
    /// The limit that was reached.
    std::size_t limit() const noexcept { return limit_; }

  private:
    std::size_t limit_;
};

/// send, try_send or a select send case on a closed channel.
class channel_closed_error : public std::logic_error {
  public:
    channel_closed_error() : std::logic_error("keel::concurrency: send on a closed channel") {}
};

/// any(): every branch failed. errors() holds each branch's error, in argument order.
class any_error : public std::runtime_error {
  public:
    /// Holds each branch's error, in argument order.
    explicit any_error(std::vector<std::exception_ptr> errors)
        : std::runtime_error("keel::concurrency: every branch of any() failed"),
          errors_(std::move(errors)) {}
    /// Each branch's error, in argument order.
    const std::vector<std::exception_ptr>& errors() const noexcept { return errors_; }

  private:
    std::vector<std::exception_ptr> errors_;
};

/// The result of timeout() and of a select timeout case when the deadline passed first.
struct timed_out {
    /// The time that passed.
    duration after{};
};

/// The result of a select send case that delivered its value.
struct sent {};

/// The result of a select default case: no other case was ready.
struct nothing_ready {};

/// True when `error` is a system_error with operation_aborted (how Asio and Keel report
/// cancellation).
bool is_cancellation(const std::exception_ptr& error) noexcept;

}  // namespace keel::concurrency
