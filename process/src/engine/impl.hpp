#pragma once

// The engine's state and machinery (engine::impl), shared by its parts, one job each:
//   cache.cpp    the instances kept in memory: loading (replay), LRU eviction, dropping
//   driver.cpp   driving one instance: setting it going, its events, commits, runs, relocks
//   commit_plan  what a commit carries besides its entries, and whether it may wait
//   lifecycle    an instance's states in memory and the legal moves between them
//   wake.cpp     emits and the instances they wake, due work from the store, deliveries,
//                the wake loop
//   leases.cpp   renewing the leases of the instances held in memory
//   children.cpp child processes: starting them, telling parents, closing children
//   versions.cpp rolling deploys: the heartbeat, what newer workers run, giving instances back
//   engine.cpp   the other public calls, each hopping onto the engine's executor first
// Internal to keel_process.

#include <fmt/chrono.h>

#include <atomic>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <deque>
#include <keel/framework/log.hpp>
#include <keel/framework/trace.hpp>
#include <keel/process/engine.hpp>
#include <keel/process/metrics.hpp>
#include <list>
#include <map>
#include <random>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "commit_plan.hpp"
#include "lifecycle.hpp"
#include "store_watch.hpp"

namespace keel::process {

namespace engine_parts {

// The handler of an instance and its context; shared with the run effects in flight, so
// coroutine frames outlive every side effect that may still use their locals.
struct execution {
    execution(std::string id, keel::clock& clock, std::vector<journal_entry> journal,
              const std::vector<timer_record>& timers, const std::vector<signal_wait>& waits,
              std::uint64_t seed)
        : rt(std::move(id), clock, std::move(journal), timers, waits, seed), ctx(rt) {}
    detail::runtime rt;
    context ctx;
};

// An instance held in memory by this engine.
// An instance started on a queue: which, and whether it was admitted at its enqueue.
struct queued_start {
    std::string queue;  // empty: not on a queue
    bool admitted = false;
};

struct hot_instance {
    std::string id;
    std::string definition;
    std::string version;  // of the code that started it
    std::string parent;   // the instance it is a child of (told of its outcome); or empty
    std::string queue;    // the queue it was started on (its slot is given back at its end)
    std::shared_ptr<execution> exec;
    phase state = phase::loaded;  // changed by engine::impl::move_to() only
    owed pending = owed::nothing;
    lease_token lease;  // while leased(state)
    time_point lease_expires{};
    instance_status stored = instance_status::running;
    bool resumed = false;  // taken from suspended, the event that woke it not yet delivered
    std::vector<signal_wait> stored_waits;
    std::vector<journal_entry> run_results;  // completed, in order
    std::vector<inbox_entry> inbox;  // unconsumed, oldest first, as far as this worker knows
    std::list<std::string>::iterator lru;
    log::logger log{"process"};  // carries the instance id and definition
    definition_metrics* metrics = nullptr;
    std::map<std::uint64_t, step_progress> steps;  // run steps in flight, by seq
    commit_plan commits;
    // The span its steps are children of: its start's or last resumption's
    // (engine_options::spans); invalid until one. Set by enter().
    trace::span_context trace;

