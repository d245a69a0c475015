#pragma once

/// @file
/// keel::prometheus: the pieces every /metrics source writes with, so HTTP and process
/// metrics share one histogram, one label escape and one header format (the Prometheus text
/// exposition format, version 0.0.4).
///
/// @code
///   prometheus::duration_histogram latency;           // lock-free, any thread
///   latency.observe(elapsed);
///   prometheus::header(out, "keel_x_seconds", "histogram", "What it measures.");
///   latency.render(out, "keel_x_seconds", "route=\"" + prometheus::escape(route) + "\"");
/// @endcode

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace keel::prometheus {

/// A histogram of durations with fixed buckets from 0.5 ms to 10 min (+Inf implicit).
class duration_histogram {
  public:
    /// The buckets' upper bounds, in seconds.
    static constexpr std::array<double, 16> buckets = {
        0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 60, 600};

    /// Counts one duration.
    void observe(std::chrono::nanoseconds d) noexcept;
    /// Appends the _bucket, _sum and _count lines of `name` with `labels` ("a=\"b\"", or "").
    void render(std::string& out, std::string_view name, std::string_view labels) const;
    /// How many durations were observed.
    std::uint64_t count() const noexcept;

  private:
    std::array<std::atomic<std::uint64_t>, buckets.size() + 1> counts_{};
    std::atomic<std::uint64_t> sum_ns_{0};
};

/// A label value with backslash, double quote and newline escaped.
std::string escape(std::string_view label_value);

/// Appends the # HELP and # TYPE lines of a metric family.
void header(std::string& out, std::string_view name, std::string_view type, std::string_view help);

}  // namespace keel::prometheus
