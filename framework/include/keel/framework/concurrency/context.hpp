#pragma once

/// @file
/// Per-io_context services of the concurrency primitives: the keel::clock that their sleeps
/// and timeouts wait on, and the random source that select() draws from.
///
/// Both hang off the executor's execution context, so a coroutine finds them from its own
/// executor and never needs them passed down. By default a context uses the system clock and
/// a randomly seeded generator; keel::service installs its clock on each of its io_contexts,
/// and the deterministic test scheduler installs its manual clock and seed.
///
/// Thread-safety: set_clock/seed_random while nothing runs on the context; clock_of is safe
/// from any thread; random_below only on the context's own thread.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <keel/framework/clock.hpp>
#include <memory>

namespace keel::concurrency {

namespace asio = boost::asio;

/// Installs `clock` as the clock of `context`'s sleeps and timeouts.
void set_clock(asio::execution_context& context, std::shared_ptr<keel::clock> clock);
/// The clock of `executor`'s context: the one installed, else the system clock.
keel::clock& clock_of(const asio::any_io_executor& executor);

/// Seeds the random source of `context` (select's choice among ready cases).
void seed_random(asio::execution_context& context, std::uint64_t seed);
/// A uniformly distributed number in [0, bound), bound > 0.
std::uint64_t random_below(const asio::any_io_executor& executor, std::uint64_t bound);

/// Whether the calling thread runs `executor`'s io_context (false for executors of other
/// kinds): where work for that executor may run at once instead of being posted.
template <class Executor>
bool runs_in_this_thread(const Executor& executor) noexcept {
    const auto* io = executor.template target<asio::io_context::executor_type>();
    return io && io->running_in_this_thread();
}

///@{
/// Sleeps on the clock of the calling coroutine's executor. Cancellable.
asio::awaitable<void> sleep_for(duration d);
asio::awaitable<void> sleep_until(time_point when);
///@}

}  // namespace keel::concurrency
