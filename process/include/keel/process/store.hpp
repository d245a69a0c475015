#pragma once

/// @file
/// The store: the engine's only view of persistence. Every mutating call is one atomic step
/// (for Redis: one Lua script over keys that share the instance's hash tag) that validates
/// everything first and writes last, so a rejected call changes nothing. The contract of each
/// call is written next to it and in docs/architecture.md ("Durable processes").

#include <array>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <keel/framework/clock.hpp>
#include <keel/framework/documents.hpp>
#include <keel/framework/errors.hpp>
#include <keel/framework/expected.hpp>
#include <keel/process/journal.hpp>
#include <keel/process/limiter.hpp>
#include <keel/process/queue.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace keel::process {

/// The store could not serve a call (Redis unreachable, failing over, not open yet); what()
/// says why. HTTP answers it 503.
class store_unavailable : public keel::unavailable_error {
  public:
    using keel::unavailable_error::unavailable_error;
};

/// The store cannot be used as this service is configured (a Redis store whose recorded shard
/// count is not the configured one, or unreadable); what() says which. Unlike other
/// store_unavailable errors, waiting does not help: the configuration or the store must change.
class store_refused : public store_unavailable {
  public:
    using store_unavailable::store_unavailable;
};

/// Identifies the holder of an instance's lease. `epoch` is the fencing token: it grows on
/// every acquisition, and a write carrying an older epoch is rejected.
struct lease_token {
    std::string worker;       ///< the worker holding the lease (engine_options::worker)
    std::uint64_t epoch = 0;  ///< the fencing token; 1 for the lease a start grants
    friend bool operator==(const lease_token&, const lease_token&) = default;
};

/// A signal waiting in an instance's inbox. `id` orders the inbox (oldest first); `key` is the
/// idempotency key the sender gave (a second delivery with the same key is a no-op); `at` is
/// when it was delivered, so a signal that arrived before a timer's due time wins over it
/// even when the worker processes both later.
struct inbox_entry {
    std::uint64_t id = 0;    ///< the store gives it on delivery; orders the inbox
    std::string key;         ///< the sender's idempotency key; empty: none (never a duplicate)
    std::string path;        ///< the signal's path, which waits match
    nlohmann::json payload;  ///< what the sender sent
    time_point at{};         ///< when it was delivered
    std::string trace;       ///< the sender's W3C traceparent (emit_options::trace); empty: none
};

/// A durable timer of an instance: the operation it completes and when.
struct timer_record {
    std::uint64_t seq = 0;  ///< the timer operation's number (journal_entry::seq)
    time_point due{};       ///< when it fires
    std::string name;       ///< the timer's name ("sleep", "timer" or the handler's)
};

/// An operation of a suspended instance that waits for a signal with this path.
struct signal_wait {
    std::uint64_t seq = 0;  ///< the waiting operation's number
    std::string path;       ///< the signal path it waits for
    friend bool operator==(const signal_wait&, const signal_wait&) = default;
};

/// An earlier run of an instance, kept for audit when an operator retried it from a journal
/// position: the retry kept entries 0..from-1 of a journal that had `journal_length` entries,
/// and gave back the signals the dropped entries had consumed but those in `left_out` (inbox
/// ids the operator named: a signal that made the handler fail).
struct retry_record {
    std::uint64_t from = 0;               ///< the journal position the retry went back to
    time_point at{};                      ///< when the operator retried
    std::uint64_t journal_length = 0;     ///< the entries the journal had before the retry
    std::vector<std::uint64_t> left_out;  ///< consumed signals not given back (inbox ids)
    friend bool operator==(const retry_record&, const retry_record&) = default;
};

/// A signal an operator took out of an instance's inbox (store::remove_signal), kept for
/// audit: the entry as it was, and when it was removed.
struct removed_signal {
    inbox_entry signal;    ///< the entry as it was in the inbox
    time_point removed{};  ///< when the operator removed it
    friend bool operator==(const removed_signal& a, const removed_signal& b) {
        return a.signal.id == b.signal.id && a.signal.key == b.signal.key &&
               a.signal.path == b.signal.path && a.signal.payload == b.signal.payload &&
               a.signal.at == b.signal.at && a.removed == b.removed;
    }
};

/// A failed attempt of a step still in flight (being retried), as the worker running it
/// reported it: what any process can show about a step before its entry is journaled.
struct step_attempt {
    std::uint64_t seq = 0;  ///< the journal position the step's entry will take
    std::string name;       ///< the step's name
    int attempt = 0;        ///< the attempt that failed (1: the first)
    std::string error;      ///< why it failed (the exception's message)
    std::string worker;     ///< the worker running the step
    time_point at{};        ///< when the attempt failed
    friend bool operator==(const step_attempt&, const step_attempt&) = default;
};