    // Moves the instance into span `s` (spans.cpp): its steps become children of it, and its
    // log lines carry its trace_id and span_id.
    void enter(const trace::span_context& s);
    bool leased() const { return engine_parts::leased(state); }
    bool dropped() const { return state == phase::dropped; }
    void owe(owed what) { pending = outranking(pending, what); }
};

// What a suspended instance waits for, for its log line: signal paths and timers with
// their due times.
inline std::string describe_waits(detail::runtime& rt, const std::vector<signal_wait>& waits) {
    std::string out;
    auto add = [&out](std::string_view what) {
        if (!out.empty()) out += ", ";
        out += what;
    };
    for (const auto& w : waits) add("signal " + w.path);
    for (const auto& [_, op] : rt.pending()) {
        if (op.kind != op_kind::timer) continue;
        auto due = fmt::gmtime(std::chrono::system_clock::to_time_t(op.due));
        add(fmt::format("timer \"{}\" due {:%Y-%m-%dT%H:%M:%S}Z", op.name, due));
    }
    return out.empty() ? std::string("nothing") : out;
}

inline durable<nlohmann::json> failing_handler(std::string message) {
    throw std::runtime_error(message);
    co_return nlohmann::json();
}

struct event {
    enum class type { run, signal, timer } kind;
    std::uint64_t seq = 0;
    std::size_t inbox_index = 0;
};

enum class settle_kind { finished, parked, cancelled };

// The children recorded by start steps in a journal ("start <id>", {"child", "close"}),
// joined when the journal consumed their outcome.
std::vector<detail::runtime::child_record> children_in(const std::vector<journal_entry>& journal);
// Marks joined the children whose outcome waits in `inbox`: they have ended too.
void note_outcomes(std::vector<detail::runtime::child_record>& children,
                   const std::vector<inbox_entry>& inbox);

// What wait() answers for an instance in `status` with this result or error: nullopt while
// it is not final.
inline std::optional<expected<nlohmann::json, failure>> outcome_of(
    instance_status status, const std::optional<nlohmann::json>& result,
    const std::optional<std::string>& error) {
    switch (status) {
        case instance_status::completed:
            return result.value_or(nlohmann::json());
        case instance_status::cancelled:
            return unexpected(failure{instance_status::cancelled, "cancelled"});
        case instance_status::failed:
            return unexpected(failure{instance_status::failed, error.value_or("failed")});
        default:
            return std::nullopt;
    }
}

}  // namespace engine_parts

struct engine::impl : std::enable_shared_from_this<impl> {
    using execution = engine_parts::execution;
    using hot_instance = engine_parts::hot_instance;
    using event = engine_parts::event;
    using settle_kind = engine_parts::settle_kind;
    using store_watch = engine_parts::store_watch;
    using phase = engine_parts::phase;
    using owed = engine_parts::owed;

    impl(asio::any_io_executor e, store& s, keel::clock& c, engine_options o,
         std::shared_ptr<engine_metrics> m, std::shared_ptr<store_watch> w, std::size_t part)
        : ex(std::move(e)),
          st(s),
          registry(s),
          index(s),
          clock(c),
          opt(std::move(o)),
          shared_metrics(std::move(m)),
          metrics(*shared_metrics),
          watch(std::move(w)),
          part(part) {
        std::uint64_t seed = opt.seed ? opt.seed + part : std::random_device{}();
        rng.seed(seed);
        if (opt.worker.empty()) opt.worker = "worker-" + std::to_string(rng() % 1000000);
    }

    asio::any_io_executor ex;
    // The store, by who uses it (store.hpp): the instances' transitions, the workers and the
    // store's identity, the operators' index.
    instance_store& st;
    worker_registry& registry;
    operator_index& index;
    // Public calls from another executor (an HTTP thread) hop onto the engine's.
    bool on_executor(const asio::any_io_executor& caller) const { return caller == ex; }
    // Whether the calling thread runs this part's executor (an io_context's; false for others).
    bool runs_this_thread() const;
    keel::clock& clock;
    engine_options opt;
    log::logger log{"process"};
    std::unordered_map<std::string, factory> definitions;
    // definition -> code version; a key for every registered definition
    std::unordered_map<std::string, std::string> versions;
    // Per definition: the signals its instances subscribe to, and which of the definition's
    // parameters binds each signal parameter (nullopt: given where the handler waits).
    struct subscription_plan {
        std::string pattern;
        std::vector<std::optional<std::size_t>> binding;
    };
    std::unordered_map<std::string, std::vector<subscription_plan>> plans;
    std::unordered_map<std::string, std::shared_ptr<hot_instance>> hot;
    std::atomic<std::size_t> hot_size{0};  // hot.size(), for other threads
    std::list<std::string> lru;            // most recently used first
    // Instances being taken by this part (a wake-up's take, or an emit's), from the take until
    // they are adopted or left, with the signals stored in their inbox meanwhile: the taken
    // snapshot may predate them (an emit's take), so they join its inbox at the adoption.
    std::unordered_map<std::string, std::vector<inbox_entry>> taking;
    // The hot instances whose state is held or driving (kept by move_to()): what the leases'
    // renewal walks.
    std::unordered_set<std::string> leased_ids;
    // A wait() in progress: woken when the instance settles on this engine, with the outcome
    // when the settling commit was acknowledged (otherwise wait() reads it from the store).
    struct final_waiter {
        asio::steady_timer timer;
        std::optional<expected<nlohmann::json, failure>> outcome;
    };
    std::unordered_map<std::string, std::vector<final_waiter*>> waiters;
    // An ask() in progress on this part, by "<instance>\n<request id>": woken when a step
    // of this part stores the answer (others are found by polling the store).
    struct ask_waiter {
        asio::cancellation_signal wake;
        bool answered = false;
    };
    std::unordered_map<std::string, std::vector<ask_waiter*>> askers;
    void answered(const std::string& instance, const std::string& request);
    // A limited step waits for a permit of this limit (empty: no longer), for steps_in_flight.
    void note_waiting(const std::string& instance, std::uint64_t seq, std::string limit);
    std::mt19937_64 rng;
    bool loop_running = false;
    bool stopped = false;
    bool poked = false;
    std::shared_ptr<asio::cancellation_signal> loop_wait;
    std::optional<time_point> loop_deadline;  // while the loop sleeps until a time
    asio::steady_timer* loop_idle = nullptr;
    std::shared_ptr<engine_metrics> shared_metrics;  // one for the engine's parts
    engine_metrics& metrics;
    std::shared_ptr<store_watch> watch;  // one for the engine's parts
    // Part 0, at each heartbeat: the store's identity against the one this worker knows.
    asio::awaitable<void> check_store();
    // Starts nothing while the store is in question.
    void refuse_while_in_question() const;

