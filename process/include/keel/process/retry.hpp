#pragma once

/// @file
/// How a `run` step is retried: attempts with exponential backoff and jitter, waiting on the
/// engine's keel::clock. An exception of type terminal_error (or one the `terminal` predicate
/// accepts) stops at once; the last error is recorded and thrown into the handler as
/// step_failed. An attempt that throws retry_later is retried no sooner than it says. A value
/// type.

#include <chrono>
#include <exception>
#include <functional>
#include <keel/framework/clock.hpp>
#include <stdexcept>
#include <string>

namespace keel::process {

/// How a step is retried: attempts, backoff between them, and which errors end them at once.
/// The default: 3 attempts, with waits of about 100 ms and 200 ms between them (each scaled
/// by a random factor from 0.8 to 1.2).
struct retry_policy {
    int max_attempts = 3;  ///< attempts in all, the first included; 1: no retry
    /// The wait after the first failed attempt; each later one is `multiplier` times longer.
    duration initial_backoff = std::chrono::milliseconds(100);
    double multiplier = 2.0;  ///< how much each wait grows over the previous one
    /// The longest wait, before jitter (which may lengthen it by up to a `jitter` fraction).
    duration max_backoff = std::chrono::seconds(30);
    double jitter = 0.2;  ///< each wait is scaled by a random factor in [1 - jitter, 1 + jitter]
    /// Errors that end the step at once, recorded as final, besides terminal_error; unset: none.
    std::function<bool(const std::exception&)> terminal;

    /// A single attempt: no retry.
    static retry_policy once() {
        retry_policy p;
        p.max_attempts = 1;
        return p;
    }

    /// The wait before attempt `attempt + 1` (attempt counts from 1), before jitter.
    duration backoff(int attempt) const;
};

/// Thrown by a step's attempt that failed and knows when the next one may come at the
/// earliest (an HTTP partner's Retry-After): the engine waits at least `after` before the next
/// attempt, or the policy's backoff when that is longer. Otherwise it is a failed attempt like
/// any other (counted against max_attempts; `terminal` applies).
class retry_later : public std::runtime_error {
  public:
    /// An attempt that failed with message `what`; the next one comes no sooner than `after`.
    retry_later(const std::string& what, duration after)
        : std::runtime_error(what), after_(after) {}
    /// The shortest wait before the next attempt.
    duration after() const noexcept { return after_; }

  private:
    duration after_;
};

}  // namespace keel::process