/// Why a worker gave an instance back for others to run (store::leave), e.g. an old worker
/// during a rolling deploy that met a journal its code cannot replay.
struct departure {
    std::string worker;   ///< the worker that gave the instance back
    std::string version;  ///< of the worker's code for the instance's definition
    std::string reason;   ///< why, for operators (e.g. the replay mismatch it met)
    time_point at{};      ///< when
    friend bool operator==(const departure&, const departure&) = default;
};

/// Everything the store knows about one instance.
struct instance_snapshot {
    std::string id;          ///< the instance id (the definition's filled path)
    std::string definition;  ///< the definition's name (its pattern)
    std::string version;     ///< of the code that started it (definition::version); may be empty
    std::string parent;      ///< the instance that started it as a child (context::start); or empty
    std::string trace;       ///< its start's span as a W3C traceparent (start_request::trace)
    nlohmann::json params;   ///< the parameters it was started with (definition::encode_params)
    instance_status status = instance_status::running;  ///< where it is in its lifecycle
    bool parked = false;  ///< failed by a journal mismatch: resumable once the code is fixed
    std::optional<nlohmann::json> result;  ///< the handler's result, once completed
    std::optional<std::string> error;      ///< why it failed or was cancelled, once final
    std::vector<journal_entry> journal;    ///< in completion order; empty when not loaded
    std::vector<inbox_entry> inbox;        ///< unconsumed, oldest first
    std::vector<timer_record> timers;      ///< armed, by seq
    std::vector<signal_wait> waits;        ///< what a suspended instance waits for (its wait set)
    std::optional<lease_token> lease;      ///< current holder (possibly expired)
    time_point lease_expires{};            ///< when `lease` ends unless renewed
    time_point created{};                  ///< when it was started
    time_point changed{};  ///< the last write: a transition, or the newest journal entry's time
    std::vector<retry_record> retries;    ///< operators' retries (store::rewind), oldest first
    std::vector<removed_signal> removed;  ///< taken out of the inbox by operators, oldest first
    /// A running instance's steps in flight that failed at least once: the latest failed
    /// attempt of each, by seq (a step's record stops showing once its entry is journaled).
    std::vector<step_attempt> attempts;
    std::optional<departure> left;  ///< the last worker that gave it back to others, and why
    /// What the handler published (context::publish), by name: the latest value of each.
    std::map<std::string, nlohmann::json, std::less<>> published;
};

/// Whether the instance waits for its queue to admit it (`queued` for operators): it was
/// enqueued (keel/process/queue.hpp) and is suspended before its handler ran.
bool waits_for_admission(const instance_snapshot& s);

/// An entity document written with a start, a commit (context::update) or a fan-out: the
/// framework's document_write. Only for documents the store can write
/// (store::writes_documents); one that changed or is locked fails the step (a commit:
/// store_error::document_changed).
using keel::document_write;

/// What store::start creates: an instance, its lease for the starting worker, and what goes
/// with it.
struct start_request {
    std::string id;          ///< the instance id
    std::string definition;  ///< the definition's name (its pattern)
    nlohmann::json params;   ///< the parameters as stored (definition::encode_params)
    std::string worker;      ///< the starting worker, which gets the lease
    time_point now{};        ///< the time of the start: created, and the lease's start
    duration lease_ttl{};    ///< how long the lease lasts unless renewed
    /// Subscription keys (see keel::signals::subscription_key): from its start, the instance
    /// receives every fan_out() that names one of them. Dropped when it becomes final.
    std::vector<std::string> subscriptions;
    /// Whether a subscription key no instance subscribes to yet may be written in the store's
    /// compact form, which only workers of store_level_compact_subscriptions read (the engine
    /// clears it while an older worker is alive). A key that exists keeps its form.
    bool compact_subscriptions = true;
    std::string version;  ///< of the definition's code that starts it; may be empty
    /// The instance starting it as a child (context::start), told of its outcome; or empty.
    std::string parent;
    /// The span of its start as a W3C traceparent (engine_options::spans), which its steps,
    /// timers and untraced signals continue after a restart; empty: none (kept only then).
    std::string trace;
    /// Set when the handler waits before its first step: the instance is created suspended,
    /// without a lease, with what it recorded before (now(), random(), patch markers), its
    /// timers and its wait set, as the commit that would otherwise follow the start. Entries
    /// carry their `at`.
    struct first_wait {
        std::vector<journal_entry> entries;  ///< what the handler recorded before it waited
        std::vector<timer_record> timers;    ///< the timers it armed
        std::vector<signal_wait> waits;      ///< its wait set
        /// Waiting for its queue to admit it: the index lists it as queued, not suspended,
        /// until the next commit or renewal of its lease (store_level_queued_status).
        bool queued = false;
    };
    /// Unset: the instance starts running, leased to `worker`. See first_wait.
    std::optional<first_wait> suspended;
    /// For a running start (`suspended` unset): the journal entries its handler recorded
    /// before its first step (a queue's marker, now(), patch markers), written with the
    /// start, so that a commit lost after it (a failover) cannot take them and replay does
    /// what the first run did. Entries carry their `at`. Ignored with `suspended`.
    std::vector<journal_entry> entries;
    /// Written in the same atomic step, checked before anything else (also when the instance
    /// exists already, which writes nothing else): one that changed or is locked fails the
    /// whole start (start_result::documents_changed). Only for documents the store can write
    /// (store::writes_documents); others throw std::logic_error.
    std::vector<document_write> documents;
};

