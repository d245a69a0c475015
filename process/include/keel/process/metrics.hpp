#pragma once

// What an engine's processes do, as Prometheus text (exposition format 0.0.4), per process
// definition. Every label value is a definition name or a fixed word, never an instance id,
// so the number of series is bounded by the definitions a service registers.
//
// clang-format off
//   keel_process_instances_started_total{definition}                 counter
//   keel_process_instances_finished_total{definition,outcome}        counter  completed|failed|parked|cancelled
//   keel_process_instances{definition,status}                        gauge    from the store's index
//   keel_process_step_duration_seconds{definition}                   histogram  first attempt to result
//   keel_process_step_attempts_total{definition}                     counter
//   keel_process_step_retries_total{definition}                      counter
//   keel_process_signal_resume_seconds{definition}                   histogram  delivered to consumed
//   keel_process_timer_lateness_seconds{definition}                  histogram  fired minus due
//   keel_process_replays_total{definition}                           counter
//   keel_process_replayed_entries_total{definition}                  counter
//   keel_process_replay_seconds_total{definition}                    counter
//   keel_process_lease_takeovers_total{definition}                   counter  leases taken from a worker that let them expire
//   keel_process_instances_left_total{definition}                    counter  given back to a worker with newer code
//   keel_process_hot_instances                                       gauge
// clang-format on
//
// A service publishes them on /metrics with
//   http_metrics.add_source([&engine] { return engine.render_metrics(); });
// Thread-safety: the engine writes relaxed atomics on its thread; rendering reads them from
// any thread.

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

// The figures of one definition.
struct definition_metrics {
    std::atomic<std::uint64_t> started{0};
    std::atomic<std::uint64_t> completed{0};
    std::atomic<std::uint64_t> failed{0};
    std::atomic<std::uint64_t> parked{0};
    std::atomic<std::uint64_t> cancelled{0};
    std::atomic<std::uint64_t> step_attempts{0};
    std::atomic<std::uint64_t> step_retries{0};
    std::atomic<std::uint64_t> replays{0};
    std::atomic<std::uint64_t> replayed_entries{0};
    std::atomic<std::uint64_t> replay_ns{0};
    std::atomic<std::uint64_t> lease_takeovers{0};
    std::atomic<std::uint64_t> left{0};
    duration_histogram step_seconds;
    duration_histogram signal_resume_seconds;
    duration_histogram timer_lateness_seconds;
};

class engine_metrics {
  public:
    // The series of a definition, created on first use (the engine does so in add()).
    definition_metrics& of(const std::string& definition);
    // Instances in memory, summed over the engine's parts.
    void add_hot(std::ptrdiff_t delta) noexcept {
        hot_.fetch_add(static_cast<std::size_t>(delta), std::memory_order_relaxed);
    }

    // The text exposition; `counts` (the store's index) feeds the gauge of instances by
    // status, and is left out when null (the store could not be read).
    std::string render(const instance_counts* counts) const;

  private:
    mutable std::mutex mutex_;  // guards the map's shape, not the figures
    std::map<std::string, std::unique_ptr<definition_metrics>, std::less<>> by_definition_;
    std::atomic<std::size_t> hot_{0};
};

}  // namespace keel::process