    // ---- the engine's parts (one per service thread), each owning the instances of its
    // shards: this is part `part` of `parts` ----

    std::size_t part = 0;
    std::vector<std::weak_ptr<impl>> parts;  // empty: the only one
    // The part that runs instance `id` (this one when there is only one).
    std::shared_ptr<impl> owner_of(const std::string& id);

    definition_metrics& metrics_of(const std::string& definition);
    void count_hot();  // after hot changed size

    // ---- rolling deploys (versions.cpp) ----
    // Part 0 announces the worker; the others read who is live at the same pace.

    std::vector<worker_record> live;  // as of the last heartbeat, this worker included
    bool live_read = false;           // `live` has been read from the store at least once
    time_point next_heartbeat{};
    // (definition, version) of instances this worker's code could not replay, or that were
    // started by code it does not have: refused while a worker that may run them is alive.
    std::set<std::pair<std::string, std::string>> cannot_run;

    bool withdrawn = false;  // no longer announced (shutting down)
    asio::awaitable<void> heartbeat();
    asio::awaitable<void> withdraw();
    void withdraw_later();  // from stop(): spawned, best effort
    // Reads the live workers now, between heartbeats (before a rare decision).
    asio::awaitable<void> refresh_workers();
    // The version of `definition` this worker runs; null when it does not run it.
    const std::string* my_version(const std::string& definition) const;
    // Whether `version` of `definition` is code this worker does not have (newer than its
    // own, or a definition it does not run).
    bool lacks_code_for(const std::string& definition, const std::string& version) const;
    // Another worker whose announcement has not expired (the list is as of the heartbeat).
    bool other_live(const worker_record& w) const;
    // The live worker other than this one with the newest code for `definition` that is
    // newer than this worker's (or that runs it at all, when this worker does not); null if
    // none.
    const worker_record* newer_worker(const std::string& definition) const;
    // A live worker other than this one whose build reads the store below `level`; null if
    // none.
    const worker_record* worker_below(std::uint32_t level) const;
    // Whether every live worker is known to read the store at `level` or above: false until
    // the first heartbeat has read who is live (and without heartbeats).
    bool all_read(std::uint32_t level) const;
    // What this worker leaves to others now: versions of its definitions that newer live
    // workers started, and what it could not run while someone who might is alive.
    version_refusals refusals() const;
    // Why this worker should give an instance it just acquired back (started by code it does
    // not have, which a live worker runs); nullopt to run it.
    std::optional<std::string> reason_to_leave(const instance_snapshot& snap) const;
    // Gives an instance back with the reason (store::leave) and stops asking for instances
    // of its definition and version while a worker that may run them is alive.
    asio::awaitable<void> leave(std::string id, const std::string& definition,
                                const std::string& version, lease_token lease, std::string reason);
    // Instead of parking an instance whose journal this worker's code cannot replay: gives
    // it back when a worker with newer code is alive. False when there is none.
    asio::awaitable<bool> hand_over(std::shared_ptr<hot_instance> in);

    // ---- instances in memory ----