/// `created`: this call made the instance and, unless it started suspended, holds its lease
/// (epoch in `lease`); otherwise the instance existed and nothing changed.
struct start_result {
    bool created = false;                               ///< this call made the instance
    lease_token lease;                                  ///< the lease granted, when created running
    instance_status status = instance_status::running;  ///< the instance's status now
    bool documents_changed = false;  ///< a document was not as expected: nothing happened
};

/// One atomic step of an instance, written only if the writer still holds the lease
/// (`lease` equals the current one) and saw the whole journal (`expected_length`).
struct commit_request {
    std::string instance;                           ///< the instance id
    lease_token lease;                              ///< the writer's lease: must be the current one
    std::uint64_t expected_length = 0;              ///< the journal's length as the writer knows it
    std::vector<journal_entry> entries;             ///< appended in order
    std::vector<std::uint64_t> consume;             ///< inbox ids taken by the signal entries
    std::vector<timer_record> add_timers;           ///< timers armed by this step
    std::vector<std::uint64_t> cancel_timers;       ///< the seqs of timers to disarm
    std::optional<std::vector<signal_wait>> waits;  ///< replaces the wait set when present
    std::optional<instance_status> status;          ///< unchanged when absent
    bool parked = false;  ///< with status failed: parked by a journal mismatch (resumable)
    std::optional<nlohmann::json> result;   ///< the result, with status completed
    std::optional<std::string> error;       ///< the error, with status failed or cancelled
    bool release = false;                   ///< give up the lease in the same step
    time_point now{};                       ///< recorded as the instance's last change
    std::vector<document_write> documents;  ///< written with it, each as document_write says
    /// Values the handler published since the last commit (context::publish), by name: each
    /// replaces the instance's value of that name.
    std::vector<std::pair<std::string, nlohmann::json>> published;
    /// Continue as new (context::continue_as_new): the instance starts over with these
    /// params. The journal, the armed timers, the wait set and the records of failed attempts
    /// are emptied, and `entries` are not appended; `consume` and `published` apply as usual,
    /// and the inbox, its keys, the subscriptions and the retry history stay. Sent with status
    /// running, release and no timers; only while every live worker reads
    /// store_level_restart.
    std::optional<nlohmann::json> restart_params;
};

/// What a successful commit reports back. `signal_waiting`: the commit set a wait set and the
/// inbox holds a signal it waits for (delivered while the writer held the instance), so the
/// instance should be run again at once. A commit that leaves the wait set as it was reports
/// false: a signal for that wait set was already reported by its delivery.
struct commit_result {
    bool signal_waiting = false;  ///< run the instance again at once
};

/// Why a store call was refused; each call says which it gives. A refused call changed
/// nothing.
enum class store_error : std::uint8_t {
    not_found,         ///< no such instance
    fenced,            ///< the lease is held by someone else or a newer epoch
    conflict,          ///< the journal is not the length the writer expected
    inbox_missing,     ///< a consumed inbox entry is not there
    finished,          ///< the instance is completed, cancelled or failed for good
    busy,              ///< acquire: another worker holds a valid lease
    wrong_state,       ///< rewind: running or suspended; remove_signal: running
    out_of_range,      ///< rewind: the position is past the journal
    declined,          ///< acquire: the instance's code version is one the worker refuses
    document_changed,  ///< commit: a document_write's document changed or is locked
};

/// The error's name: "not_found", "fenced", ...
std::string_view to_string(store_error e) noexcept;

/// Instances a worker leaves to others, by what started them: (definition, version) pairs.
/// due() does not return them to the worker and acquire() declines them. Empty in the
/// steady state, where it costs nothing.
using version_refusals = std::vector<std::pair<std::string, std::string>>;
/// Whether `refused` lists the pair (`definition`, `version`).
bool refuses(const version_refusals& refused, std::string_view definition,
             std::string_view version) noexcept;

/// A granted lease with the journal length at the time, so a worker that still holds the
/// instance in memory knows whether its copy is current.
struct lease_grant {
    lease_token lease;                                  ///< the lease now held
    std::uint64_t journal_length = 0;                   ///< the journal's length at the grant
    instance_status status = instance_status::running;  ///< the instance's status at the grant
    time_point expires{};                               ///< when the lease ends unless renewed
    bool taken_over = false;  ///< another worker held it and let its lease expire
};

