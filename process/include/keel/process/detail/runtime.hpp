#pragma once

// The execution state of one process instance in memory: its journal and replay cursor, the
// operations it waits for, its branches and its ready queue. Awaiters of the durable
// operations talk to it; the engine drives it. Internal: not part of the public API.
//
// Scheduling is what makes replay exact. Branches that can run are resumed one at a time
// from a FIFO ready queue. An operation that has to wait (run, timer, signal) is completed
// only when nothing is ready ("quiescence"), one completion at a time: live by the engine,
// on replay from the journal in recorded order. So a replay reproduces the interleaving of
// the first execution, and the operation numbers (`seq`) come out the same. An operation
// that is next in the journal while nothing else is ready completes synchronously: that is
// exactly what quiescence would do, without the suspension.
//
// Not thread-safe: used on the engine's executor only.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <coroutine>
#include <cstdint>
#include <functional>
#include <keel/process/child.hpp>
#include <keel/process/durable.hpp>
#include <keel/process/journal.hpp>
#include <keel/process/retry.hpp>
#include <keel/process/store.hpp>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace keel {
class clock;
}
namespace keel::trace {
struct span_context;
}

namespace keel::process::detail {

// Receives the recorded value of an operation and decodes it into the awaiter. Returns false
// (with a reason) when the value does not decode, which the runtime treats as a mismatch.
class op_sink {
  public:
    virtual bool accept(const journal_entry& e, std::string& reason) noexcept = 0;

  protected:
    ~op_sink() = default;
};

// Thrown by context::continue_as_new through the handler's frames to its root: the run ends
// and the instance starts over with `params`. Not a std::exception, so that a handler's
// catch of those does not stop it.
struct restart_requested {
    nlohmann::json params;
};

// A document write a step leaves to the commit of its entry (context::update), with the
// documents to tell how that commit ended (documents::written_elsewhere).
struct staged_document {
    document_write write;
    documents* docs = nullptr;
    std::string model;
    std::string id;
};

// What a step's attempt may leave to its commit (the document writes the store can make),
// and the span it runs in (engine_options::spans; null: none), which a call it makes to
// another service continues (context::http).
class step_writes {
  public:
    virtual bool accepts(const document_address& where) const = 0;
    virtual void add(staged_document document) = 0;
    virtual const trace::span_context* attempt_span() const noexcept { return nullptr; }

  protected:
    ~step_writes() = default;
};

// The side effect of a run step: one attempt, its result encoded as JSON.
class run_body {
  public:
    virtual ~run_body() = default;
    virtual asio::awaitable<nlohmann::json> attempt(step_writes& writes) = 0;
    // True for a step whose only effect is an entity write (context::update): it reaches
    // nothing outside the documents, so its commit may be made with the entity steps that
    // follow it.
    virtual bool changes_entities_only() const noexcept { return false; }
};

// The value of a relock entry: the entity read again under the new lease (JSON, null when
// absent), or, when `failed`, {"message": why the lock could not be taken again}.
struct relock_result {
    nlohmann::json value;
    bool failed = false;
};

// A lock the handler holds (ctx.lock, held<T>), type-erased for the runtime and the engine.
// Registered under the seq of its lock operation from the moment that operation completes
// (live or on replay) until the handler lets the held<T> go. The engine releases every
// registered lock before the instance suspends, and takes them again, recording a relock
// entry each, before the handler resumes live.
class lock_slot {
  public:
    virtual ~lock_slot() = default;
    // "order/o-1": the name of the lock's lock and relock entries.
    virtual const std::string& name() const noexcept = 0;
    // Whether the live lease is held now.
    virtual bool locked() const noexcept = 0;
    // Live only: takes the lease again (waiting up to the repository's lock_wait) and reads
    // the entity. The new lease is kept aside until apply() adopts it.
    virtual asio::awaitable<relock_result> reacquire() = 0;
    // Applies a relock entry: the recorded entity becomes the handler's value (live: with
    // the lease reacquire() took; on replay: without a lease). False when it does not decode.
    virtual bool apply(const journal_entry& e, std::string& reason) noexcept = 0;
    // Gives the live lease up now; never blocks.
    virtual void release() noexcept = 0;
};

// An operation the handler waits for that is not in the journal (yet).
struct pending_op {
    std::uint64_t seq = 0;
    op_kind kind = op_kind::run;
    std::string name;
    std::uint64_t branch = 0;
    std::coroutine_handle<> waiter;
    op_sink* sink = nullptr;
    // timer
    time_point due{};
    bool armed = false;  // the store has this timer
    // run and lock (a lock is acquired by a body the engine executes like a run step's)
    std::shared_ptr<run_body> body;
    retry_policy policy;
    bool started = false;
    std::shared_ptr<asio::cancellation_signal> cancel;
};

class runtime;

// A child coroutine running concurrently inside the instance (ctx.spawn, combinator arms).
class branch_node {
  public:
    virtual ~branch_node() = default;