    // An instance in memory, leased and kept: make_instance, then keep_hot.
    std::shared_ptr<hot_instance> make_hot(instance_snapshot snap, lease_token lease,
                                           time_point expires);
    // Its handler started (or replaying), not yet known to the engine.
    // `starting`: a new instance started on a queue (enqueue), which waits for its admission
    // before the handler runs unless admitted at its enqueue; one loaded from the store
    // knows this from its journal (queue_of, admitted_at_enqueue).
    std::shared_ptr<hot_instance> make_instance(instance_snapshot snap, lease_token lease,
                                                time_point expires,
                                                engine_parts::queued_start starting = {});
    void keep_hot(const std::shared_ptr<hot_instance>& in, engine_parts::phase as);

    void touch(hot_instance& in) { lru.splice(lru.begin(), lru, in.lru); }

    // The one place an instance's state changes (lifecycle.hpp has the legal moves).
    void move_to(hot_instance& in, phase to);

    void drop(std::shared_ptr<hot_instance> in);  // by value: callers may pass a map entry

    void evict();

    // Starts drive() for an instance held here and not yet driven (driver.cpp).
    void ensure_driving(const std::shared_ptr<hot_instance>& in);

    // ---- driving an instance ----

    std::optional<event> find_event(hot_instance& in);

    bool deliver_event(hot_instance& in);

    static bool has_unstarted_runs(detail::runtime& rt);

    // Before the handler resumes live after a suspension (or after a replay): takes every
    // lock it holds again, in operation order, reads each entity again and records a relock
    // entry per lock ahead of whatever the handler is resumed with. A lock that cannot be
    // taken within the repository's lock_wait is recorded as failed (the held<T> then
    // reports it). Never called while replaying: replay applies the recorded entries.
    static asio::awaitable<void> relock(std::shared_ptr<impl> self,
                                        std::shared_ptr<hot_instance> in);

    static asio::awaitable<void> drive(std::shared_ptr<impl> self,
                                       std::shared_ptr<hot_instance> in);

    asio::awaitable<bool> commit(std::shared_ptr<hot_instance> in, instance_status status,
                                 std::vector<signal_wait> waits, bool release);

    asio::awaitable<std::optional<commit_result>> write(std::shared_ptr<hot_instance> in,
                                                        commit_request req);

    asio::awaitable<void> settle(std::shared_ptr<hot_instance> in, settle_kind kind);
    // Continue as new (context::continue_as_new): one commit empties the journal and replaces
    // the params; then the instance is loaded again and runs from the top.
    asio::awaitable<void> start_over(std::shared_ptr<hot_instance> in);

    static void count_finished(definition_metrics& m, settle_kind kind, instance_status status);

    void start_runs(const std::shared_ptr<hot_instance>& in);

    static asio::awaitable<void> execute_run(std::shared_ptr<impl> self,
                                             std::shared_ptr<execution> exec, std::string id,
                                             log::logger log, definition_metrics* metrics,
                                             std::uint64_t seq, op_kind kind, std::string name,
                                             std::shared_ptr<detail::run_body> body,
                                             retry_policy policy,
                                             std::shared_ptr<asio::cancellation_signal> sig,
                                             trace::span_context parent, std::string definition);

    // ---- child processes (children.cpp) ----