/// A lease granted to a worker that takes an instance to run it, with the instance as it was
/// (store::take, and fan_out_request::take).
struct taken_instance {
    lease_grant grant;           ///< the lease, as acquire() grants it
    instance_snapshot snapshot;  ///< the instance before the grant (as load() gives it)
    bool with_journal = false;   ///< snapshot.journal is the whole journal
    bool resumed = false;        ///< it was suspended (and stays so until a commit)
};

/// What a delivery did. `waiting`: the instance waits for this path, so it should be woken.
struct delivery {
    /// `stored` in the inbox; a `duplicate` of a signal with the same key (nothing changed);
    /// `no_instance` with that id; the instance is `finished` (final), so it was refused.
    enum class outcome : std::uint8_t { stored, duplicate, no_instance, finished };
    outcome result = outcome::no_instance;  ///< what became of the signal
    bool waiting = false;                   ///< the instance waits for this path: wake it
    std::uint64_t id = 0;  ///< the inbox id given to the signal (stored or first delivery)
};

/// A signal for every instance subscribed under one of `subscriptions`. `signal.key` (may be
/// empty) makes the whole fan-out idempotent for `window`: a repeat delivers nothing and
/// reports the first fan-out's reach.
/// With `take`, the emitting worker also takes, in the same step, each instance the signal
/// makes ready to run (suspended, waiting for this path, without a lease, not refused), as
/// store::take() would, but its snapshot holds only what a worker that keeps the instance in
/// memory checks before resuming it: id, definition, version, status and parked as they
/// were, wait set, inbox, timers and the new lease. The journal, params, result and the rest
/// are left out (a worker without the instance loads it). Others are left to be woken as
/// usual.
/// `documents` are written in the same atomic step, checked before anything else (the memo
/// included): one that changed or is locked fails the whole fan-out, nothing written or
/// delivered (fan_out_result::documents_changed). Only for documents the store can write
/// (store::writes_documents); others throw std::logic_error.
struct fan_out_request {
    std::vector<std::string> subscriptions;  ///< the subscription keys the signal is for
    inbox_entry signal;  ///< the signal; the store gives each inbox's entry its own id
    duration window = std::chrono::hours(24);  ///< how long `signal.key` is remembered
    /// The worker that takes the instances the signal makes ready, as store::take() would.
    struct taker {
        std::string worker;        ///< the taking worker
        time_point now{};          ///< the time of the grants
        duration ttl{};            ///< the leases' time to live
        version_refusals refused;  ///< instances this worker leaves to others
    };
    std::optional<taker> take;              ///< unset: take nothing, only deliver
    std::vector<document_write> documents;  ///< written in the same step (see above)
};

/// What a fan-out did: `reached` counts the subscribed instances that are not final (also
/// those that already had the key: a retried fan-out completes a partial first one);
/// `delivered` lists the inboxes written now.
struct fan_out_result {
    std::size_t reached = 0;  ///< the subscribed instances that are not final
    /// The key was fanned out before, within its window: nothing delivered, and `reached`
    /// is the first fan-out's.
    bool duplicate = false;
    bool documents_changed = false;  ///< a document was not as expected: nothing happened
    std::vector<std::pair<std::string, delivery>> delivered;  ///< (instance id, delivery)
    /// Of `delivered`, those taken for fan_out_request::take's worker.
    std::vector<std::pair<std::string, taken_instance>> taken;
};

/// Rewinds a final or parked instance to a journal position (an operator's retry): entries
/// 0..keep-1 stay, the journal as it was is kept for audit (retry_record), and the instance
/// is running again without a lease, so a worker picks it up at once and replays the kept
/// entries. Signals consumed by the dropped entries go back into the inbox (`restore`, with
/// their inbox ids), so the handler receives them again. Fenced on the journal length the
/// caller read. `left_out` names consumed signals the caller does not restore (absent from
/// `restore`), recorded in the retry_record.
struct rewind_request {
    std::string instance;                 ///< the instance id
    std::uint64_t expected_length = 0;    ///< the journal's length as the caller read it
    std::uint64_t keep = 0;               ///< the entries that stay: 0..keep-1
    std::vector<inbox_entry> restore;     ///< signals put back into the inbox, with their ids
    time_point now{};                     ///< when (retry_record::at)
    std::vector<std::uint64_t> left_out;  ///< consumed signals not restored (inbox ids)
};

/// Takes one signal out of an instance's inbox (an operator's way out of a signal that makes
/// the handler fail), recorded in instance_snapshot::removed. Only while no worker runs the
/// instance: it is suspended without a valid lease, or final. Its idempotency key stays
/// claimed, so a sender's retry of the same signal remains a duplicate.
struct remove_signal_request {
    std::string instance;        ///< the instance id
    std::uint64_t inbox_id = 0;  ///< the inbox entry to take out (inbox_entry::id)
    time_point now{};            ///< when (removed_signal::removed)
};

