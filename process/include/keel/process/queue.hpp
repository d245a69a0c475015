#pragma once

/// @file
/// Queues: starts that wait their turn. A queue is declared in code and registered with the
/// engine; an instance started on it is created at once and, unless the enqueue finds nobody
/// waiting and room under the limits (then it runs at once), stays `queued` (suspended before
/// its handler runs) until the queue admits it. Its slot is given back when it ends.
///
/// @code
///   inline const keel::process::queue carrier_calls{
///       .name = "carrier", .concurrency = 5, .partition_concurrency = 1, .rate = 20};
///   eng.add_queue(carrier_calls);
///   keel::process::enqueue_options as{.partition = tenant, .priority = 1};  // named: g++ 12
///   auto h = co_await eng.enqueue(carrier_calls, as, booking, keel::ref<order>(id));
/// @endcode
///
/// Admission happens in the store (one script per round, so the limits hold across every
/// worker of the service): at most `concurrency` admitted instances unfinished at once, at
/// most `partition_concurrency` of one partition, at most `rate` admissions in any window of
/// `per`, and at most `worker_concurrency` admitted by one worker. Partitions take turns (round
/// robin: a partition with thousands queued delays another's next instance by one admission at
/// most), and within a partition the lowest `priority` goes first, then the oldest. An admitted
/// instance holds its slot until it is final (completed, failed, cancelled, or parked), on
/// whichever worker runs it; one whose worker died holds it while another worker takes it over,
/// since it is still running. The worker that admits an instance starts running it;
/// `worker_concurrency` bounds how many unfinished instances each worker has taken in from the
/// queue (one that suspends and resumes elsewhere still counts against the worker that admitted
/// it). docs/guide/queues.md says more.

#include <chrono>
#include <cstdint>
#include <keel/framework/clock.hpp>
#include <keel/framework/trace.hpp>
#include <keel/process/journal.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace keel::process {

/// A queue: its name and limits (see the file's description). Declared in code, registered
/// with engine::add_queue.
struct queue {
    std::string name;                         ///< letters, digits, '-', '_', '.'; at most 64
    std::uint32_t concurrency = 0;            ///< admitted and unfinished at once; 0: no limit
    std::uint32_t partition_concurrency = 0;  ///< the same, per partition; 0: no limit
    std::uint32_t worker_concurrency = 0;     ///< the same, per admitting worker; 0: no limit
    std::uint32_t rate = 0;                   ///< admissions per `per`; 0: no limit
    duration per = std::chrono::seconds(1);   ///< the sliding window `rate` counts in
};

/// Validates a queue: std::invalid_argument naming the queue and the field for a bad name, a
/// period under 1 ms (with a rate), or a partition_concurrency or worker_concurrency above the
/// concurrency. A queue
/// without limits is valid: it only orders (priorities, partitions).
void check(const queue& q);

/// How one start waits on a queue.
struct enqueue_options {
    /// Fairness and partition_concurrency count per partition (a tenant, a customer);
    /// letters, digits, '-', '_', '.', ':', '@'; at most 128. Empty: the queue's default one.
    std::string partition;
    std::int32_t priority = 0;  ///< -1000 to 1000; lower is admitted first
    /// One piece of work: while an instance enqueued with this id is queued or running, an
    /// enqueue with the same id starts nothing and answers that instance. At most 256 bytes.
    std::string dedup;
    /// The span the enqueue is made in (a handler's req.trace()): as start_options::trace.
    /// Not kept with the queue's entry.
    std::optional<trace::span_context> trace;
};

/// Validates the options (partition, priority and dedup as documented there):
/// std::invalid_argument naming the field.
void check(const enqueue_options& o);

// ---- what the store keeps and answers (store::enqueue, admit, queue_state) ----

/// One start waiting on a queue, as the engine hands it to the store.
struct queue_entry {
    std::string instance;     ///< the instance that waits (created, suspended)
    enqueue_options options;  ///< its partition, priority and dedup id
    time_point at{};          ///< when it was enqueued
    /// The enqueuing worker: it runs the instance when the enqueue admits it at once, so
    /// worker_concurrency counts it there.
    std::string worker;
};

/// What an enqueue did: queued `instance` (the entry's own), or found the entry already
/// queued, or (dedup) another instance holding the same dedup id. `admitted`: nobody waited
/// and the limits had room, so the fresh entry was admitted in the same step (its instance
/// starts running at once, without waiting for an admission round).
struct enqueued {
    std::string instance;   ///< the instance that does the work
    bool fresh = false;     ///< the entry was put in line now
    bool admitted = false;  ///< and admitted at once
};

/// An entry the store admitted this round (`fresh`), or one admitted before whose check came
/// due: the engine tells it again (a duplicate, when it was told) and learns whether it ended.
struct admission {
    std::string instance;      ///< the admitted instance
    time_point enqueued_at{};  ///< when it was enqueued (queue_entry::at)
    bool fresh = false;        ///< admitted this round; false: a check of an earlier one
};

/// One admission round's answer: what it admitted or checked, and when the next round can
/// find more by time alone (the first check due, or when the rate window lets the next one
/// in); `waiting`: entries are still in line.
struct admission_round {
    std::vector<admission> admitted;  ///< fresh admissions and checks that came due
    std::optional<time_point> next;   ///< when a round can find more; nullopt: not by time
    bool waiting = false;             ///< entries are still in line
};

/// One partition of a queue, as describe_queue reports it.
struct queue_partition_state {
    std::string name;            ///< the partition ("" for the default one)
    std::uint64_t waiting = 0;   ///< its entries in line
    std::uint64_t admitted = 0;  ///< its admitted entries that have not left (their slots)
};

/// A queue's depth and admitted entries (store::describe_queue, engine::describe_queue).
struct queue_state {
    std::uint64_t waiting = 0;   ///< entries in line
    std::uint64_t admitted = 0;  ///< admitted entries that have not left the queue
    std::vector<queue_partition_state> partitions;  ///< by name, the first `top`
    bool more_partitions = false;                   ///< there are partitions past the first `top`
};

/// The signal path an instance waits on until its queue admits it.
inline constexpr std::string_view admission_path = "/keel/admitted";

/// The queue an instance was started on, from its journal's first entry (a marker the engine
/// records before the handler runs); nullopt for an instance started directly.
std::optional<std::string> queue_of(const std::vector<journal_entry>& journal);
/// Whether that marker says the instance was admitted at its enqueue (it never waited).
bool admitted_at_enqueue(const std::vector<journal_entry>& journal);
/// The marker's name for a queue: for an instance that waits for its admission, or one
/// admitted at its enqueue.
std::string queue_marker(std::string_view queue, bool admitted_at_enqueue);

}  // namespace keel::process