    // What an instance's steps ask of the engine (runtime::set_engine_calls).
    std::unique_ptr<detail::runtime::engine_calls> calls_for(std::string instance);
    // Starts `id` as a child of `parent` on its part (engine.cpp), in span `caller`.
    asio::awaitable<void> start_child(std::string definition, std::string id, nlohmann::json params,
                                      std::string parent,
                                      std::optional<trace::span_context> caller);
    // The span an instance's steps run in now (its start's or latest resumption's), when it
    // is in memory on this part and has one.
    std::optional<trace::span_context> current_span(const std::string& instance) const;
    // Puts the child's outcome in its parent's inbox (child_path), once.
    asio::awaitable<void> tell_parent(std::string parent, std::string child, instance_status status,
                                      std::optional<nlohmann::json> result,
                                      std::optional<std::string> error);
    // settle()'s part: tells the parent, if any, before the final commit. False when that
    // failed: the instance was dropped and is taken again later.
    asio::awaitable<bool> tell_parent_before_end(const std::shared_ptr<hot_instance>& in,
                                                 instance_status status,
                                                 const std::optional<nlohmann::json>& result,
                                                 const std::optional<std::string>& error);
    // The children an ending instance leaves: its runtime's, or its journal's when it has not
    // replayed it all.
    asio::awaitable<std::vector<detail::runtime::child_record>> children_of(
        const std::shared_ptr<hot_instance>& in);
    // After `parent` ended: cancels its unfinished children whose parent_close is cancel
    // (each retried while another worker runs it), not waited for.
    void close_children(std::string parent, std::vector<detail::runtime::child_record> children);
    // Instances being cancelled by cancel_anywhere on this part, not held in memory.
    std::unordered_set<std::string> cancelling;
    // An operator's or a parent's cancel, on the instance's part (engine.cpp).
    asio::awaitable<action_result> cancel_anywhere(std::string id);
    // Delivers to an instance on its part (engine::deliver).
    asio::awaitable<delivery> deliver_to(std::string instance, std::string path,
                                         nlohmann::json payload, std::string key);
    // The same, on this part.
    asio::awaitable<delivery> deliver_on_this_part(std::string instance, std::string path,
                                                   nlohmann::json payload, std::string key);
    // Delivers to an instance on its part once this worker has taken it (wake.cpp), so that
    // no other worker's wake-up takes it in between: a queue's admission runs where it was
    // admitted. Delivers as deliver_to does when the take fails.
    asio::awaitable<delivery> deliver_taken(std::string instance, std::string path,
                                            nlohmann::json payload, std::string key);

    // ---- queues (queues.cpp) ----

    std::map<std::string, queue, std::less<>> queues;  // registered; every part has them all
    // Part 0 admits (admission_loop); any part wakes it when a slot may be free or an entry
    // arrived.
    struct admissions;
    std::shared_ptr<admissions> admitting;  // part 0's
    void poke_queues();
    // Gives the instance's slot back, or takes it out of the line, in the background: a
    // failure is logged, and the admission loop's checks find the instance ended. The
    // instances that end while a leave is in flight leave together in the next call.
    void leave_queue_later(std::string queue, std::string instance);
    std::map<std::string, std::vector<std::string>> leaving;  // by queue, not yet sent
    bool leaving_in_flight = false;
    static void start_admitting(std::shared_ptr<impl> first);  // engine::run()
    // engine::enqueue, also for a child (`parent`), on the instance's part: the instance
    // that does the work (another one when deduplicated).
    asio::awaitable<std::string> enqueue(std::string queue, enqueue_options options,
                                         std::string definition, std::string id,
                                         nlohmann::json params, std::string parent);
    std::shared_ptr<impl> first_part();

    // ---- spans (spans.cpp), with engine_options::spans ----

    // The instance resumed by `what` ("signal /pay/o-1", "timer expiry"), waiting since
    // `since`: a span continuing `sender` (a W3C traceparent; empty: the instance's trace so
    // far), which its next steps are children of.
    void trace_resumption(hot_instance& in, std::string what, std::string_view sender,
                          time_point since);
    // The instance's start, from `since` to now, as span `span` ("start <definition>").
    void trace_start(const hot_instance& in, const trace::span_context& span, time_point since);
    // The span of a step's next attempt, a child of `parent` (the instance's span); invalid
    // when no span is recorded (no sink, or an unsampled trace).
    trace::span_context attempt_context(const trace::span_context& parent) const;
    // One attempt of a step or a lock (`what`: "step charge", "lock order/o-1"), from `start`
    // to now, as span `span` (attempt_context); `error` when it failed.
    void trace_attempt(const trace::span_context& span, const std::string& instance,
                       const std::string& definition, std::string what, int attempt,
                       time_point start, const std::string* error);

    // What an operator sees of a step in flight: its attempt, and the last attempt's error
    // (a failure is also written to the store, for every other process to see).
    void note_attempt(const std::shared_ptr<execution>& exec, const std::string& id,
                      std::uint64_t seq, const std::string& name, int attempt,
                      std::optional<std::string> error);
    static asio::awaitable<void> record_attempt(std::shared_ptr<impl> self, std::string id,
                                                lease_token lease, step_attempt failed);

    void run_done(const std::shared_ptr<execution>& exec, const std::string& id,
                  journal_entry entry, std::vector<detail::staged_document> staged);

    engine_parts::document_conflicts conflicts;

    // ---- wake-ups ----

    // Dates a commit and its new journal entries (for operators: inspect, the journal).
    void stamp(commit_request& req);