// --- The operators' index -------------------------------------------------------------

/// An instance's status as operators see it: instance_status with the parked instances
/// (failed by a journal mismatch, resumable) apart from the failed ones, and the queued ones
/// (suspended, waiting for their queue to admit them: start_request::first_wait::queued)
/// apart from the suspended ones. (Queued came last: the others keep their values.)
enum class index_status : std::uint8_t {
    running,
    suspended,
    parked,
    failed,
    completed,
    cancelled,
    queued
};
/// How many index_status values there are (the size of status_counts).
inline constexpr std::size_t index_status_count = 7;

/// The status's name: "running", "suspended", "parked", "failed", "completed", "cancelled",
/// "queued".
std::string_view to_string(index_status s) noexcept;
/// The status named `text` (as to_string gives it); nullopt for any other text.
std::optional<index_status> parse_index_status(std::string_view text) noexcept;
/// The index status of an instance with status `s`: parked instead of failed when `parked`.
index_status index_status_of(instance_status s, bool parked) noexcept;
/// The status operators see for an instance loaded whole: queued while it waits for its
/// queue's admission (waits_for_admission; the index may list it as suspended when it was
/// enqueued while a worker below store_level_queued_status was alive), else as above.
index_status index_status_of(const instance_snapshot& s);

/// Which instances list() returns. Every filter is optional; the order is newest first by
/// creation time.
struct list_query {
    std::optional<std::string> definition;  ///< only this definition's instances
    std::optional<index_status> status;     ///< only instances with this status
    std::string prefix;                     ///< of the id
    std::optional<time_point> since;        ///< created at or after
    std::optional<time_point> until;        ///< created before
    std::size_t limit = 50;                 ///< at most this many (1..1000)
    std::string cursor;                     ///< list_page::next of the previous page
};

/// An instance as list() reports it.
struct instance_summary {
    std::string id;                               ///< the instance id
    std::string definition;                       ///< the definition's name
    index_status status = index_status::running;  ///< its status, as the index keeps it
    time_point created{};                         ///< when it was started
    time_point changed{};                         ///< its last write (instance_snapshot::changed)
    friend bool operator==(const instance_summary&, const instance_summary&) = default;
};

/// One page. `next` is empty on the last page; otherwise the cursor of the next one (a page
/// can be shorter than the limit, even empty, when a filter that the index cannot serve, such
/// as the prefix, skipped many instances: go on while `next` is set).
struct list_page {
    std::vector<instance_summary> instances;  ///< newest first
    std::string next;  ///< the cursor of the next page (list_query::cursor); empty: the last
};

/// One definition's instances per status, indexed by index_status; kept by the transitions
/// themselves.
using status_counts = std::array<std::uint64_t, index_status_count>;
/// status_counts by definition name: counts()'s answer.
using instance_counts = std::map<std::string, status_counts, std::less<>>;

/// One page of a journal: entries from `offset`, and how many there are in all.
struct journal_page {
    std::vector<journal_entry> entries;  ///< at most the limit asked for, from `offset`
    std::uint64_t total = 0;             ///< the journal's length
};

// --- Workers and the code versions they run (rolling deploys) ---------------------------

/// The level of the store's data a worker of this build reads and keeps. A feature whose data
/// a worker of an earlier build would mishandle is used only while no such worker is alive:
/// - 0: Keel before child processes and queues (its announcements carry no level);
/// - 1: child processes (a child tells its parent how it ended: the instance's `parent`) and
///   queues (a queued instance runs behind its queue's marker and gives its slot back);
/// - 2: the index's `queued` status (an instance waiting for admission, flagged in its meta,
///   leaves the index's queued set at its next commit);
/// - 3: continue as new (commit_request::restart_params): a schedule keeps its state in a
///   third element of its params, which a worker of an earlier build would not read;
/// - 4: compact subscriptions (start_request::compact_subscriptions): redis_store keeps a
///   signal key's subscribers in a hash, which a worker of an earlier build cannot read.
inline constexpr std::uint32_t store_level = 4;
/// The level child processes need: a child (with a parent) is started only while every live
/// worker reads at least this one.
inline constexpr std::uint32_t store_level_children = 1;
/// The level queues need: an instance is enqueued only while every live worker reads at
/// least this one.
inline constexpr std::uint32_t store_level_queues = 1;
/// The level the index's `queued` status needs: an instance waiting for admission is listed
/// as queued only when every live worker reads at least this one (a worker of an earlier
/// build would leave it in the queued set when it runs it); otherwise as suspended.
inline constexpr std::uint32_t store_level_queued_status = 2;
/// The level continuing as new needs: an instance continues as new only while every live
/// worker reads at least this one; otherwise its journal grows on.
inline constexpr std::uint32_t store_level_restart = 3;
/// The level compact subscriptions need: a start writes a signal key no instance subscribes
/// to yet in the compact form only while every live worker reads at least this one.
inline constexpr std::uint32_t store_level_compact_subscriptions = 4;

