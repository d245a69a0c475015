#pragma once

// clang-format off
/// @file
/// What an engine's processes do, as Prometheus text (exposition format 0.0.4), per process
/// definition. Every label value is a definition name or a fixed word, never an instance id,
/// so the number of series is bounded by the definitions a service registers.
///
/// @code
///   keel_process_instances_started_total{definition}                 counter
///   keel_process_instances_finished_total{definition,outcome}        counter  completed|failed|parked|cancelled
///   keel_process_instances{definition,status}                        gauge    from the store's index
///   keel_process_step_duration_seconds{definition}                   histogram  first attempt to result
///   keel_process_step_attempts_total{definition}                     counter
///   keel_process_step_retries_total{definition}                      counter
///   keel_process_signal_resume_seconds{definition}                   histogram  delivered to consumed
///   keel_process_timer_lateness_seconds{definition}                  histogram  fired minus due
///   keel_process_replays_total{definition}                           counter
///   keel_process_replayed_entries_total{definition}                  counter
///   keel_process_replay_seconds_total{definition}                    counter
///   keel_process_lease_takeovers_total{definition}                   counter  leases taken from a worker that let them expire
///   keel_process_instances_left_total{definition}                    counter  given back to a worker with newer code
///   keel_process_hot_instances                                       gauge
/// @endcode
///
/// A service publishes them on /metrics with
/// @code
///   http_metrics.add_source([&engine] { return engine.render_metrics(); });
/// @endcode
///
/// Thread-safety: the engine writes relaxed atomics on its thread; rendering reads them from
/// any thread.
// clang-format on

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <keel/framework/prometheus.hpp>
#include <keel/process/store.hpp>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace keel::process {

using prometheus::duration_histogram;

/// The figures of one definition, as this worker saw them (counters since it started).
struct definition_metrics {
    std::atomic<std::uint64_t> started{0};        ///< instances started by this worker
    std::atomic<std::uint64_t> completed{0};      ///< instances it brought to completion
    std::atomic<std::uint64_t> failed{0};         ///< instances that failed on it
    std::atomic<std::uint64_t> parked{0};         ///< instances it parked (journal mismatch)
    std::atomic<std::uint64_t> cancelled{0};      ///< instances cancelled on it
    std::atomic<std::uint64_t> step_attempts{0};  ///< attempts of steps
    std::atomic<std::uint64_t> step_retries{0};   ///< attempts that failed and were retried
    std::atomic<std::uint64_t> replays{0};        ///< instances loaded by replaying their journal
    std::atomic<std::uint64_t> replayed_entries{0};  ///< journal entries replayed
    std::atomic<std::uint64_t> replay_ns{0};         ///< time spent replaying, in nanoseconds
    /// Leases taken over from a worker that let them expire.
    std::atomic<std::uint64_t> lease_takeovers{0};
    /// Instances given back to a worker that runs newer code (rolling deploys).
    std::atomic<std::uint64_t> left{0};
    /// Runs that ended by continuing as new (context::continue_as_new) on this worker.
    std::atomic<std::uint64_t> continued{0};
    duration_histogram step_seconds;            ///< from a step's first attempt to its result
    duration_histogram signal_resume_seconds;   ///< from a signal's delivery to its consumption
    duration_histogram timer_lateness_seconds;  ///< how late timers fired after their due time
};

/// An engine's figures, by definition, and their text exposition (see the file's
/// description). The figures are relaxed atomics: written on the engine's threads, read from
/// any.
class engine_metrics {
  public:
    /// The series of a definition, created on first use (the engine does so in add()).
    definition_metrics& of(const std::string& definition);
    /// Instances in memory, summed over the engine's parts.
    void add_hot(std::ptrdiff_t delta) noexcept {
        hot_.fetch_add(static_cast<std::size_t>(delta), std::memory_order_relaxed);
    }

    /// The text exposition; `counts` (the store's index) feeds the gauge of instances by
    /// status, and is left out when null (the store could not be read).
    std::string render(const instance_counts* counts) const;

  private:
    mutable std::mutex mutex_;  // guards the map's shape, not the figures
    std::map<std::string, std::unique_ptr<definition_metrics>, std::less<>> by_definition_;
    std::atomic<std::size_t> hot_{0};
};

}  // namespace keel::process
