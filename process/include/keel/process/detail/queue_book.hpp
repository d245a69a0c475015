#pragma once

// One queue's accounting in memory: what process/src/lua/queue.lua keeps in Redis, for the
// in-memory store. The same rules, the same order (store_conformance checks both).

#include <cstdint>
#include <deque>
#include <keel/process/queue.hpp>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace keel::process::detail {

class queue_book {
  public:
    enqueued enqueue(const queue& q, queue_entry entry, duration recheck);
    admission_round admit(const queue& q, time_point now, std::size_t max, duration recheck,
                          const std::string& worker);
    void leave(const std::string& instance);
    queue_state describe(std::size_t top) const;

  private:
    bool has_room(const queue& q, const std::string& partition, time_point now);
    void admit_entry(const queue& q, const std::string& partition, const std::string& instance,
                     time_point now, duration recheck, const std::string& worker);
    // Whether `worker` (empty: a caller that is no worker) may take in one more: below
    // q.worker_concurrency with its unfinished admissions, or no such limit.
    bool worker_has_room(const queue& q, const std::string& worker) const;

    struct entry {
        enqueue_options options;
        time_point at{};
        std::uint64_t seq = 0;
        bool admitted = false;
        std::string worker;  // who admitted it, when counted against worker_concurrency
    };
    // Waiting in one partition: lowest priority first, then oldest.
    using line = std::set<std::tuple<std::int32_t, std::uint64_t, std::string>>;

    std::map<std::string, entry, std::less<>> entries_;
    std::map<std::string, std::string, std::less<>> dedup_;   // dedup id -> instance
    std::map<std::string, line, std::less<>> waiting_;        // partition -> its line
    std::deque<std::string> ring_;                            // partitions with waiting, in turn
    std::map<std::string, time_point, std::less<>> checks_;   // admitted -> its next check
    std::map<std::string, std::uint64_t, std::less<>> held_;  // partition -> admitted
    std::map<std::string, std::uint64_t, std::less<>> by_worker_;  // worker -> admitted
    std::deque<time_point> window_;                                // admissions in the rate window
    std::uint64_t seq_ = 0;
};

}  // namespace keel::process::detail