/// A worker's announcement, renewed by its heartbeat: the code version of each definition it
/// runs (an empty version for a definition without one) and the store level its build reads.
/// Live until `expires`.
struct worker_record {
    std::string worker;  ///< the worker's name (engine_options::worker)
    std::map<std::string, std::string, std::less<>> versions;  ///< definition -> version
    time_point seen{};                  ///< when it announced itself (its clock)
    time_point expires{};               ///< when the announcement lapses unless renewed
    std::uint32_t level = store_level;  ///< the store level its build reads (0: not given)
    friend bool operator==(const worker_record&, const worker_record&) = default;
};

/// The order of code versions (definition::version): runs of digits compare as numbers,
/// everything else byte by byte, so "9" < "10" and "2026-11.2" < "2026-11.10"; the empty
/// version is the oldest. Negative, zero or positive like std::string::compare.
int compare_versions(std::string_view a, std::string_view b) noexcept;

/// The shard of an instance id among `shards`, a 64-bit FNV-1a of the id (from Keel's own
/// offset basis, 1469598103934665603) modulo the count: the hash tag of its keys in
/// redis_store (`<prefix>:{<shard>}:i:<id>:<suffix>`), and the part of a multi-threaded
/// engine that runs it.
std::size_t shard_of(std::string_view id, std::size_t shards);

/// A store's identity record: its id, and the id an operator last confirmed ("" when none).
struct store_identity {
    std::string id;         ///< made when the store was first used
    std::string confirmed;  ///< the id an operator last confirmed; "" when none
    friend bool operator==(const store_identity&, const store_identity&) = default;
};

/// The store's part for the engine's transitions of instances: start, deliver, commit,
/// leases, what is due. See store.
class instance_store {
  public:
    /// A store may be destroyed through any of its parts.
    virtual ~instance_store() = default;

    /// Readies the store for the calls below, once: its owner (the engine, when it runs)
    /// awaits it before them, and again after it threw (a Redis that does not answer yet).
    /// Calls made before it has succeeded may be refused as an unavailable store's are. This
    /// one does nothing: a store that needs no opening (memory_store) keeps it.
    virtual asio::awaitable<void> prepare() { co_return; }

    /// Creates the instance (status running, lease granted to req.worker with epoch 1; or
    /// suspended without a lease: start_request::suspended) unless it exists; never changes an
    /// existing one.
    virtual asio::awaitable<start_result> start(start_request req) = 0;

    /// A consistent snapshot of one instance, or nullopt. Without `journal` the journal is
    /// left empty (a worker that holds the instance in memory needs only the rest).
    virtual asio::awaitable<std::optional<instance_snapshot>> load(std::string id,
                                                                   bool journal = true) = 0;

    /// Validates (exists; not finished unless parked; lease == current lease; journal length
    /// == expected_length; every consumed inbox id present), then writes everything. A final
    /// status (other than parked) also drops the instance's timers and waits.
    virtual asio::awaitable<expected<commit_result, store_error>> commit(commit_request req) = 0;

    /// Appends to the inbox unless the key was already delivered (a duplicate changes nothing).
    /// Delivery is refused for unknown and finished instances.
    virtual asio::awaitable<delivery> deliver(std::string id, inbox_entry signal) = 0;

    /// Requests answered by a running instance (engine::ask, context::reply): stores the
    /// answer to request `request` of instance `id`, kept for `retention` from when it is
    /// stored, and read by whoever asks with the request's id meanwhile. Storing again
    /// replaces it.
    virtual asio::awaitable<void> put_answer(std::string id, std::string request,
                                             nlohmann::json answer, duration retention) = 0;
    /// The answer stored for request `request` of instance `id` (put_answer); nullopt when
    /// there is none: not answered yet, or its retention has passed.
    virtual asio::awaitable<std::optional<nlohmann::json>> answer(std::string id,
                                                                  std::string request) = 0;

    /// Limits on steps (keel/process/limiter.hpp): a permit of `l` at `now` for `holder` (an
    /// attempt's step, `<instance>#<seq>`), or when to ask again. A holder that holds a
    /// concurrency permit already (its worker died mid-attempt) gets it again.
    virtual asio::awaitable<permit_answer> acquire_permit(limit l, std::string holder,
                                                          time_point now) = 0;
    /// Gives the holder's concurrency permit back (nothing when it holds none).
    virtual asio::awaitable<void> release_permit(std::string limit, std::string holder) = 0;

