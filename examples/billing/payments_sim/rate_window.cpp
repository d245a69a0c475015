#include "rate_window.hpp"

namespace billing::sim {

rate_window::rate_window(std::size_t limit, std::chrono::steady_clock::duration width)
    : limit_(limit), width_(width) {}

bool rate_window::try_take(time_point now) {
    // Callers read the time before they take the book's lock: two of them may arrive a few
    // microseconds out of order. The window stays sorted.
    if (!taken_.empty() && now < taken_.back()) now = taken_.back();
    while (!taken_.empty() && now - taken_.front() >= width_) taken_.pop_front();
    if (taken_.size() >= limit_) return false;
    taken_.push_back(now);
    return true;
}

}  // namespace billing::sim