    runtime* rt = nullptr;
    std::uint64_t id = 0;
    std::uint64_t parent = 0;
    bool done = false;       // finished (normally or with an exception) or cancelled
    bool cancelled = false;  // cancelled before it finished
    // Who is told when it finishes: a joining coroutine, or a combinator.
    std::coroutine_handle<> joiner;
    std::uint64_t joiner_branch = 0;
    class combinator_base* combinator = nullptr;
    std::size_t arm = 0;

    virtual promise_base& promise() noexcept = 0;
    virtual std::coroutine_handle<> frame() noexcept = 0;
    virtual std::coroutine_handle<> release_frame() noexcept = 0;

    bool failed() noexcept { return done && !cancelled && promise().error != nullptr; }
};

// A race/any/all awaiting its arms.
class combinator_base {
  public:
    virtual void arm_done(std::size_t arm) noexcept = 0;

  protected:
    ~combinator_base() = default;
};

// Why an instance stopped being runnable in memory.
struct park_reason {
    std::string message;
};

class runtime {
  public:
    // `timers` and `waits` are what the store says the instance waits for: replay must
    // arrive at exactly these operations.
    runtime(std::string id, keel::clock& clock, std::vector<journal_entry> journal,
            const std::vector<timer_record>& timers, const std::vector<signal_wait>& waits,
            std::uint64_t seed);
    ~runtime();
    runtime(const runtime&) = delete;
    runtime& operator=(const runtime&) = delete;

    const std::string& id() const noexcept { return id_; }
    keel::clock& clock() noexcept { return clock_; }

    // ---- for awaiters ----
    std::uint64_t next_seq() noexcept { return next_seq_++; }
    std::uint64_t current_branch() const noexcept { return current_branch_; }
    bool replaying() const noexcept { return cursor_ < journal_.size(); }

    enum class check { ready, wait, parked };
    // An operation that may have to wait: is it next in the journal and may it complete now?
    check replay(std::uint64_t seq, op_kind kind, std::string_view name, op_sink& sink);
    // Registers a waiting operation; the awaiter then suspends with set_waiter.
    pending_op& add_pending(std::uint64_t seq, op_kind kind, std::string name, op_sink& sink);
    void set_waiter(std::uint64_t seq, std::coroutine_handle<> h) noexcept;
    // The awaiter went away before its operation completed (cancelled branch, teardown).
    void cancel_op(std::uint64_t seq) noexcept;
    // When a timer created now is due: its armed due time if the store has it, else now + d.
    std::pair<time_point, bool> timer_due(std::uint64_t seq, duration d) const;
    // The same for a timer due at `at`: its armed due time, else `at`.
    std::pair<time_point, bool> timer_due(std::uint64_t seq, time_point at) const;