    /// Queues (keel/process/queue.hpp). This call and the three below are each one atomic
    /// step over the queue's keys (for Redis: one script; the queue's keys share its hash
    /// tag). A store without queues throws std::logic_error (the default implementations do).
    ///
    /// Puts the entry in line, unless it is there already or (dedup) another entry holds its
    /// dedup id: then nothing changes and the answer names that one. When nobody waits and
    /// `q`'s limits have room, the entry is admitted at once (checked after `recheck`).
    virtual asio::awaitable<enqueued> enqueue(queue q, queue_entry entry, duration recheck);
    /// One admission round at `now`: up to `max` entries, first those admitted before whose
    /// check is due (each checked again after `recheck`), then fresh ones as the limits allow,
    /// partitions taking turns. Admitted entries count against the limits until leave_queue.
    /// `worker` admits them: they count against its queue::worker_concurrency (empty: a
    /// caller that is no worker, counted against none). (A queue call: see enqueue.)
    virtual asio::awaitable<admission_round> admit(queue q, time_point now, std::size_t max,
                                                   duration recheck, std::string worker);
    /// admit() by no worker.
    asio::awaitable<admission_round> admit(queue q, time_point now, std::size_t max,
                                           duration recheck) {
        return admit(std::move(q), now, max, recheck, std::string());
    }
    /// Takes the instances out of the queue, waiting or admitted (their slots are free
    /// again); nothing for one that is not there. (A queue call: see enqueue. The engine
    /// sends the instances that end while its previous call is in flight in one call.)
    virtual asio::awaitable<void> leave_queue(std::string queue,
                                              std::vector<std::string> instances);
    /// leave_queue() for one instance.
    asio::awaitable<void> leave_queue(std::string queue, std::string instance) {
        std::vector<std::string> one;
        one.push_back(std::move(instance));
        return leave_queue(std::move(queue), std::move(one));
    }
    /// Depth and admitted, in all and per partition (the first `top` partitions by name).
    /// (A queue call: see enqueue.)
    virtual asio::awaitable<queue_state> describe_queue(std::string queue, std::size_t top);

    /// Appends the signal to the inbox of every non-final instance subscribed under one of
    /// the subscription keys, skipping instances that already have its key. Atomic per
    /// instance (and, for Redis, per shard); a fan-out interrupted half-way is completed by
    /// a retry with the same key.
    virtual asio::awaitable<fan_out_result> fan_out(fan_out_request req) = 0;

    /// Grants the lease when it is free, expired, or already held by `worker` (then renewed
    /// with the same epoch); a new holder gets epoch + 1. Declined (nothing changes) when the
    /// instance's definition and version are among `refused`.
    virtual asio::awaitable<expected<lease_grant, store_error>> acquire(
        std::string id, std::string worker, time_point now, duration ttl,
        version_refusals refused) = 0;
    /// acquire() refusing no version.
    asio::awaitable<expected<lease_grant, store_error>> acquire(std::string id, std::string worker,
                                                                time_point now, duration ttl) {
        return acquire(std::move(id), std::move(worker), now, ttl, version_refusals());
    }

    /// What take() answers.
    using taken = taken_instance;
    /// acquire(), then the instance as load() gives it, in one step where the store can (Redis:
    /// one script; the default implementation makes the two calls). The journal is left out
    /// when it still has `known_length` entries (the caller holds that much of it in memory).
    /// Errors as acquire().
    /// A worker takes an instance to run it. A suspended instance stays suspended, now leased
    /// (the signal or timer that woke it, its wait set, its status and its place in the
    /// operators' index stay until the worker commits), and `resumed` says it was suspended;
    /// the engine lets the commit of the instance's next step carry what it consumed and its
    /// new status. The snapshot is as it was before.
    virtual asio::awaitable<expected<taken, store_error>> take(
        std::string id, std::string worker, time_point now, duration ttl, version_refusals refused,
        std::optional<std::uint64_t> known_length);

    /// Extends a lease still held with this token (even if it expired, as long as nobody took
    /// it); false when the token is stale. A suspended instance (taken to resume, its step
    /// outlasting half a lease) becomes running: the store and its index say it runs.
    virtual asio::awaitable<bool> renew(std::string id, lease_token lease, time_point now,
                                        duration ttl) = 0;

    /// Gives up the lease if held with this token.
    virtual asio::awaitable<void> release(std::string id, lease_token lease) = 0;

    /// Gives up the lease like release() and records why (instance_snapshot::left), so that
    /// operators see which worker gave the instance back and for which reason.
    virtual asio::awaitable<void> leave(std::string id, lease_token lease, departure why) = 0;

    /// Records a failed attempt of a step in flight (replacing the step's previous record),
    /// if `lease` is the current lease of a running instance, or of a suspended one taken to
    /// resume, which becomes running (as renew()); false otherwise. Only failures are written,
    /// so steps that succeed at once cost nothing here.
    virtual asio::awaitable<bool> note_attempt(std::string id, lease_token lease,
                                               step_attempt failed) = 0;

