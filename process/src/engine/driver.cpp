#include "impl.hpp"

namespace keel::process {

using namespace engine_parts;

void engine::impl::ensure_driving(const std::shared_ptr<hot_instance>& in) {
    if (in->state != phase::held || stopped) return;
    move_to(*in, phase::driving);
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
                       if (in->state == phase::driving) self->move_to(*in, phase::held);
                       if (in->dropped() || self->stopped) return;
                       self->drop(in);
                       self->schedule_wake(in->id, self->opt.lease_ttl / 10);
                   });
}

std::optional<event> engine::impl::find_event(hot_instance& in) {
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

bool engine::impl::deliver_event(hot_instance& in) {
    auto ev = find_event(in);
    if (!ev) return false;
    auto& rt = in.exec->rt;
    bool resumed = std::exchange(in.resumed, false) || in.stored == instance_status::suspended;
    switch (ev->kind) {
        case event::type::run: {
            journal_entry e = std::move(in.run_results.front());
            in.run_results.erase(in.run_results.begin());
            auto seq = e.seq;
            if (!rt.complete_live(std::move(e), std::nullopt)) in.commits.step_discarded(seq);
            break;
        }
        case event::type::signal: {
            inbox_entry msg = std::move(in.inbox[ev->inbox_index]);
            in.inbox.erase(in.inbox.begin() + static_cast<std::ptrdiff_t>(ev->inbox_index));
            in.metrics->signal_resume_seconds.observe(clock.now() - msg.at);
            if (opt.spans) trace_resumption(in, "signal " + msg.path, msg.trace, msg.at);
            in.log.info("{} signal {}", resumed ? "resumed by" : "received", msg.path);
            journal_entry e{ev->seq, op_kind::signal, msg.path,
                            nlohmann::json{{"id", msg.id}, {"payload", std::move(msg.payload)}},
                            false};
            rt.complete_live(std::move(e), msg.id);
            break;
        }
        case event::type::timer: {
            auto& op = rt.pending().at(ev->seq);
            in.metrics->timer_lateness_seconds.observe(clock.now() - op.due);
            if (opt.spans) trace_resumption(in, "timer " + op.name, {}, op.due);
            in.log.info("{} timer \"{}\"", resumed ? "resumed by" : "fired", op.name);
            journal_entry e{ev->seq, op_kind::timer, op.name,
                            nlohmann::json(op.due.time_since_epoch().count()), false};
            rt.complete_live(std::move(e), std::nullopt);
            break;
        }
    }
    return true;
}

bool engine::impl::has_unstarted_runs(detail::runtime& rt) {
    for (const auto& [_, op] : rt.pending())
        if (executes(op.kind) && !op.started) return true;
    return false;
}

asio::awaitable<void> engine::impl::relock(std::shared_ptr<impl> self,
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
        if (in->dropped() || self->stopped || rt.detached) co_return;
        journal_entry e{seq, op_kind::relock, slot->name(), std::move(got.value), got.failed};
        if (e.failed)
            self->log.warn("process {}: lock {} not taken again: {}", in->id, slot->name(),
                           e.value["message"].dump());
        rt.relocked(std::move(e));
        if (rt.parked()) co_return;
    }
    rt.relock_done();
}

