#include <fmt/chrono.h>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <deque>
#include <keel/framework/log.hpp>
#include <keel/process/engine.hpp>
#include <keel/process/metrics.hpp>
#include <list>
#include <map>
#include <random>
#include <unordered_map>
#include <unordered_set>

namespace keel::process {

namespace {

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
struct hot_instance {
    std::string id;
    std::shared_ptr<execution> exec;
    std::optional<lease_token> lease;
    time_point lease_expires{};
    instance_status stored = instance_status::running;
    std::vector<signal_wait> stored_waits;
    std::vector<journal_entry> run_results;  // completed, in order
    std::vector<inbox_entry> inbox;  // unconsumed, oldest first, as far as this worker knows
    bool driving = false;
    bool dropped = false;
    bool cancel_requested = false;
    std::list<std::string>::iterator lru;
    log::logger log{"process"};  // carries the instance id and definition
    definition_metrics* metrics = nullptr;
    std::map<std::uint64_t, step_progress> steps;  // run steps in flight, by seq
};

// What a suspended instance waits for, for its log line: signal paths and timers with
// their due times.
std::string describe_waits(detail::runtime& rt, const std::vector<signal_wait>& waits) {
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

durable<nlohmann::json> failing_handler(std::string message) {
    throw std::runtime_error(message);
    co_return nlohmann::json();
}

struct event {
    enum class type { run, signal, timer } kind;
    std::uint64_t seq = 0;
    std::size_t inbox_index = 0;
};

enum class settle_kind { finished, parked, cancelled };

// What wait() answers for an instance in `status` with this result or error: nullopt while
// it is not final.
std::optional<expected<nlohmann::json, failure>> outcome_of(
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

}  // namespace

struct engine::impl : std::enable_shared_from_this<impl> {
    impl(asio::any_io_executor e, store& s, keel::clock& c, engine_options o)
        : ex(std::move(e)), st(s), clock(c), opt(std::move(o)) {
        std::uint64_t seed = opt.seed ? opt.seed : std::random_device{}();
        rng.seed(seed);
        if (opt.worker.empty()) opt.worker = "worker-" + std::to_string(rng() % 1000000);
    }

    asio::any_io_executor ex;
    store& st;
    // Public calls from another executor (an HTTP thread) hop onto the engine's.
    bool on_executor(const asio::any_io_executor& caller) const { return caller == ex; }
    keel::clock& clock;
    engine_options opt;
    log::logger log{"process"};
    std::unordered_map<std::string, factory> definitions;
    // Per definition: the signals its instances subscribe to, and which of the definition's
    // parameters binds each signal parameter (nullopt: given where the handler waits).
    struct subscription_plan {
        std::string pattern;
        std::vector<std::optional<std::size_t>> binding;
    };
    std::unordered_map<std::string, std::vector<subscription_plan>> plans;
    std::unordered_map<std::string, std::shared_ptr<hot_instance>> hot;
    std::list<std::string> lru;  // most recently used first
    std::unordered_set<std::string> waking;
    std::unordered_set<std::string> leased;  // hot instances this worker holds a lease on
    // A wait() in progress: woken when the instance settles on this engine, with the outcome
    // when the settling commit was acknowledged (otherwise wait() reads it from the store).
    struct final_waiter {
        asio::steady_timer timer;
        std::optional<expected<nlohmann::json, failure>> outcome;
    };
    std::unordered_map<std::string, std::vector<final_waiter*>> waiters;
    std::mt19937_64 rng;
    bool loop_running = false;
    bool stopped = false;
    bool poked = false;
    std::shared_ptr<asio::cancellation_signal> loop_wait;
    asio::steady_timer* loop_idle = nullptr;
    engine_metrics metrics;

    definition_metrics& metrics_of(const std::string& definition) {
        return metrics.of(definitions.contains(definition) ? definition : "(unknown)");
    }

    // ---- instances in memory ----

    std::shared_ptr<hot_instance> make_hot(instance_snapshot snap, lease_token lease,
                                           time_point expires) {
        auto in = std::make_shared<hot_instance>();
        in->id = snap.id;
        auto replayed = snap.journal.size();
        in->exec = std::make_shared<execution>(snap.id, clock, std::move(snap.journal), snap.timers,
                                               snap.waits, rng());
        in->lease = lease;
        in->lease_expires = expires;
        leased.insert(in->id);
        in->stored = snap.status;
        in->stored_waits = snap.waits;
        in->inbox = std::move(snap.inbox);
        in->log = log.with("instance", snap.id).with("definition", snap.definition);
        in->metrics = &metrics_of(snap.definition);
        auto def = definitions.find(snap.definition);
        durable<nlohmann::json> root;
        try {
            if (def == definitions.end())
                throw std::runtime_error("unknown process definition " + snap.definition);
            root = def->second(in->exec->ctx, snap.params);
        } catch (const std::exception& e) {
            root = failing_handler(std::string("cannot start the handler: ") + e.what());
        }
        auto began = std::chrono::steady_clock::now();
        in->exec->rt.start(std::move(root));
        if (replayed > 0) {
            auto& m = *in->metrics;
            m.replays.fetch_add(1, std::memory_order_relaxed);
            m.replayed_entries.fetch_add(replayed, std::memory_order_relaxed);
            m.replay_ns.fetch_add(
                static_cast<std::uint64_t>((std::chrono::steady_clock::now() - began).count()),
                std::memory_order_relaxed);
        }
        lru.push_front(in->id);
        in->lru = lru.begin();
        hot[in->id] = in;
        evict();
        metrics.set_hot(hot.size());
        return in;
    }

    void touch(hot_instance& in) { lru.splice(lru.begin(), lru, in.lru); }

    void drop(std::shared_ptr<hot_instance> in) {  // by value: callers may pass a map entry
        if (in->dropped) return;
        in->dropped = true;
        in->exec->rt.detached = true;
        if (auto it = hot.find(in->id); it != hot.end() && it->second == in) {
            hot.erase(it);
            leased.erase(in->id);
        }
        lru.erase(in->lru);
        in->exec.reset();
        metrics.set_hot(hot.size());
    }

    void evict() {
        if (hot.size() <= opt.max_hot) return;
        for (auto it = lru.end(); it != lru.begin() && hot.size() > opt.max_hot;) {
            --it;
            auto in = hot.at(*it);
            bool idle = !in->driving && !in->lease && in->exec->rt.runs_in_flight() == 0;
            if (!idle) continue;
            auto prev = it;
            bool first = it == lru.begin();
            if (!first) --prev;
            drop(in);
            if (first) break;
            it = std::next(prev);
        }
    }

    void ensure_driving(const std::shared_ptr<hot_instance>& in) {
        if (in->driving || in->dropped || stopped) return;
        in->driving = true;
        asio::co_spawn(ex, drive(shared_from_this(), in),
                       [self = shared_from_this(), in](std::exception_ptr e) {
                           if (!e) return;
                           std::string why = "not a std::exception";
                           try {
                               std::rethrow_exception(e);
                           } catch (const std::exception& x) {
                               why = x.what();
                           } catch (...) {
                           }
                           // The store failed under the instance (Redis down): forget it and
                           // load it again later, as after a commit of unknown outcome.
                           self->log.warn("process {}: {}; reloading", in->id, why);
                           in->driving = false;
                           if (in->dropped || self->stopped) return;
                           self->drop(in);
                           self->schedule_wake(in->id, self->opt.lease_ttl / 10);
                       });
    }

    // ---- driving an instance ----

    std::optional<event> find_event(hot_instance& in) {
        if (!in.run_results.empty()) return event{event::type::run, 0, 0};
        auto& pending = in.exec->rt.pending();
        std::optional<event> sig;
        time_point sig_at{};
        for (std::size_t i = 0; i < in.inbox.size() && !sig; ++i) {
            for (const auto& [seq, op] : pending) {
                if (op.kind == op_kind::signal && op.name == in.inbox[i].path) {
                    sig = event{event::type::signal, seq, i};
                    sig_at = in.inbox[i].at;
                    break;
                }
            }
        }
        auto now = clock.now();
        std::optional<event> timer;
        time_point timer_due{};
        for (const auto& [seq, op] : pending) {
            if (op.kind != op_kind::timer || op.due > now) continue;
            if (!timer || op.due < timer_due) {
                timer = event{event::type::timer, seq, 0};
                timer_due = op.due;
            }
        }
        // The earlier event wins; a signal that arrived by the due time beats the timer.
        if (sig && (!timer || sig_at <= timer_due)) return sig;
        return timer;
    }

    bool deliver_event(hot_instance& in) {
        auto ev = find_event(in);
        if (!ev) return false;
        auto& rt = in.exec->rt;
        switch (ev->kind) {
            case event::type::run: {
                journal_entry e = std::move(in.run_results.front());
                in.run_results.erase(in.run_results.begin());
                rt.complete_live(std::move(e), std::nullopt);
                break;
            }
            case event::type::signal: {
                inbox_entry msg = std::move(in.inbox[ev->inbox_index]);
                in.log.info("{} signal {}",
                            in.stored == instance_status::suspended ? "resumed by" : "received",
                            msg.path);
                in.inbox.erase(in.inbox.begin() + static_cast<std::ptrdiff_t>(ev->inbox_index));
                in.metrics->signal_resume_seconds.observe(clock.now() - msg.at);
                journal_entry e{ev->seq, op_kind::signal, msg.path,
                                nlohmann::json{{"id", msg.id}, {"payload", std::move(msg.payload)}},
                                false};
                rt.complete_live(std::move(e), msg.id);
                break;
            }
            case event::type::timer: {
                auto& op = rt.pending().at(ev->seq);
                in.log.info("{} timer \"{}\"",
                            in.stored == instance_status::suspended ? "resumed by" : "fired",
                            op.name);
                in.metrics->timer_lateness_seconds.observe(clock.now() - op.due);
                journal_entry e{ev->seq, op_kind::timer, op.name,
                                nlohmann::json(op.due.time_since_epoch().count()), false};
                rt.complete_live(std::move(e), std::nullopt);
                break;
            }
        }
        return true;
    }

    // Run steps and lock acquisitions are both side effects the engine executes.
    static bool executes(op_kind kind) noexcept {
        return kind == op_kind::run || kind == op_kind::lock;
    }

    static bool has_unstarted_runs(detail::runtime& rt) {
        for (const auto& [_, op] : rt.pending())
            if (executes(op.kind) && !op.started) return true;
        return false;
    }

    // Before the handler resumes live after a suspension (or after a replay): takes every
    // lock it holds again, in operation order, reads each entity again and records a relock
    // entry per lock ahead of whatever the handler is resumed with. A lock that cannot be
    // taken within the repository's lock_wait is recorded as failed (the held<T> then
    // reports it). Never called while replaying: replay applies the recorded entries.
    static asio::awaitable<void> relock(std::shared_ptr<impl> self,
                                        std::shared_ptr<hot_instance> in) {
        auto exec = in->exec;
        auto& rt = exec->rt;
        auto locks = rt.held_locks();
        for (auto& held : locks) {
            std::uint64_t seq = held.first;
            auto& slot = held.second;
            detail::relock_result got;
            try {
                got = co_await slot->reacquire();
            } catch (const std::exception& e) {
                got.value = nlohmann::json{{"message", e.what()}};
                got.failed = true;
            }
            if (in->dropped || self->stopped || rt.detached) co_return;
            journal_entry e{seq, op_kind::relock, slot->name(), std::move(got.value), got.failed};
            if (e.failed)
                self->log.warn("process {}: lock {} not taken again: {}", in->id, slot->name(),
                               e.value["message"].dump());
            rt.relocked(std::move(e));
            if (rt.parked()) co_return;
        }
        rt.relock_done();
    }

    static asio::awaitable<void> drive(std::shared_ptr<impl> self,
                                       std::shared_ptr<hot_instance> in) {
        auto exec = in->exec;
        auto& rt = exec->rt;
        self->touch(*in);
        for (;;) {
            if (in->dropped || self->stopped) break;
            if (in->cancel_requested) {
                co_await self->settle(in, settle_kind::cancelled);
                break;
            }
            rt.run_ready();
            if (rt.parked()) {
                co_await self->settle(in, settle_kind::parked);
                break;
            }
            if (rt.finished()) {
                co_await self->settle(in, settle_kind::finished);
                break;
            }
            if (rt.replaying()) {
                rt.replay_next();
                continue;
            }
            rt.trim();
            rt.verify_frontier();
            if (rt.parked()) continue;
            if (rt.relock_due() && (self->find_event(*in) || has_unstarted_runs(rt))) {
                co_await relock(self, in);
                continue;
            }
            if (self->deliver_event(*in)) continue;

            bool new_runs = has_unstarted_runs(rt);
            auto status = new_runs || rt.runs_in_flight() > 0 ? instance_status::running
                                                              : instance_status::suspended;
            rt.arm_new_timers();
            auto waits = rt.wait_set();
            bool release = status == instance_status::suspended;
            // A suspended instance holds no entity lock: each is taken again at the resume.
            if (release) rt.release_locks();
            if (release && log::enabled(log::level::info))
                in->log.info("suspended, waiting for {}", describe_waits(rt, waits));
            if (!rt.buffered().empty() || status != in->stored || waits != in->stored_waits) {
                bool new_timers = !rt.buffered().add_timers.empty();
                if (!co_await self->commit(in, status, std::move(waits), release)) break;
                if (new_timers) self->poke();  // the next due time may be earlier now
            } else if (release) {
                co_await self->st.release(in->id, *in->lease);
                self->poke();  // a signal may have arrived meanwhile: the store knows
            }
            if (in->dropped) break;
            if (release) {
                in->lease.reset();
                self->leased.erase(in->id);
                in->driving = false;
                self->evict();
                co_return;  // due work (a signal that arrived meanwhile) comes back via wake()
            }
            if (new_runs) {
                self->start_runs(in);
                continue;
            }
            if (!in->run_results.empty() || in->cancel_requested || self->find_event(*in)) continue;
            break;
        }
        in->driving = false;
    }

    asio::awaitable<bool> commit(std::shared_ptr<hot_instance> in, instance_status status,
                                 std::vector<signal_wait> waits, bool release) {
        auto& rt = in->exec->rt;
        auto& b = rt.buffered();
        commit_request req;
        req.instance = in->id;
        req.lease = *in->lease;
        req.expected_length = rt.committed_length();
        req.entries = b.entries;
        req.consume = b.consume;
        req.add_timers = b.add_timers;
        req.cancel_timers = b.cancel_timers;
        // Unchanged state is left out, so that a commit of entries alone is an append
        // (the store's cheapest write). A releasing commit states it in full.
        if (release || waits != in->stored_waits) req.waits = waits;
        if (release || status != in->stored) req.status = status;
        req.release = release;
        auto ack = co_await write(in, std::move(req));
        if (!ack) co_return false;
        // A signal another worker delivered while this one held the instance.
        if (release && ack->signal_waiting) schedule_wake(in->id, duration::zero());
        rt.mark_committed();
        in->stored = status;
        in->stored_waits = std::move(waits);
        co_return true;
    }

    asio::awaitable<std::optional<commit_result>> write(std::shared_ptr<hot_instance> in,
                                                        commit_request req) {
        expected<commit_result, store_error> r;
        bool lost = false;
        std::string what;
        stamp(req);
        try {
            r = co_await st.commit(std::move(req));
        } catch (const std::exception& e) {
            lost = true;
            what = e.what();
        }
        if (lost) {
            // The outcome is unknown: forget the instance and load it again.
            log.warn("process {}: commit outcome unknown ({}); reloading", in->id, what);
            auto id = in->id;
            drop(in);
            schedule_wake(id, opt.lease_ttl / 10);
            co_return std::nullopt;
        }
        if (!r) {
            log.warn("process {}: commit rejected ({}); dropping it from memory", in->id,
                     to_string(r.error()));
            drop(in);
            co_return std::nullopt;
        }
        co_return *r;
    }

    asio::awaitable<void> settle(std::shared_ptr<hot_instance> in, settle_kind kind) {
        auto exec = in->exec;
        auto& rt = exec->rt;
        commit_request req;
        req.instance = in->id;
        req.lease = *in->lease;
        req.expected_length = rt.committed_length();
        req.release = true;
        switch (kind) {
            case settle_kind::finished: {
                auto& b = rt.buffered();
                req.entries = b.entries;
                req.consume = b.consume;
                req.status = rt.error() ? instance_status::failed : instance_status::completed;
                if (rt.error())
                    req.error = *rt.error();
                else
                    req.result = rt.result();
                break;
            }
            case settle_kind::parked:
                req.status = instance_status::failed;
                req.parked = true;
                req.error = rt.park_message();
                in->log.error("parked: {}", rt.park_message());
                break;
            case settle_kind::cancelled:
                req.status = instance_status::cancelled;
                break;
        }
        auto id = in->id;
        auto outcome = outcome_of(*req.status, req.result, req.error);
        auto status = *req.status;
        auto error = req.error;
        auto ack = co_await write(in, std::move(req));
        if (ack && kind == settle_kind::finished && status == instance_status::failed)
            in->log.info("failed: {}", error.value_or("failed"));
        else if (ack && kind != settle_kind::parked)
            in->log.info("{}", to_string(status));
        if (ack) count_finished(*in->metrics, kind, status);
        if (ack) drop(in);
        notify(id, ack ? std::move(outcome) : std::nullopt);
    }

    static void count_finished(definition_metrics& m, settle_kind kind, instance_status status) {
        auto& counter = kind == settle_kind::parked            ? m.parked
                        : status == instance_status::cancelled ? m.cancelled
                        : status == instance_status::failed    ? m.failed
                                                               : m.completed;
        counter.fetch_add(1, std::memory_order_relaxed);
    }

    void start_runs(const std::shared_ptr<hot_instance>& in) {
        auto& rt = in->exec->rt;
        for (auto& [seq, op] : rt.pending()) {
            if (!executes(op.kind) || op.started) continue;
            op.started = true;
            op.cancel = std::make_shared<asio::cancellation_signal>();
            rt.run_started();
            auto sig = op.cancel;
            asio::co_spawn(ex,
                           execute_run(shared_from_this(), in->exec, in->id, in->log, in->metrics,
                                       seq, op.kind, op.name, op.body, op.policy, sig),
                           // The handler keeps the signal alive until Asio clears the slot.
                           asio::bind_cancellation_slot(sig->slot(), [sig](std::exception_ptr) {}));
        }
    }

    static asio::awaitable<void> execute_run(std::shared_ptr<impl> self,
                                             std::shared_ptr<execution> exec, std::string id,
                                             log::logger log, definition_metrics* metrics,
                                             std::uint64_t seq, op_kind kind, std::string name,
                                             std::shared_ptr<detail::run_body> body,
                                             retry_policy policy,
                                             std::shared_ptr<asio::cancellation_signal> sig) {
        struct in_flight {
            execution* e;
            void finish() { std::exchange(e, nullptr)->rt.run_finished(); }
            ~in_flight() {
                if (e) e->rt.run_finished();
            }
        } guard{exec.get()};
        (void)sig;
        journal_entry entry{seq, kind, name, nullptr, false};
        auto began = std::chrono::steady_clock::now();
        for (int attempt = 1;; ++attempt) {
            metrics->step_attempts.fetch_add(1, std::memory_order_relaxed);
            self->note_attempt(exec, id, seq, name, attempt, std::nullopt);
            std::string error;
            bool terminal = false;
            bool ok = false;
            log.debug("{} \"{}\": attempt {}", to_string(kind), name, attempt);
            try {
                entry.value = co_await body->attempt();
                if (nesting_depth(entry.value) > max_value_depth)
                    throw terminal_error("the result nests deeper than " +
                                         std::to_string(max_value_depth) + " levels");
                ok = true;
            } catch (const terminal_error& e) {
                error = e.what();
                terminal = true;
            } catch (const std::exception& e) {
                error = e.what();
                terminal = policy.terminal && policy.terminal(e);
            } catch (...) {
                error = "unknown exception";
            }
            if (ok) break;
            auto cs = co_await asio::this_coro::cancellation_state;
            if (cs.cancelled() != asio::cancellation_type::none || exec->rt.detached) co_return;
            if (terminal || attempt >= policy.max_attempts) {
                log.warn("{} \"{}\" failed for good at attempt {}: {}", to_string(kind), name,
                         attempt, error);
                entry.failed = true;
                entry.value = nlohmann::json{{"message", error}};
                break;
            }
            metrics->step_retries.fetch_add(1, std::memory_order_relaxed);
            self->note_attempt(exec, id, seq, name, attempt, error);
            auto wait = policy.backoff(attempt);
            std::uniform_real_distribution<double> spread(-policy.jitter, policy.jitter);
            wait = std::chrono::duration_cast<duration>(wait * (1.0 + spread(self->rng)));
            log.warn("{} \"{}\" attempt {} failed: {}; retrying in {} ms", to_string(kind), name,
                     attempt, error,
                     std::chrono::duration_cast<std::chrono::milliseconds>(wait).count());
            error_code ec;
            co_await self->clock.async_wait_until(self->ex, self->clock.now() + wait,
                                                  asio::redirect_error(asio::use_awaitable, ec));
            if (ec) co_return;
        }
        metrics->step_seconds.observe(std::chrono::steady_clock::now() - began);
        guard.finish();  // before the instance looks at what is still in flight
        self->run_done(exec, id, std::move(entry));
    }

    // What an operator sees of a step in flight: its attempt, and the last attempt's error.
    void note_attempt(const std::shared_ptr<execution>& exec, const std::string& id,
                      std::uint64_t seq, const std::string& name, int attempt,
                      std::optional<std::string> error) {
        auto it = hot.find(id);
        if (it == hot.end() || it->second->exec != exec) return;
        auto& p = it->second->steps[seq];
        p.seq = seq;
        p.name = name;
        p.attempt = attempt;
        if (error) p.last_error = std::move(*error);
    }

    void run_done(const std::shared_ptr<execution>& exec, const std::string& id,
                  journal_entry entry) {
        if (exec->rt.detached) return;
        auto it = hot.find(id);
        if (it == hot.end() || it->second->exec != exec) return;
        it->second->steps.erase(entry.seq);
        it->second->run_results.push_back(std::move(entry));
        ensure_driving(it->second);
    }

    // ---- wake-ups ----

    // Dates a commit and its new journal entries (for operators: inspect, the journal).
    void stamp(commit_request& req) {
        req.now = clock.now();
        for (auto& e : req.entries)
            if (e.at == time_point{}) e.at = req.now;
    }

    void schedule_wake(std::string id, duration delay) {
        asio::co_spawn(ex, delayed_wake(shared_from_this(), std::move(id), delay),
                       [](std::exception_ptr) {});
    }

    static asio::awaitable<void> delayed_wake(std::shared_ptr<impl> self, std::string id,
                                              duration delay) {
        if (delay > duration::zero()) {
            error_code ec;
            co_await self->clock.async_wait_until(self->ex, self->clock.now() + delay,
                                                  asio::redirect_error(asio::use_awaitable, ec));
        }
        co_await self->wake(id);
    }

    asio::awaitable<signals::emit_result> emit_here(signals::emit_request request) {
        fan_out_request req;
        req.subscriptions = std::move(request.subscriptions);
        req.signal.key = signals::scoped_key(request.path, request.key);
        req.signal.path = std::move(request.path);
        req.signal.payload = std::move(request.payload);
        req.signal.at = clock.now();
        req.window = opt.emit_window;
        auto out = co_await st.fan_out(req);
        for (auto& [instance, d] : out.delivered) co_await delivered(instance, req.signal, d);
        signals::emit_result result;
        result.reached = out.reached;
        result.duplicate = out.duplicate;
        co_return result;
    }

    // After a signal was stored in an instance's inbox: hand it to the instance if this
    // worker holds it, else wake it if it waits for the signal.
    asio::awaitable<void> delivered(std::string instance, inbox_entry e, delivery d) {
        auto it = hot.find(instance);
        if (it != hot.end() && it->second->lease) {
            e.id = d.id;
            it->second->inbox.push_back(std::move(e));
            ensure_driving(it->second);
        } else if (d.waiting) {
            co_await wake(instance);
        }
    }

    asio::awaitable<void> wake(std::string id) {
        if (stopped || waking.contains(id)) co_return;
        std::shared_ptr<hot_instance> in;
        if (auto it = hot.find(id); it != hot.end()) in = it->second;
        if (in && in->lease) {
            ensure_driving(in);  // ours already
            co_return;
        }
        waking.insert(id);
        struct unmark {
            impl* self;
            std::string id;
            ~unmark() { self->waking.erase(id); }
        } guard{this, id};

        auto grant = co_await st.acquire(id, opt.worker, clock.now(), opt.lease_ttl);
        if (!grant) {
            if (in && grant.error() != store_error::busy) drop(in);
            co_return;
        }
        if (stopped) co_return;
        if (auto it = hot.find(id); it != hot.end() && it->second != in) {
            // Started meanwhile by this worker.
            in = it->second;
        }
        bool reuse = in && !in->dropped && in->exec->rt.committed_length() == grant->journal_length;
        auto snap = co_await st.load(id, !reuse);
        if (!snap) co_return;
        if (grant->taken_over)
            metrics_of(snap->definition).lease_takeovers.fetch_add(1, std::memory_order_relaxed);
        if (reuse && !in->dropped) {
            in->lease = grant->lease;
            in->lease_expires = grant->expires;
            leased.insert(in->id);
            in->inbox = std::move(snap->inbox);
            in->stored = snap->status;
            in->stored_waits = std::move(snap->waits);
            ensure_driving(in);
            co_return;
        }
        if (in) drop(in);
        if (reuse) snap = co_await st.load(id, true);
        if (!snap) co_return;
        auto fresh = make_hot(std::move(*snap), grant->lease, grant->expires);
        ensure_driving(fresh);
    }

    void notify(const std::string& id,
                std::optional<expected<nlohmann::json, failure>> outcome = std::nullopt) {
        auto it = waiters.find(id);
        if (it == waiters.end()) return;
        for (auto* w : it->second) {
            w->outcome = outcome;
            w->timer.cancel();
        }
    }

    void poke() {
        poked = true;
        if (loop_wait) loop_wait->emit(asio::cancellation_type::terminal);
        if (loop_idle) loop_idle->cancel();
    }

    asio::awaitable<void> renew_leases() {
        auto now = clock.now();
        std::vector<std::shared_ptr<hot_instance>> due;
        for (const auto& id : leased) {
            auto& in = hot.at(id);
            if (in->lease && in->lease_expires - now < opt.lease_ttl / 2) due.push_back(in);
        }
        for (auto& in : due) {
            if (in->dropped || !in->lease) continue;
            bool ok = co_await st.renew(in->id, *in->lease, now, opt.lease_ttl);
            if (!ok) {
                log.warn("process {}: lease lost; dropping it from memory", in->id);
                drop(in);
            } else {
                in->lease_expires = now + opt.lease_ttl;
            }
        }
    }

    std::optional<time_point> next_renewal() const {
        std::optional<time_point> t;
        for (const auto& id : leased) {
            const auto& in = hot.at(id);
            auto at = in->lease_expires - opt.lease_ttl / 2;
            if (!t || at < *t) t = at;
        }
        return t;
    }

    // One round of the wake loop: renew leases, wake what is due. Returns when to look
    // again (nullopt: when poked), or `now` to go round at once.
    asio::awaitable<std::optional<time_point>> wake_round(int& spins) {
        poked = false;
        co_await renew_leases();
        auto ids = co_await st.due(clock.now(), 256);
        for (auto& id : ids) co_await wake(id);
        if (stopped) co_return std::nullopt;
        auto next = co_await st.next_due();
        auto now = clock.now();
        if (next && *next <= now && !ids.empty() && spins < 100) {
            ++spins;
            co_await asio::post(ex, asio::use_awaitable);  // let woken instances run
            co_return now;
        }
        if (poked && spins < 100) {
            ++spins;
            co_return now;
        }
        std::optional<time_point> deadline;
        if (next && *next > now) deadline = next;
        // Due work that waking did not resolve (owned elsewhere): look again a bit later.
        if (next && *next <= now) deadline = now + opt.lease_ttl / 10;
        spins = 0;
        if (auto r = next_renewal()) deadline = deadline ? std::min(*deadline, *r) : *r;
        if (auto poll = opt.poll_interval ? opt.poll_interval : st.poll_interval()) {
            auto p = now + *poll;
            deadline = deadline ? std::min(*deadline, p) : p;
        }
        co_return deadline;
    }

    // Sleeps until `deadline` (nullopt: until poked) or a poke.
    asio::awaitable<void> idle_until(std::optional<time_point> deadline) {
        error_code ec;
        if (deadline) {
            auto sig = std::make_shared<asio::cancellation_signal>();
            loop_wait = sig;
            co_await clock.async_wait_until(
                ex, *deadline,
                asio::bind_cancellation_slot(sig->slot(),
                                             asio::redirect_error(asio::use_awaitable, ec)));
            loop_wait.reset();
        } else {
            asio::steady_timer idle(ex, asio::steady_timer::time_point::max());
            loop_idle = &idle;
            co_await idle.async_wait(asio::redirect_error(asio::use_awaitable, ec));
            loop_idle = nullptr;
        }
    }

    // The engine's heartbeat. A store that cannot be reached (Redis down) is a state, not an
    // end: the loop logs the change once, retries with backoff, and logs the recovery.
    static asio::awaitable<void> wake_loop(std::shared_ptr<impl> self) {
        int spins = 0;
        duration backoff = std::chrono::milliseconds(50);
        std::optional<std::string> outage;
        while (!self->stopped) {
            std::optional<time_point> deadline;
            std::optional<std::string> failed;
            try {
                deadline = co_await self->wake_round(spins);
            } catch (const std::exception& e) {
                failed = e.what();
            }
            if (self->stopped) break;
            if (failed) {
                if (!outage) self->log.warn("process store unavailable: {}; retrying", *failed);
                outage = std::move(failed);
                deadline = self->clock.now() + backoff;
                backoff = std::min<duration>(backoff * 2, std::chrono::seconds(2));
                spins = 0;
            } else if (outage) {
                self->log.info("process store available again");
                outage.reset();
                backoff = std::chrono::milliseconds(50);
            }
            if (deadline && *deadline <= self->clock.now()) continue;
            co_await self->idle_until(deadline);
        }
        self->loop_running = false;
    }
};

engine::engine(asio::any_io_executor ex, store& s, keel::clock& clock, engine_options options)
    : impl_(std::make_shared<impl>(std::move(ex), s, clock, std::move(options))) {}

engine::~engine() {
    stop();
}

void engine::add_definition(std::string name, factory f) {
    impl_->metrics.of(name);  // every registered definition has its series from the start
    impl_->definitions[std::move(name)] = std::move(f);
}

asio::awaitable<std::string> engine::render_metrics() {
    auto self = impl_;
    std::optional<instance_counts> counts;
    try {
        counts = co_await self->st.counts();
    } catch (const std::exception& e) {
        self->log.debug("process metrics: no instance counts ({})", e.what());
    }
    co_return self->metrics.render(counts ? &*counts : nullptr);
}

asio::awaitable<void> engine::start_instance(std::string definition, std::string id,
                                             nlohmann::json params) {
    auto self = impl_;
    if (!self->on_executor(co_await asio::this_coro::executor)) {
        co_await asio::co_spawn(
            self->ex, start_instance(std::move(definition), std::move(id), std::move(params)),
            asio::use_awaitable);
        co_return;
    }
    if (!self->definitions.contains(definition))
        throw std::invalid_argument("process definition " + definition +
                                    " is not registered with this engine");
    auto now = self->clock.now();
    start_request req{id, definition, params, self->opt.worker, now, self->opt.lease_ttl, {}};
    if (auto plan = self->plans.find(definition); plan != self->plans.end()) {
        for (const auto& sub : plan->second) {
            std::vector<std::optional<std::string>> bound;
            for (const auto& b : sub.binding)
                bound.push_back(b ? std::optional(params.at(*b).get<std::string>()) : std::nullopt);
            req.subscriptions.push_back(signals::subscription_key(sub.pattern, bound));
        }
    }
    auto r = co_await self->st.start(std::move(req));
    if (!r.created) co_return;
    instance_snapshot snap;
    snap.id = id;
    snap.definition = std::move(definition);
    snap.params = std::move(params);
    snap.status = instance_status::running;
    auto in = self->make_hot(std::move(snap), r.lease, now + self->opt.lease_ttl);
    in->metrics->started.fetch_add(1, std::memory_order_relaxed);
    in->log.info("started");
    self->ensure_driving(in);
}

asio::awaitable<delivery> engine::signal(std::string instance, std::string path,
                                         nlohmann::json payload, std::string key) {
    auto self = impl_;
    if (!self->on_executor(co_await asio::this_coro::executor))
        co_return co_await asio::co_spawn(
            self->ex,
            signal(std::move(instance), std::move(path), std::move(payload), std::move(key)),
            asio::use_awaitable);
    auto scoped = signals::scoped_key(path, key);
    inbox_entry e{0, std::move(scoped), std::move(path), std::move(payload), self->clock.now()};
    auto d = co_await self->st.deliver(instance, e);
    if (d.result == delivery::outcome::stored) co_await self->delivered(instance, e, d);
    co_return d;
}

void engine::subscribe(const std::string& definition, const std::vector<std::string_view>& models,
                       const std::vector<signals::signal_group*>& groups) {
    std::vector<impl::subscription_plan> plan;
    for (auto* group : groups) {
        group->attach(*this);
        for (const auto* sig : group->signals()) {
            impl::subscription_plan sub{std::string(sig->pattern()), {}};
            bool any_bound = false;
            for (auto model : sig->models()) {
                std::optional<std::size_t> at;
                for (std::size_t j = 0; j < models.size(); ++j) {
                    if (models[j] != model) continue;
                    if (at)
                        throw std::invalid_argument(
                            "process " + definition + ": signal " + sub.pattern +
                            " binds by model type " + std::string(model) +
                            ", which more than one parameter of the process has");
                    at = j;
                }
                any_bound = any_bound || at.has_value();
                sub.binding.push_back(at);
            }
            // A signal with parameters of which the process binds none is not for it.
            if (any_bound || sub.binding.empty()) plan.push_back(std::move(sub));
        }
    }
    impl_->plans[definition] = std::move(plan);
}

asio::awaitable<signals::emit_result> engine::emit(signals::emit_request request) {
    auto self = impl_;
    if (!self->on_executor(co_await asio::this_coro::executor))
        co_return co_await asio::co_spawn(self->ex, emit(std::move(request)), asio::use_awaitable);
    co_return co_await self->emit_here(std::move(request));
}

asio::awaitable<std::optional<instance_info>> engine::describe(std::string id) {
    auto self = impl_;
    if (!self->on_executor(co_await asio::this_coro::executor))
        co_return co_await asio::co_spawn(self->ex, describe(std::move(id)), asio::use_awaitable);
    auto snap = co_await self->st.load(id, false);
    if (!snap) co_return std::nullopt;
    co_return instance_info{snap->id, snap->definition, snap->status, std::move(snap->result),
                            std::move(snap->error)};
}

asio::awaitable<instance_status> engine::status(std::string id) {
    auto self = impl_;
    if (!self->on_executor(co_await asio::this_coro::executor))
        co_return co_await asio::co_spawn(self->ex, status(std::move(id)), asio::use_awaitable);
    auto snap = co_await self->st.load(id, false);
    if (!snap) throw std::invalid_argument("no process instance " + id);
    co_return snap->status;
}

asio::awaitable<expected<nlohmann::json, failure>> engine::wait(std::string id) {
    auto self = impl_;
    if (!self->on_executor(co_await asio::this_coro::executor))
        co_return co_await asio::co_spawn(self->ex, wait(std::move(id)), asio::use_awaitable);
    // An instance this engine holds the lease of is not final: the first look at the store
    // is skipped, and its settling here hands the outcome over.
    auto held = self->hot.find(id);
    bool ask = held == self->hot.end() || !held->second->lease || held->second->dropped;
    for (;; ask = true) {
        if (ask) {
            auto snap = co_await self->st.load(id, false);
            if (!snap)
                co_return unexpected(failure{instance_status::failed, "no process instance " + id});
            if (auto done = outcome_of(snap->status, snap->result, snap->error))
                co_return std::move(*done);
        }
        impl::final_waiter w{asio::steady_timer(self->ex, asio::steady_timer::time_point::max()),
                             std::nullopt};
        self->waiters[id].push_back(&w);
        error_code ec;
        co_await w.timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        auto& after = self->waiters[id];
        std::erase(after, &w);
        if (after.empty()) self->waiters.erase(id);
        if (w.outcome) co_return std::move(*w.outcome);
        if (self->stopped)
            co_return unexpected(failure{instance_status::running, "engine stopped"});
    }
}

namespace {

refusal refuse(refusal::reason why, const std::string& id, std::string_view what) {
    return refusal{why, "process instance " + id + " " + std::string(what)};
}

// Why the store would not give this worker the lease of an instance.
refusal lease_refusal(store_error e, const std::string& id) {
    switch (e) {
        case store_error::not_found:
            return refuse(refusal::reason::not_found, id, "does not exist");
        case store_error::finished:
            return refuse(refusal::reason::final, id, "is final");
        case store_error::busy:
            return refuse(refusal::reason::owned, id, "is running on another worker");
        default:
            return refuse(refusal::reason::conflict, id,
                          "changed meanwhile (" + std::string(to_string(e)) + "); try again");
    }
}

}  // namespace

asio::awaitable<action_result> engine::cancel(std::string id) {
    auto self = impl_;
    if (!self->on_executor(co_await asio::this_coro::executor))
        co_return co_await asio::co_spawn(self->ex, cancel(std::move(id)), asio::use_awaitable);
    if (auto it = self->hot.find(id); it != self->hot.end() && it->second->lease) {
        auto in = it->second;
        in->cancel_requested = true;
        if (!in->driving) self->ensure_driving(in);
        co_return action_result();
    }
    auto grant =
        co_await self->st.acquire(id, self->opt.worker, self->clock.now(), self->opt.lease_ttl);
    if (!grant) co_return unexpected(lease_refusal(grant.error(), id));
    if (auto it = self->hot.find(id); it != self->hot.end()) self->drop(it->second);
    commit_request req;
    req.instance = id;
    req.lease = grant->lease;
    req.expected_length = grant->journal_length;
    req.status = instance_status::cancelled;
    req.release = true;
    self->stamp(req);
    auto r = co_await self->st.commit(std::move(req));
    self->notify(id, r ? outcome_of(instance_status::cancelled, {}, {}) : std::nullopt);
    if (!r) co_return unexpected(lease_refusal(r.error(), id));
    if (auto snap = co_await self->st.load(id, false))
        self->metrics_of(snap->definition).cancelled.fetch_add(1, std::memory_order_relaxed);
    self->log.info("process {}: cancelled by an operator", id);
    co_return action_result();
}

asio::awaitable<action_result> engine::resume(std::string id) {
    auto self = impl_;
    if (!self->on_executor(co_await asio::this_coro::executor))
        co_return co_await asio::co_spawn(self->ex, resume(std::move(id)), asio::use_awaitable);
    auto snap = co_await self->st.load(id, false);
    if (!snap) co_return unexpected(refuse(refusal::reason::not_found, id, "does not exist"));
    if (snap->status != instance_status::failed || !snap->parked)
        co_return unexpected(
            refuse(refusal::reason::wrong_state, id,
                   "is " + std::string(to_string(index_status_of(snap->status, snap->parked))) +
                       ", not parked"));
    auto grant =
        co_await self->st.acquire(id, self->opt.worker, self->clock.now(), self->opt.lease_ttl);
    if (!grant) co_return unexpected(lease_refusal(grant.error(), id));
    if (auto it = self->hot.find(id); it != self->hot.end()) self->drop(it->second);
    auto full = co_await self->st.load(id, true);
    if (!full) co_return unexpected(refuse(refusal::reason::not_found, id, "does not exist"));
    auto in = self->make_hot(std::move(*full), grant->lease, grant->expires);
    in->stored = instance_status::failed;
    in->log.info("resumed by an operator");
    self->ensure_driving(in);
    co_return action_result();
}

asio::awaitable<action_result> engine::retry(std::string id, std::uint64_t from) {
    auto self = impl_;
    if (!self->on_executor(co_await asio::this_coro::executor))
        co_return co_await asio::co_spawn(self->ex, retry(std::move(id), from),
                                          asio::use_awaitable);
    auto snap = co_await self->st.load(id, true);
    if (!snap) co_return unexpected(refuse(refusal::reason::not_found, id, "does not exist"));
    rewind_request req;
    req.instance = id;
    req.expected_length = snap->journal.size();
    req.keep = from;
    req.now = self->clock.now();
    // Signals the dropped entries consumed go back into the inbox, for the handler to take
    // again when it gets there.
    for (auto i = from; i < snap->journal.size(); ++i) {
        const auto& e = snap->journal[i];
        if (e.kind != op_kind::signal || !e.value.is_object()) continue;
        inbox_entry back;
        back.id = e.value.value("id", std::uint64_t{0});
        back.path = e.name;
        back.payload = e.value.value("payload", nlohmann::json());
        back.at = e.at == time_point{} ? req.now : e.at;
        if (back.id != 0) req.restore.push_back(std::move(back));
    }
    auto r = co_await self->st.rewind(std::move(req));
    if (!r) {
        switch (r.error()) {
            case store_error::wrong_state:
                co_return unexpected(refuse(
                    refusal::reason::wrong_state, id,
                    "is " + std::string(to_string(index_status_of(snap->status, snap->parked))) +
                        "; only a final or parked instance can be retried"));
            case store_error::out_of_range:
                co_return unexpected(refuse(refusal::reason::out_of_range, id,
                                            "has " + std::to_string(snap->journal.size()) +
                                                " journal entries; cannot retry from " +
                                                std::to_string(from)));
            default:
                co_return unexpected(lease_refusal(r.error(), id));
        }
    }
    if (auto it = self->hot.find(id); it != self->hot.end()) self->drop(it->second);
    self->log.info("process {}: retried by an operator from journal entry {}", id, from);
    self->schedule_wake(id, duration::zero());
    co_return action_result();
}

void engine::run() {
    if (impl_->loop_running) return;
    impl_->loop_running = true;
    impl_->stopped = false;
    asio::co_spawn(impl_->ex, impl::wake_loop(impl_), [self = impl_](std::exception_ptr e) {
        self->loop_running = false;
        if (!e) return;
        try {
            std::rethrow_exception(e);
        } catch (const std::exception& x) {
            self->log.error("process engine wake loop: {}", x.what());
        }
    });
}

void engine::stop() {
    auto& self = *impl_;
    if (self.stopped) return;
    self.stopped = true;
    self.poke();
    std::vector<std::shared_ptr<hot_instance>> all;
    for (auto& [_, in] : self.hot) all.push_back(in);
    for (auto& in : all) self.drop(in);
    for (auto& [_, list] : self.waiters)
        for (auto* w : list) w->timer.cancel();
}

void engine::poke() {
    impl_->poke();
}

asio::awaitable<std::vector<step_progress>> engine::steps_in_flight(std::string id) {
    auto self = impl_;
    if (!self->on_executor(co_await asio::this_coro::executor))
        co_return co_await asio::co_spawn(self->ex, steps_in_flight(std::move(id)),
                                          asio::use_awaitable);
    std::vector<step_progress> out;
    if (auto it = self->hot.find(id); it != self->hot.end())
        for (const auto& [_, p] : it->second->steps) out.push_back(p);
    co_return out;
}

std::size_t engine::hot_count() const noexcept {
    return impl_->hot.size();
}

const std::string& engine::worker() const noexcept {
    return impl_->opt.worker;
}

keel::clock& engine::clock() noexcept {
    return impl_->clock;
}

}  // namespace keel::process