    /// Instances that need a worker at `now`: a timer due, an inbox entry matching a wait, or a
    /// running instance whose lease expired. A hint: the engine re-checks after acquiring.
    /// Instances among `refused` are left for other workers (not returned, not claimed).
    virtual asio::awaitable<std::vector<std::string>> due(time_point now, std::size_t limit,
                                                          version_refusals refused) = 0;
    /// due() refusing no version.
    asio::awaitable<std::vector<std::string>> due(time_point now, std::size_t limit) {
        return due(now, limit, version_refusals());
    }

    /// The earliest time at which due() will return something, if any.
    virtual asio::awaitable<std::optional<time_point>> next_due() = 0;

    /// Whether commits and fan-outs can carry document_writes for documents at `where` (an
    /// address keel::documents gave): redis_store when they are on its own single Redis server.
    virtual bool writes_documents(const document_address& where) const {
        (void)where;
        return false;
    }

    /// How often a worker should look for work that other workers made due (timers they
    /// added, leases of a worker that died), when its engine_options set no poll_interval.
    /// nullopt for a store that only this process uses.
    virtual std::optional<duration> poll_interval() const { return std::nullopt; }
};

/// The store's part for the workers that share it (rolling deploys) and for its identity.
/// See store.
class worker_registry {
  public:
    /// A store may be destroyed through any of its parts.
    virtual ~worker_registry() = default;

    /// Records `self` (replacing the worker's previous announcement), forgets workers whose
    /// announcement expired before self.seen, and returns the live workers, this one included,
    /// by name.
    virtual asio::awaitable<std::vector<worker_record>> announce(worker_record self) = 0;
    /// Forgets a worker that stops.
    virtual asio::awaitable<void> withdraw(std::string worker) = 0;
    /// The workers whose announcement has not expired at `now`, by name.
    virtual asio::awaitable<std::vector<worker_record>> workers(time_point now) = 0;

    // --- the store's identity ---

    /// Which store this is (docs/architecture.md, "A store that comes back empty"): an id made
    /// when the store is first used, so that a worker can tell the store it has been using
    /// from an empty one in its place (a Redis restarted without its data), where idempotent
    /// starts would start every flow again. `open`: the record, made now when there is none
    /// (nullopt instead when `create` is false); `read`: the record as it is, nullopt when
    /// there is none; `confirm`: an operator accepts the store as it is (the record made when
    /// there is none), and `confirmed` names its id.
    enum class identity_action { open, read, confirm };
    /// The store's identity record, as `action` says (see identity_action). The default, for
    /// a store that only this process uses and that is never replaced under it, answers an
    /// empty record.
    virtual asio::awaitable<std::optional<store_identity>> identity(identity_action action,
                                                                    bool create = true);
};

/// The store's part for operators: what they list, read and repair. See store.
class operator_index {
  public:
    /// A store may be destroyed through any of its parts.
    virtual ~operator_index() = default;

    /// See rewind_request. Errors: not_found, wrong_state (running or suspended),
    /// out_of_range (keep > journal length), conflict (the journal changed), busy (leased).
    virtual asio::awaitable<expected<void, store_error>> rewind(rewind_request req) = 0;

    /// See remove_signal_request; answers the entry removed. Errors: not_found, wrong_state
    /// (running), busy (suspended and leased: a worker resumes it), inbox_missing (no entry
    /// with that id).
    virtual asio::awaitable<expected<inbox_entry, store_error>> remove_signal(
        remove_signal_request req) = 0;

    /// Instances matching the query, a page at a time. Paging is stable while instances change:
    /// an instance that matches during the whole walk is returned exactly once.
    virtual asio::awaitable<list_page> list(list_query query) = 0;

    /// Instances per definition and status; cheap (not a scan).
    virtual asio::awaitable<instance_counts> counts() = 0;

    /// Part of an instance's journal (retry = 0), or of the journal it had before its n-th
    /// retry (retry = n, 1-based); nullopt when there is no such instance or retry.
    virtual asio::awaitable<std::optional<journal_page>> read_journal(std::string id,
                                                                      std::size_t retry,
                                                                      std::uint64_t offset,
                                                                      std::size_t limit) = 0;
};

/// The store, split by who uses it:
/// - instance_store: the engine's transitions of instances: start, deliver, commit, leases,
///   what is due;
/// - worker_registry: the workers that share the store (rolling deploys) and the store's
///   identity;
/// - operator_index: what operators list, read and repair.
///
/// `store` is all three; memory_store and redis_store implement it. Implementations must make
/// every call atomic with respect to every other call on the same instance. Thread-safety: as
/// the implementation documents.
class store : public instance_store, public worker_registry, public operator_index {};

}  // namespace keel::process
