#pragma once

// --rate: at most `limit` charges in any one second, as a sliding window (the times of the
// charges taken in the last second are kept; a charge is refused while `limit` of them are
// younger than a second). A fixed window would let 2 x limit through across a boundary.
// Not thread-safe: the charge book calls it under its lock.

#include <chrono>
#include <cstddef>
#include <deque>

namespace billing::sim {

class rate_window {
  public:
    using time_point = std::chrono::steady_clock::time_point;

    explicit rate_window(std::size_t limit,
                         std::chrono::steady_clock::duration width = std::chrono::seconds(1));

    // Counts one event at `now` and returns true, or returns false (counting nothing) when
    // `limit` events were counted within the window before `now`. A `now` earlier than the
    // last event counted is taken as that event's time.
    bool try_take(time_point now);

  private:
    std::size_t limit_;
    std::chrono::steady_clock::duration width_;
    std::deque<time_point> taken_;  // oldest first, all within the window
};

}  // namespace billing::sim