    // An operation that completes at once (now, random, uuid, a race's winner): on replay the
    // recorded value, live `live()` recorded. nullptr when the instance was parked.
    const nlohmann::json* immediate(std::uint64_t seq, op_kind kind, std::string_view name,
                                    const std::function<nlohmann::json()>& live);
    std::uint64_t random_u64() noexcept {  // splitmix64: 8 bytes of state per instance
        std::uint64_t z = (rng_ += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    }

    // Parks the instance: nothing more of the handler runs; the engine records the failure.
    void park(std::string message) noexcept;
    bool parked() const noexcept { return park_.has_value(); }
    const std::string& park_message() const noexcept { return park_->message; }

    // Branches.
    void spawn(branch_node& node) noexcept;
    void cancel_branch(branch_node& node) noexcept;
    void schedule(std::coroutine_handle<> h, std::uint64_t branch);

    // ---- for the engine ----
    void start(durable<nlohmann::json> root);
    // Resumes ready coroutines until nothing is ready.
    void run_ready();
    // Completes the operation of the next journal entry (call when replaying at quiescence).
    void replay_next();
    // Frees the replayed journal once the frontier is reached.
    void trim() noexcept;
    // At the first quiescence after replay: every operation the store says the instance
    // waits for must be waited for again; parks the instance otherwise.
    void verify_frontier();
    // Completes a waiting operation with a live result (recorded for the next commit).
    bool complete_live(journal_entry entry, std::optional<std::uint64_t> consumed_inbox_id);

    bool finished() const noexcept { return finished_; }
    const std::optional<nlohmann::json>& result() const noexcept { return result_; }
    const std::optional<std::string>& error() const noexcept { return error_; }
    // Finished by continuing as new (context::continue_as_new): the params to start over with.
    const std::optional<nlohmann::json>& restart() const noexcept { return restart_; }

    std::map<std::uint64_t, pending_op>& pending() noexcept { return pending_; }
    // context::patched and context::deprecate_patch (see there).
    bool patched(std::string_view change);
    void deprecate_patch(std::string_view change);

    // Whether the store's timers are the ones this runtime armed.
    bool armed_as(const std::vector<timer_record>& timers) const;

    // What the next commit writes, taken by the engine when it commits.
    struct changes {
        std::vector<journal_entry> entries;
        std::vector<std::uint64_t> consume;
        std::vector<timer_record> add_timers;
        std::vector<std::uint64_t> cancel_timers;
        std::vector<std::pair<std::string, nlohmann::json>> published;  // context::publish
        bool empty() const noexcept {
            return entries.empty() && consume.empty() && add_timers.empty() &&
                   cancel_timers.empty() && published.empty();
        }
    };
    changes& buffered() noexcept { return buffered_; }
    // context::publish: live, the value goes with the next commit (replacing one of the same
    // name not yet committed). While replaying, and on the way from the journal's end to the
    // waits the store has (the frontier), it was written when the handler first got there
    // and a later value may have replaced it since, so nothing is recorded.
    void publish(std::string name, nlohmann::json value);
    // Journal length in the store, and after the buffered entries are written.
    std::uint64_t committed_length() const noexcept { return committed_; }
    void mark_committed() noexcept;
    // The first `n` buffered entries are in the store (written with the start); what the
    // handler buffered after them stays buffered.
    void mark_entries_committed(std::size_t n) noexcept;
    // Timers and waits as the store should know them now; arms the new timers.
    std::vector<signal_wait> wait_set() const;
    void arm_new_timers();

    // ---- held locks (ctx.lock) ----
    // Registers the lock taken by operation `seq`; `live`: with a live lease (else, replayed,
    // it has to be taken again before the handler resumes live).
    void register_lock(std::uint64_t seq, std::shared_ptr<lock_slot> slot, bool live);
    void unregister_lock(std::uint64_t seq) noexcept;
    // The registered locks in operation order.
    std::vector<std::pair<std::uint64_t, std::shared_ptr<lock_slot>>> held_locks() const;
    // Before a suspension: releases every held lock; they are taken again at the next resume.
    void release_locks() noexcept;
    // Whether the held locks must be taken again before the handler resumes live.
    bool relock_due() const noexcept { return relock_due_ && !locks_.empty(); }
    // Live: records the relock entry (in the buffered changes) and applies it. False when the
    // lock is no longer registered (nothing recorded) or the entry does not apply (parked).
    bool relocked(journal_entry entry);
    void relock_done() noexcept { relock_due_ = false; }

    // ---- what steps ask of the engine: children (context::start), deliveries ----
    // One per instance, set by the engine when it makes the instance.
    class engine_calls {
      public:
        virtual ~engine_calls() = default;
        // Starts a child of this instance (of none when detached), on a queue when the
        // options name one.
        virtual asio::awaitable<void> start(std::string definition, std::string id,
                                            nlohmann::json params, child_options options) = 0;
        // Delivers a signal (engine::deliver); true when an instance not final has it.
        virtual asio::awaitable<bool> deliver(std::string instance, std::string path,
                                              nlohmann::json payload, std::string key) = 0;
        // Stores the answer to a request (context::reply) and tells a local asker.
        virtual asio::awaitable<void> answer(std::string request, nlohmann::json answer) = 0;
        // Waits for a permit of `l` for step `seq` (context::run(...).limited), and gives it
        // back.
        virtual asio::awaitable<void> take_permit(limit l, std::uint64_t seq) = 0;
        virtual asio::awaitable<void> give_permit(std::string limit, std::uint64_t seq) = 0;
        // Whether every live worker reads store_level_restart (context::continue_as_new).
        virtual bool may_restart() = 0;
    };
    void set_engine_calls(std::unique_ptr<engine_calls> calls) { calls_ = std::move(calls); }
    // A deliver step's body (context::deliver).
    static asio::awaitable<nlohmann::json> deliver(runtime* rt, std::string instance,
                                                   std::string path, nlohmann::json payload,
                                                   std::string key);
    // A reply step's body (context::reply): the answer, {"value"} or {"refused"}, stored.
    static asio::awaitable<nlohmann::json> answer(runtime* rt, std::string request,
                                                  nlohmann::json answer);
    // A limited step's attempt takes a permit first and gives it back after (limiter.cpp).
    static asio::awaitable<void> take_permit(runtime* rt, const limit& l, std::uint64_t seq);
    static asio::awaitable<void> give_permit(runtime* rt, const limit& l, std::uint64_t seq);
    // A continue-as-new step's body: whether the fleet lets the instance start over now.
    static bool may_restart(runtime* rt);
    // The seq the next operation will get.
    std::uint64_t upcoming_seq() const noexcept { return next_seq_; }
    // A start step's body: starts the child (a step: it may run more than once; the start
    // finds the child it made before) and returns its journal value {"child", "close"}.
    static asio::awaitable<nlohmann::json> start_child(runtime* rt, std::string definition,
                                                       std::string id, nlohmann::json params,
                                                       child_options options);
    struct child_record {
        std::string id;
        parent_close on_close = parent_close::cancel;
        bool joined = false;  // its outcome reached the handler: it has ended
    };
    // The children it started, live or replayed, in order.
    void note_child(std::string id, parent_close on_close);
    void note_joined(std::string_view id) noexcept;
    const std::vector<child_record>& children() const noexcept { return children_; }

    // Run effects in flight keep the runtime (and so every coroutine frame) alive.
    void run_started() noexcept { ++runs_in_flight_; }
    void run_finished() noexcept;
    std::size_t runs_in_flight() const noexcept { return runs_in_flight_; }

    // Detached: the engine dropped it; late completions are discarded.
    bool detached = false;

  private:
    struct ready_item {
        std::coroutine_handle<> handle;
        std::uint64_t branch;
    };

    void complete(std::map<std::uint64_t, pending_op>::iterator it, const journal_entry& e);
    void remove_pending(std::map<std::uint64_t, pending_op>::iterator it) noexcept;
    void mismatch(const journal_entry& recorded, op_kind kind, std::string_view name);
    void advance() noexcept;
    static void root_done(void* self) noexcept;
    static void branch_done(void* node) noexcept;
    void collect_subtree(std::uint64_t id, std::vector<std::uint64_t>& out) const;
    bool apply_relock(const journal_entry& e);

    std::string id_;
    keel::clock& clock_;
    std::vector<journal_entry> journal_;  // entries still to replay (freed once replayed)
    std::size_t cursor_ = 0;
    std::uint64_t committed_ = 0;
    std::uint64_t next_seq_ = 0;
    std::unordered_map<std::uint64_t, time_point> armed_;
    struct expected_op {
        op_kind kind;
        std::string name;
    };
    std::map<std::uint64_t, expected_op> expected_;  // the stored wait set, until verified
    std::map<std::uint64_t, pending_op> pending_;
    std::vector<ready_item> ready_;  // FIFO from ready_head_ (a deque costs 576 bytes)
    std::size_t ready_head_ = 0;
    std::unordered_map<std::uint64_t, branch_node*> branches_;  // live branches (not the root)
    std::uint64_t next_branch_ = 1;
    std::uint64_t current_branch_ = 0;
    bool root_alive_ = false;
    durable<nlohmann::json> root_;
    std::optional<park_reason> park_;
    bool finished_ = false;
    std::optional<nlohmann::json> result_;
    std::optional<std::string> error_;
    std::optional<nlohmann::json> restart_;
    changes buffered_;
    std::vector<std::coroutine_handle<>> graveyard_;  // cancelled frames with runs in flight
    std::size_t runs_in_flight_ = 0;
    std::map<std::uint64_t, std::shared_ptr<lock_slot>> locks_;  // held locks by lock seq
    bool relock_due_ = false;
    bool tearing_down_ = false;
    std::uint64_t rng_;
    std::unique_ptr<engine_calls> calls_;  // none outside an engine
    std::vector<child_record> children_;

    friend class branch_node;
};

}  // namespace keel::process::detail