    void schedule_wake(std::string id, duration delay);

    static asio::awaitable<void> delayed_wake(std::shared_ptr<impl> self, std::string id,
                                              duration delay);

    asio::awaitable<signals::emit_result> emit_here(signals::emit_request request);
    // Runs an instance's part of an emit on the part that owns it, not waited for.
    void hand_over(const std::string& instance, asio::awaitable<void> work);

    // After a signal was stored in an instance's inbox: hand it to the instance if this
    // worker holds it, else wake it if it waits for the signal.
    asio::awaitable<void> delivered(std::string instance, inbox_entry e, delivery d);

    // Takes the instance's lease and runs it (nothing if this worker already does).
    asio::awaitable<void> wake(std::string id);
    // The take under wake() and deliver_taken(), with the journal only if `in` (this worker's
    // copy, if any) is not current; a refused take drops `in` unless another worker is busy
    // with the instance. The caller holds the instance's taking_mark.
    asio::awaitable<std::optional<taken_instance>> take_here(
        const std::string& id, const std::shared_ptr<hot_instance>& in);
    // The same for an instance the fan-out of an emit already took for this worker.
    asio::awaitable<void> taken_by_emit(std::string id, taken_instance got);
    // For an instance an emit took for this worker: true when a take of this worker's, or
    // the driver that released it (then owed a wake-up), runs it with the emit's lease.
    bool run_by_another_path(const std::string& id, hot_instance* in);
    // taken_by_emit() at once, on this part, when it needs nothing from the store: the
    // instance is this part's, kept in memory as the store has it, and runs this worker's
    // code. False, having changed nothing, when it is not so.
    bool adopt_at_once(const std::string& id, taken_instance& got);
    // An instance taken (`in`: this worker's copy from before, if any): runs it, or leaves it.
    asio::awaitable<void> adopt(std::string id, std::shared_ptr<hot_instance> in,
                                taken_instance got);
    // adopt()'s end for a copy in memory that is current: the grant and what the store had.
    void resume_held(const std::shared_ptr<hot_instance>& in, taken_instance& got);

    void notify(const std::string& id,
                std::optional<expected<nlohmann::json, failure>> outcome = std::nullopt);

    void poke();

    asio::awaitable<void> renew_leases();

    std::optional<time_point> next_renewal() const;

    // One round of the wake loop: renew leases, wake what is due. Returns when to look
    // again (nullopt: when poked), or `now` to go round at once.
    asio::awaitable<std::optional<time_point>> wake_round(int& spins);

    // Sleeps until `deadline` (nullopt: until poked) or a poke.
    asio::awaitable<void> idle_until(std::optional<time_point> deadline);
    // When the first of `timers` is due; nullopt when there are none.
    static std::optional<time_point> first_due(const std::vector<timer_record>& timers);
    // A poke for timers this part just stored, the first due at `first` (nullopt: none
    // stored, no poke): none either when the wake loop sleeps until no later than that (it
    // reads the store's next due time again then).
    void poke_for_timers(std::optional<time_point> first);

    // The engine's heartbeat. A store that cannot be reached (Redis down) is a state, not an
    // end: the loop logs the change once, retries with backoff, and logs the recovery.
    static asio::awaitable<void> wake_loop(std::shared_ptr<impl> self);
};

namespace engine_parts {

// Starts an instance on a queue (enqueue), on its part: created waiting for admission.
// As a child of `parent` (when not empty), as start_child does.
asio::awaitable<void> start_queued(std::shared_ptr<engine::impl> self, std::string definition,
                                   std::string id, nlohmann::json params, queued_start queue,
                                   std::string parent, std::optional<trace::span_context> caller);

// Runs body(self, args...) on the part's executor: at once when the caller is on it, else
// spawned there and awaited, so every public call may be awaited from any executor.
template <class R, class... P, class... A>
asio::awaitable<R> on_engine(std::shared_ptr<engine::impl> self,
                             asio::awaitable<R> (*body)(std::shared_ptr<engine::impl>, P...),
                             A... args) {
    if (self->on_executor(co_await asio::this_coro::executor))
        co_return co_await body(std::move(self), std::move(args)...);
    auto ex = self->ex;
    co_return co_await asio::co_spawn(ex, body(std::move(self), std::move(args)...),
                                      asio::use_awaitable);
}

}  // namespace engine_parts

}  // namespace keel::process
