#pragma once

// How a `run` step is retried: attempts with exponential backoff and jitter, waiting on the
// engine's keel::clock. An exception of type terminal_error (or one the `terminal` predicate
// accepts) stops at once; the last error is recorded and thrown into the handler as
// step_failed. A value type.

#include <chrono>
#include <exception>
#include <functional>
#include <keel/framework/clock.hpp>

namespace keel::process {

struct retry_policy {
    int max_attempts = 3;
    duration initial_backoff = std::chrono::milliseconds(100);
    double multiplier = 2.0;
    duration max_backoff = std::chrono::seconds(30);
    double jitter = 0.2;  // each wait is scaled by a random factor in [1 - jitter, 1 + jitter]
    std::function<bool(const std::exception&)> terminal;

    static retry_policy once() {
        retry_policy p;
        p.max_attempts = 1;
        return p;
    }

    // The wait before attempt `attempt + 1` (attempt counts from 1), before jitter.
    duration backoff(int attempt) const;
};

}  // namespace keel::process
