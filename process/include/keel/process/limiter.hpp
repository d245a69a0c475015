#pragma once

/// @file
/// Limits on steps: a named limit that steps share across every worker of a service and every
/// process that names it, kept in the process store (for Redis: one small script per grant).
///
/// @code
///   inline const keel::process::limit payments{
///       .name = "payments", .rate = 20, .per = 1s, .concurrency = 5};
///   ...
///   auto charge = co_await ctx.run("charge", [&] { return provider.charge(card, cents); })
///                     .limited(payments);
/// @endcode
///
/// Each attempt of a limited step first takes a permit: at most `rate` attempts start in any
/// window of `per` (a sliding window, not a bucket that refills in bursts), and at most
/// `concurrency` run at once. An attempt that cannot have one waits (without a thread: the
/// step's coroutine sleeps on the engine's clock) until the store says it may, then tries
/// again; waiting is not an attempt and uses none of the step's retry policy. A concurrency
/// permit is given back when the attempt ends, or, should its worker die, after `max_hold`.
/// The step is shown as waiting for the limit (steps in flight, the admin instance view).

#include <chrono>
#include <cstdint>
#include <keel/framework/clock.hpp>
#include <optional>
#include <string>

namespace keel::process {

/// A named limit on the attempts of the steps that name it (see the file's description).
struct limit {
    std::string name;                        ///< letters, digits, '-', '_', '.'; at most 64
    std::uint32_t rate = 0;                  ///< attempts started per `per`; 0: no rate limit
    duration per = std::chrono::seconds(1);  ///< the sliding window `rate` counts in
    std::uint32_t concurrency = 0;           ///< attempts running at once; 0: no concurrency limit
    /// How long a concurrency permit counts when its holder never gives it back (its worker
    /// died): then it is free again. An attempt that runs longer loses the guarantee.
    duration max_hold = std::chrono::minutes(5);
};

/// Validates a limit: std::invalid_argument naming the limit and the field for an empty or bad
/// name, neither a rate nor a concurrency, a period or hold under a millisecond.
void check(const limit& l);

/// What the store answers a permit request: granted, or when to ask again.
struct permit_answer {
    bool granted = false;    ///< the attempt may start
    duration retry_after{};  ///< when not granted: a hint, at least 1 ms
};

/// "payments: 20 per 1000 ms, 5 at once": how steps and logs name a limit.
std::string describe(const limit& l);

}  // namespace keel::process