asio::awaitable<void> engine::impl::drive(std::shared_ptr<impl> self,
                                          std::shared_ptr<hot_instance> in) {
    auto exec = in->exec;
    auto& rt = exec->rt;
    self->touch(*in);
    for (;;) {
        if (in->dropped() || self->stopped) break;
        if (in->pending == owed::cancel) {
            co_await self->settle(in, settle_kind::cancelled);
            break;
        }
        rt.run_ready();
        if (rt.parked()) {
            bool handed_over = co_await self->hand_over(in);
            if (!handed_over && !in->dropped() && !self->stopped)
                co_await self->settle(in, settle_kind::parked);
            break;
        }
        if (rt.finished() && rt.restart()) {
            co_await self->start_over(in);
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
        if (in->commits.may_wait(rt, status, waits, in->stored, in->stored_waits,
                                 self->conflicts.any(in->id))) {
            // What it consumed is written with its next step (commit_plan.hpp).
        } else if (!rt.buffered().empty() || status != in->stored || waits != in->stored_waits) {
            auto first_timer = first_due(rt.buffered().add_timers);
            // Taken to run, it waits again for what it waited for: as a release, below.
            bool released_as_it_was = release && rt.buffered().empty() && waits == in->stored_waits;
            if (!co_await self->commit(in, status, std::move(waits), release)) break;
            if (released_as_it_was)
                self->poke();  // a signal may have arrived meanwhile: the store knows
            else
                self->poke_for_timers(first_timer);  // the next due time may be earlier now
        } else if (release) {
            co_await self->st.release(in->id, in->lease);
            self->poke();  // a signal may have arrived meanwhile: the store knows
        }
        if (in->dropped()) break;
        if (release) {
            self->move_to(*in, phase::released);
            // Woken again, now that it is released (a wake-up while the lease was held would
            // find it driven), when a signal it waits for arrived meanwhile (handed to it here
            // during the commit, or seen in the store by the commit), or when an operator
            // cancelled it during the commit: its next take settles it.
            bool again = in->pending != owed::nothing || self->find_event(*in);
            if (in->pending == owed::wake_once_released) in->pending = owed::nothing;
            self->evict();
            if (again) self->schedule_wake(in->id, duration::zero());
            co_return;  // other due work (a signal that arrives later) comes back via wake()
        }
        if (new_runs) {
            self->start_runs(in);
            continue;
        }
        if (!in->run_results.empty() || in->pending == owed::cancel || self->find_event(*in))
            continue;
        break;
    }
    if (in->state == phase::driving) self->move_to(*in, phase::held);
}

namespace {

// A commit of `in` under its lease, fenced on its journal as committed.
commit_request commit_of(const hot_instance& in) {
    commit_request req;
    req.instance = in.id;
    req.lease = in.lease;
    req.expected_length = in.exec->rt.committed_length();
    return req;
}

}  // namespace

asio::awaitable<bool> engine::impl::commit(std::shared_ptr<hot_instance> in, instance_status status,
                                           std::vector<signal_wait> waits, bool release) {
    auto& rt = in->exec->rt;
    auto& b = rt.buffered();
    auto req = commit_of(*in);
    req.entries = b.entries;
    req.consume = b.consume;
    req.add_timers = b.add_timers;
    req.cancel_timers = b.cancel_timers;
    req.published = b.published;
    // Unchanged state is left out, so that a commit of entries alone is an append
    // (the store's cheapest write). A releasing commit states it in full.
    if (release || waits != in->stored_waits) req.waits = waits;
    if (release || status != in->stored) req.status = status;
    req.release = release;
    auto ack = co_await write(in, std::move(req));
    if (!ack) co_return false;
    // A signal another worker delivered while this one held the instance.
    if (release && ack->signal_waiting) in->owe(owed::wake_once_released);
    rt.mark_committed();
    in->commits.committed();
    in->stored = status;
    in->stored_waits = std::move(waits);
    co_return true;
}

asio::awaitable<std::optional<commit_result>> engine::impl::write(std::shared_ptr<hot_instance> in,
                                                                  commit_request req) {
    expected<commit_result, store_error> r;
    bool lost = false;
    std::string what;
    stamp(req);
    bool chained = true;
    auto documents = in->commits.carry(req, chained);
    if (!chained) {
        r = unexpected(store_error::document_changed);  // as the store would answer it
    } else {
        try {
            r = co_await st.commit(std::move(req));
        } catch (const std::exception& e) {
            lost = true;
            what = e.what();
        }
    }
    documents_written(documents, !lost && r.has_value());
    if (lost) {
        // The outcome is unknown: forget the instance and load it again.
        log.warn("process {}: commit outcome unknown ({}); reloading", in->id, what);
        auto id = in->id;
        drop(in);
        schedule_wake(id, opt.lease_ttl / 10);
        co_return std::nullopt;
    }
    if (!r && r.error() == store_error::document_changed) {
        // An entity a step changed was written or locked by someone else meanwhile: the
        // step runs again, from the journal as committed, on the entity as it is now.
        auto id = in->id;
        int in_a_row = conflicts.note(id);
        auto delay = std::min<duration>(std::chrono::milliseconds(2 << std::min(in_a_row, 9)),
                                        std::chrono::seconds(1));
        log.info(
            "process {}: an entity changed under a step ({} in a row); running it again in "
            "{} ms",
            id, in_a_row, std::chrono::duration_cast<std::chrono::milliseconds>(delay).count());
        drop(in);
        schedule_wake(id, delay);
        co_return std::nullopt;
    }
    if (!r) {
        log.warn("process {}: commit rejected ({}); dropping it from memory", in->id,
                 to_string(r.error()));
        drop(in);
        co_return std::nullopt;
    }
    conflicts.clear(in->id);
    co_return *r;
}

asio::awaitable<void> engine::impl::settle(std::shared_ptr<hot_instance> in, settle_kind kind) {
    auto exec = in->exec;
    auto& rt = exec->rt;
    auto req = commit_of(*in);
    req.release = true;
    switch (kind) {
        case settle_kind::finished: {
            auto& b = rt.buffered();
            req.entries = b.entries;
            req.consume = b.consume;
            req.published = b.published;
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
    std::vector<detail::runtime::child_record> children;
    if (kind != settle_kind::parked) {
        if (!co_await tell_parent_before_end(in, status, req.result, req.error)) co_return;
        if (in->dropped()) co_return;  // dropped meanwhile (its worker stopped, or lost it)
        children = co_await children_of(in);
        if (in->dropped()) co_return;
    }
    auto ack = co_await write(in, std::move(req));
    if (ack && !children.empty()) close_children(id, std::move(children));
    if (ack && kind == settle_kind::finished && status == instance_status::failed)
        in->log.info("failed: {}", error.value_or("failed"));
    else if (ack && kind != settle_kind::parked)
        in->log.info("{}", to_string(status));
    if (ack) count_finished(*in->metrics, kind, status);
    if (ack && !in->queue.empty()) leave_queue_later(in->queue, id);
    if (ack) drop(in);
    notify(id, ack ? std::move(outcome) : std::nullopt);
}

namespace {

// An operator's cancel that reached the instance while it continued as new (owed to a run
// that no longer exists), carried out on the new run.
asio::awaitable<void> cancel_started_over(std::shared_ptr<engine::impl> self, std::string id) {
    auto r = co_await self->cancel_anywhere(id);
    if (!r)
        self->log.warn("process {}: not cancelled after it continued as new: {}", id,
                       r.error().message);
}

}  // namespace

asio::awaitable<void> engine::impl::start_over(std::shared_ptr<hot_instance> in) {
    auto& b = in->exec->rt.buffered();
    auto req = commit_of(*in);
    req.consume = b.consume;  // the signals the last run took stay taken
    req.published = b.published;
    req.status = instance_status::running;
    req.waits = std::vector<signal_wait>{};
    req.release = true;
    req.restart_params = *in->exec->rt.restart();
    auto id = in->id;
    auto length = req.expected_length + b.entries.size();
    if (!co_await write(in, std::move(req))) co_return;
    metrics_of(in->definition).continued.fetch_add(1, std::memory_order_relaxed);
    in->log.info("continued as new after {} journal entries", length);
    bool cancel_owed = in->pending == owed::cancel;
    drop(in);
    // Loaded again, it runs from the top. Posted: the take that adopted it may still be on
    // the stack (a store that answers at once), and a wake meanwhile would leave it to that.
    asio::post(ex, [self = shared_from_this(), id, cancel_owed] {
        if (cancel_owed)
            asio::co_spawn(self->ex, cancel_started_over(self, id), asio::detached);
        else
            self->schedule_wake(id, duration::zero());
    });
}

void engine::impl::count_finished(definition_metrics& m, settle_kind kind, instance_status status) {
    auto& counter = kind == settle_kind::parked            ? m.parked
                    : status == instance_status::cancelled ? m.cancelled
                    : status == instance_status::failed    ? m.failed
                                                           : m.completed;
    counter.fetch_add(1, std::memory_order_relaxed);
}

void engine::impl::start_runs(const std::shared_ptr<hot_instance>& in) {
    auto& rt = in->exec->rt;
    for (auto& [seq, op] : rt.pending()) {
        if (!executes(op.kind) || op.started) continue;
        op.started = true;
        in->commits.step_started(seq, op.body && op.body->changes_entities_only());
        op.cancel = std::make_shared<asio::cancellation_signal>();
        rt.run_started();
        auto sig = op.cancel;
        asio::co_spawn(
            ex,
            execute_run(shared_from_this(), in->exec, in->id, in->log, in->metrics, seq, op.kind,
                        op.name, op.body, op.policy, sig, in->trace, in->definition),
            // The handler keeps the signal alive until Asio clears the slot.
            asio::bind_cancellation_slot(sig->slot(), [sig](std::exception_ptr) {}));
    }
}

asio::awaitable<void> engine::impl::execute_run(
    std::shared_ptr<impl> self, std::shared_ptr<execution> exec, std::string id, log::logger log,
    definition_metrics* metrics, std::uint64_t seq, op_kind kind, std::string name,
    std::shared_ptr<detail::run_body> body, retry_policy policy,
    std::shared_ptr<asio::cancellation_signal> sig, trace::span_context parent,
    std::string definition) {
    struct in_flight {
        execution* e;
        void finish() { std::exchange(e, nullptr)->rt.run_finished(); }
        ~in_flight() {
            if (e) e->rt.run_finished();
        }
    } guard{exec.get()};
    (void)sig;
    // What the attempt leaves to the step's commit (context::update): nothing once the
    // instance's commits met a changed or locked document a few times in a row; the step
    // then writes by repository<T>::update, which waits for a lock (up to lock_wait) where
    // a commit can only fail again.
    struct leave_to_commit final : detail::step_writes {
        leave_to_commit(const impl& e, const std::string& id) : engine(e), instance(id) {}
        bool accepts(const document_address& where) const override {
            if (engine.conflicts.steps_write_themselves(instance)) return false;
            return engine.st.writes_documents(where);
        }
        void add(detail::staged_document d) override { staged.push_back(std::move(d)); }
        const trace::span_context* attempt_span() const noexcept override {
            return span.valid() ? &span : nullptr;
        }
        const impl& engine;
        const std::string& instance;
        std::vector<detail::staged_document> staged;
        trace::span_context span;  // the attempt's, when it is recorded
    } writes(*self, id);
    journal_entry entry{seq, kind, name, nullptr, false};
    entry.started = self->clock.now();
    auto began = std::chrono::steady_clock::now();
    for (int attempt = 1;; ++attempt) {
        entry.attempts = static_cast<std::uint32_t>(attempt);
        metrics->step_attempts.fetch_add(1, std::memory_order_relaxed);
        self->note_attempt(exec, id, seq, name, attempt, std::nullopt);
        std::string error;
        bool terminal = false;
        bool ok = false;
        duration at_least{};  // retry_later: the next attempt no sooner
        writes.staged.clear();
        writes.span = self->attempt_context(parent);
        // The attempt's lines carry its span (the instance's trace_id is in `log` already);
        // made only for a line that is written.
        auto attempt_log = [&] {
            return writes.span.valid() ? log.with("span_id", writes.span.span.hex()) : log;
        };
        if (log::enabled(log::level::debug))
            attempt_log().debug("{} \"{}\": attempt {}", to_string(kind), name, attempt);
        auto attempt_began = self->clock.now();
        try {
            entry.value = co_await body->attempt(writes);
            if (nesting_depth(entry.value) > max_value_depth)
                throw terminal_error("the result nests deeper than " +
                                     std::to_string(max_value_depth) + " levels");
            ok = true;
        } catch (const terminal_error& e) {
            error = e.what();
            terminal = true;
        } catch (const retry_later& e) {
            error = e.what();
            terminal = policy.terminal && policy.terminal(e);
            at_least = e.after();
        } catch (const std::exception& e) {
            error = e.what();
            terminal = policy.terminal && policy.terminal(e);
        } catch (...) {
            error = "unknown exception";
        }
        if (writes.span.valid())
            self->trace_attempt(writes.span, id, definition,
                                std::string(kind == op_kind::lock ? "lock " : "step ") + name,
                                attempt, attempt_began, ok ? nullptr : &error);
        if (ok) break;
        auto cs = co_await asio::this_coro::cancellation_state;
        if (cs.cancelled() != asio::cancellation_type::none || exec->rt.detached) co_return;
        if (terminal || attempt >= policy.max_attempts) {
            attempt_log().warn("{} \"{}\" failed for good at attempt {}: {}", to_string(kind), name,
                               attempt, error);
            entry.failed = true;
            entry.value = nlohmann::json{{"message", error}};
            writes.staged.clear();
            break;
        }
        metrics->step_retries.fetch_add(1, std::memory_order_relaxed);
        self->note_attempt(exec, id, seq, name, attempt, error);
        auto wait = policy.backoff(attempt);
        std::uniform_real_distribution<double> spread(-policy.jitter, policy.jitter);
        wait = std::chrono::duration_cast<duration>(wait * (1.0 + spread(self->rng)));
        wait = std::max(wait, at_least);
        attempt_log().warn("{} \"{}\" attempt {} failed: {}; retrying in {} ms", to_string(kind),
                           name, attempt, error,
                           std::chrono::duration_cast<std::chrono::milliseconds>(wait).count());
        error_code ec;
        co_await self->clock.async_wait_until(self->ex, self->clock.now() + wait,
                                              asio::redirect_error(asio::use_awaitable, ec));
        if (ec) co_return;
    }
    metrics->step_seconds.observe(std::chrono::steady_clock::now() - began);
    guard.finish();  // before the instance looks at what is still in flight
    self->run_done(exec, id, std::move(entry), std::move(writes.staged));
}

void engine::impl::note_attempt(const std::shared_ptr<execution>& exec, const std::string& id,
                                std::uint64_t seq, const std::string& name, int attempt,
                                std::optional<std::string> error) {
    auto it = hot.find(id);
    if (it == hot.end() || it->second->exec != exec) return;
    auto& p = it->second->steps[seq];
    p.seq = seq;
    p.name = name;
    p.attempt = attempt;
    if (!error) return;
    p.last_error = *error;
    if (it->second->leased())  // so that any process can show it (store::note_attempt)
        asio::co_spawn(ex,
                       record_attempt(shared_from_this(), id, it->second->lease,
                                      step_attempt{seq, name, attempt, std::move(*error),
                                                   opt.worker, clock.now()}),
                       asio::detached);
}

void engine::impl::note_waiting(const std::string& instance, std::uint64_t seq, std::string limit) {
    auto it = hot.find(instance);
    if (it == hot.end()) return;
    auto step = it->second->steps.find(seq);
    if (step != it->second->steps.end()) step->second.waiting_for = std::move(limit);
}

asio::awaitable<void> engine::impl::record_attempt(std::shared_ptr<impl> self, std::string id,
                                                   lease_token lease, step_attempt failed) {
    try {
        co_await self->st.note_attempt(std::move(id), std::move(lease), std::move(failed));
    } catch (const std::exception& e) {  // only inspection misses it; the retry goes on
        self->log.debug("could not record a failed attempt: {}", e.what());
    }
}

void engine::impl::run_done(const std::shared_ptr<execution>& exec, const std::string& id,
                            journal_entry entry, std::vector<detail::staged_document> staged) {
    if (exec->rt.detached) return;
    auto it = hot.find(id);
    if (it == hot.end() || it->second->exec != exec) return;
    it->second->steps.erase(entry.seq);
    // The entity steps after this one read what it wrote before its commit is made (they
    // may be committed together); a drop or a refused commit takes it back. A wrong guess
    // costs a refused write, never a lost one.
    for (const auto& d : staged) d.docs->written_elsewhere(d.model, d.id, d.write.text);
    it->second->commits.step_finished(entry.seq, std::move(staged));
    it->second->run_results.push_back(std::move(entry));
    ensure_driving(it->second);
}

}  // namespace keel::process
