#include <keel/framework/prometheus.hpp>

#include "impl.hpp"

namespace keel::process {

using namespace engine_parts;

engine::engine(asio::any_io_executor ex, store& s, keel::clock& clock, engine_options options)
    : engine(std::span<const asio::any_io_executor>(&ex, 1), s, clock, std::move(options)) {}

engine::engine(std::span<const asio::any_io_executor> executors, store& s, keel::clock& clock,
               engine_options options) {
    if (executors.empty()) throw std::invalid_argument("process engine: no executor");
    auto metrics = std::make_shared<engine_metrics>();
    auto watch = std::make_shared<store_watch>();
    for (std::size_t i = 0; i < executors.size(); ++i) {
        parts_.push_back(
            std::make_shared<impl>(executors[i], s, clock, options, metrics, watch, i));
        options.worker = parts_.front()->opt.worker;  // one worker, whatever its parts
    }
    if (parts_.size() > 1)
        for (auto& part : parts_) part->parts.assign(parts_.begin(), parts_.end());
    add_schedules();
}

bool engine::runs(const std::string& definition) const {
    return parts_.front()->definitions.contains(definition);
}

engine::~engine() {
    stop();
}

std::shared_ptr<engine::impl> engine::owner_of(const std::string& id) const {
    return parts_.front()->owner_of(id);
}

std::shared_ptr<engine::impl> engine::part_for(const asio::any_io_executor& caller) const {
    if (parts_.size() == 1) return parts_.front();
    for (const auto& part : parts_)
        if (part->on_executor(caller) || part->runs_this_thread()) return part;
    return parts_.front();
}

void engine::add_definition(std::string name, factory f, std::string version) {
    parts_.front()->metrics.of(name);  // every registered definition has its series from the start
    for (auto& part : parts_) {
        part->versions[name] = version;
        part->definitions[name] = f;
    }
}

namespace {

// The schedules' own counts (what each published: docs/guide/schedules.md), from the store:
// the same on every worker, like keel_process_instances. Deleted schedules are left out.
asio::awaitable<std::string> schedule_series(engine::impl& part) {
    list_query q;
    q.definition = std::string(schedule_definition);
    q.limit = 1000;
    std::string ticks, paused;
    for (;;) {
        auto page = co_await part.index.list(q);
        for (const auto& summary : page.instances) {
            auto snap = co_await part.st.load(summary.id, false);
            if (!snap || is_final(snap->status)) continue;
            auto it = snap->published.find("schedule");
            if (it == snap->published.end() || !snap->params.is_array() || snap->params.empty())
                continue;
            auto name = prometheus::escape(snap->params[0].get<std::string>());
            const auto& state = it->second;
            for (const char* outcome : {"started", "skipped", "missed", "cancelled"})
                ticks +=
                    fmt::format("keel_schedule_ticks_total{{schedule=\"{}\",outcome=\"{}\"}} {}\n",
                                name, outcome, state.value(outcome, std::uint64_t{0}));
            paused += fmt::format("keel_schedule_paused{{schedule=\"{}\"}} {}\n", name,
                                  state.value("paused", false) ? 1 : 0);
        }
        if (page.next.empty()) break;
        q.cursor = page.next;
    }
    std::string out;
    prometheus::header(out, "keel_schedule_ticks_total", "counter",
                       "Ticks of each schedule by outcome, as the schedule counts them (all "
                       "workers).");
    out += ticks;
    prometheus::header(out, "keel_schedule_paused", "gauge", "1 while a schedule is paused.");
    out += paused;
    co_return out;
}

// Each registered queue's line and admitted instances, from the store (all workers).
asio::awaitable<std::string> queue_series(engine::impl& part) {
    if (part.queues.empty()) co_return std::string();
    std::string waiting, admitted;
    for (const auto& [name, q] : part.queues) {
        auto state = co_await part.st.describe_queue(name, 0);
        auto label = prometheus::escape(name);
        waiting += fmt::format("keel_queue_waiting{{queue=\"{}\"}} {}\n", label, state.waiting);
        admitted += fmt::format("keel_queue_admitted{{queue=\"{}\"}} {}\n", label, state.admitted);
    }
    std::string out;
    prometheus::header(out, "keel_queue_waiting", "gauge",
                       "Instances queued and not yet admitted, per queue (all workers).");
    out += waiting;
    prometheus::header(out, "keel_queue_admitted", "gauge",
                       "Instances admitted and not yet ended, per queue (all workers).");
    out += admitted;
    co_return out;
}

}  // namespace

asio::awaitable<std::string> engine::render_metrics() {
    auto self = part_for(co_await asio::this_coro::executor);
    std::optional<instance_counts> counts;
    std::string schedules;
    try {
        counts = co_await self->index.counts();
        schedules = co_await schedule_series(*self);
        schedules += co_await queue_series(*self);
    } catch (const std::exception& e) {
        self->log.debug("process metrics: the store did not answer ({})", e.what());
    }
    co_return self->metrics.render(counts ? &*counts : nullptr) + schedules;
}

namespace {

// `parent`: the instance starting it as a child (empty: none).
// `queue`: started on this queue (enqueue), waiting for its admission.
// `caller`: the span the start is made in (start_options::trace).
asio::awaitable<start_result> start_here(std::shared_ptr<engine::impl> self, std::string definition,
                                         std::string id, nlohmann::json params,
                                         std::vector<document_write> documents, std::string parent,
                                         queued_start queue,
                                         std::optional<trace::span_context> caller) {
    if (!self->definitions.contains(definition))
        throw std::invalid_argument("process definition " + definition +
                                    " is not registered with this engine");
    self->refuse_while_in_question();
    auto now = self->clock.now();
    start_request req{id, definition, params, self->opt.worker, now, self->opt.lease_ttl, {}};
    req.version = self->versions[definition];
    req.parent = parent;
    req.documents = std::move(documents);
    req.compact_subscriptions = self->all_read(store_level_compact_subscriptions);
    if (auto plan = self->plans.find(definition); plan != self->plans.end()) {
        for (const auto& sub : plan->second) {
            std::vector<std::optional<std::string>> bound;
            for (const auto& b : sub.binding)
                bound.push_back(b ? std::optional(params.at(*b).get<std::string>()) : std::nullopt);
            req.subscriptions.push_back(signals::subscription_key(sub.pattern, bound));
        }
    }
    instance_snapshot snap;
    snap.id = id;
    snap.definition = std::move(definition);
    snap.params = std::move(params);
    snap.status = instance_status::running;
    snap.version = req.version;
    snap.parent = std::move(parent);
    // Listed as queued until admitted, once no live worker would leave it so when it runs.
    const bool listed_queued =
        !queue.queue.empty() && !queue.admitted && !self->worker_below(store_level_queued_status);
    auto in = self->make_instance(std::move(snap), lease_token{self->opt.worker, 1},
                                  req.lease_ttl + now, std::move(queue));
    trace::span_context started_in;  // the start's span: the instance's trace from here
    if (self->opt.spans) {
        started_in = caller ? trace::child_of(*caller) : trace::new_root();
        if (started_in.sampled) req.trace = started_in.traceparent();
        in->enter(started_in);
    }
    auto& rt = in->exec->rt;
    rt.run_ready();
    // Waiting before any step: the start writes the suspension too (no commit follows).
    bool waits_first = !rt.finished() && !rt.parked() && rt.runs_in_flight() == 0 &&
                       !engine::impl::has_unstarted_runs(rt) && !self->find_event(*in) &&
                       rt.buffered().published.empty();
    std::vector<signal_wait> waits;
    if (waits_first) {
        rt.arm_new_timers();
        waits = rt.wait_set();
        auto& b = rt.buffered();
        req.suspended = start_request::first_wait{b.entries, b.add_timers, waits, listed_queued};
        for (auto& e : req.suspended->entries) e.at = now;
    } else {
        req.entries = rt.buffered().entries;  // what the handler recorded before its first step
        for (auto& e : req.entries) e.at = now;
    }
    const auto written_with_start = req.entries.size();
    auto r = co_await self->st.start(std::move(req));
    if (!r.created || self->stopped) {
        rt.detached = true;
        co_return r;
    }
    in->metrics->started.fetch_add(1, std::memory_order_relaxed);
    in->log.info("started");
    if (self->opt.spans) self->trace_start(*in, started_in, now);
    if (!waits_first) {
        // The handler may have gone on meanwhile (its first step ended): only these are in.
        rt.mark_entries_committed(written_with_start);
        in->lease = r.lease;
        self->keep_hot(in, phase::held);
        self->ensure_driving(in);
        co_return r;
    }
    auto first_timer = engine::impl::first_due(rt.buffered().add_timers);
    if (log::enabled(log::level::info))
        in->log.info("suspended, waiting for {}", describe_waits(rt, waits));
    rt.mark_committed();
    in->stored = instance_status::suspended;
    in->stored_waits = std::move(waits);
    self->keep_hot(in, phase::released);
    self->poke_for_timers(first_timer);  // the next due time may be earlier now
    co_return r;
}

asio::awaitable<bool> start_instance_here(std::shared_ptr<engine::impl> self,
                                          std::string definition, std::string id,
                                          nlohmann::json params,
                                          std::vector<document_write> documents,
                                          start_options options) {
    queued_start direct;  // named: no braced temporary in a co_await (g++ 12)
    auto r = co_await start_here(std::move(self), std::move(definition), std::move(id),
                                 std::move(params), std::move(documents), std::string(),
                                 std::move(direct), std::move(options.trace));
    co_return !r.documents_changed;
}

}  // namespace

namespace {

// A child's start, on the child's part. A child that exists already and runs is this
// parent's (a replay, a retried step), or an error; one that has ended sends this parent
// its outcome (again), so that it can be joined: after a retry of the parent, or when an
// instance that ran on its own is started as a child later. `queue`: started on it.
asio::awaitable<void> start_child_here(std::shared_ptr<engine::impl> self, std::string definition,
                                       std::string id, nlohmann::json params, std::string parent,
                                       queued_start queue,
                                       std::optional<trace::span_context> caller) {
    std::vector<document_write> none;
    auto r = co_await start_here(self, std::move(definition), id, std::move(params),
                                 std::move(none), parent, std::move(queue), std::move(caller));
    if (r.created || parent.empty()) co_return;  // (detached: a start like any other)
    auto existing = co_await self->st.load(id, false);
    if (!existing) throw std::runtime_error("child process " + id + " vanished as it was started");
    if (!is_final(existing->status) || existing->parked) {  // a parked child leaves it waiting
        if (existing->parent == parent) co_return;
        throw terminal_error("process " + id + " is running already" +
                             (existing->parent.empty() ? std::string(" (started on its own)")
                                                       : ", as a child of " + existing->parent) +
                             ": " + parent + " cannot start it as its child");
    }
    // Told again when it told this parent before: the signal's key makes that a duplicate.
    co_await self->tell_parent(parent, id, existing->status, existing->result, existing->error);
}

}  // namespace

asio::awaitable<void> engine_parts::start_queued(std::shared_ptr<engine::impl> self,
                                                 std::string definition, std::string id,
                                                 nlohmann::json params, queued_start queue,
                                                 std::string parent,
                                                 std::optional<trace::span_context> caller) {
    co_await start_child_here(std::move(self), std::move(definition), std::move(id),
                              std::move(params), std::move(parent), std::move(queue),
                              std::move(caller));
}

asio::awaitable<void> engine::start_instance(std::string definition, std::string id,
                                             nlohmann::json params) {
    std::vector<document_write> none;
    start_options plain;
    co_await start_instance(std::move(definition), std::move(id), std::move(params),
                            std::move(none), std::move(plain));
}

asio::awaitable<bool> engine::start_instance(std::string definition, std::string id,
                                             nlohmann::json params,
                                             std::vector<document_write> documents,
                                             start_options options) {
    auto owner = owner_of(id);
    return on_engine(std::move(owner), &start_instance_here, std::move(definition), std::move(id),
                     std::move(params), std::move(documents), std::move(options));
}

asio::awaitable<void> engine::impl::start_child(std::string definition, std::string id,
                                                nlohmann::json params, std::string parent,
                                                std::optional<trace::span_context> caller) {
    auto owner = owner_of(id);
    queued_start direct;  // named: no braced temporary in a co_await (g++ 12)
    co_await on_engine(std::move(owner), &start_child_here, std::move(definition), std::move(id),
                       std::move(params), std::move(parent), std::move(direct), std::move(caller));
}

namespace {

asio::awaitable<delivery> deliver_here(std::shared_ptr<engine::impl> self, std::string instance,
                                       std::string path, nlohmann::json payload, std::string key) {
    co_return co_await self->deliver_on_this_part(std::move(instance), std::move(path),
                                                  std::move(payload), std::move(key));
}

}  // namespace

asio::awaitable<delivery> engine::deliver(std::string instance, std::string path,
                                          nlohmann::json payload, std::string key) {
    return parts_[0]->deliver_to(std::move(instance), std::move(path), std::move(payload),
                                 std::move(key));
}

asio::awaitable<delivery> engine::impl::deliver_on_this_part(std::string instance, std::string path,
                                                             nlohmann::json payload,
                                                             std::string key) {
    auto scoped = signals::scoped_key(path, key);
    inbox_entry e{0, std::move(scoped), std::move(path), std::move(payload), clock.now()};
    auto d = co_await st.deliver(instance, e);
    if (d.result == delivery::outcome::stored) co_await delivered(instance, e, d);
    co_return d;
}

asio::awaitable<delivery> engine::impl::deliver_to(std::string instance, std::string path,
                                                   nlohmann::json payload, std::string key) {
    auto owner = owner_of(instance);
    return on_engine(std::move(owner), &deliver_here, std::move(instance), std::move(path),
                     std::move(payload), std::move(key));
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
    for (auto& part : parts_) part->plans[definition] = plan;
}

namespace {

asio::awaitable<std::optional<instance_info>> describe_here(std::shared_ptr<engine::impl> self,
                                                            std::string id) {
    auto snap = co_await self->st.load(id, false);
    if (!snap) co_return std::nullopt;
    co_return instance_info{snap->id, snap->definition, snap->status, std::move(snap->result),
                            std::move(snap->error)};
}

}  // namespace

asio::awaitable<std::optional<instance_info>> engine::describe(std::string id) {
    auto here = part_for(co_await asio::this_coro::executor);
    co_return co_await on_engine(std::move(here), &describe_here, std::move(id));
}

namespace {

asio::awaitable<instance_status> status_here(std::shared_ptr<engine::impl> self, std::string id) {
    auto snap = co_await self->st.load(id, false);
    if (!snap) throw std::invalid_argument("no process instance " + id);
    co_return snap->status;
}

}  // namespace

asio::awaitable<instance_status> engine::status(std::string id) {
    auto here = part_for(co_await asio::this_coro::executor);
    co_return co_await on_engine(std::move(here), &status_here, std::move(id));
}

namespace {

asio::awaitable<expected<nlohmann::json, failure>> wait_here(std::shared_ptr<engine::impl> self,
                                                             std::string id) {
    // An instance this engine holds the lease of is not final: the first look at the store
    // is skipped, and its settling here hands the outcome over.
    auto held = self->hot.find(id);
    bool ask = held == self->hot.end() || !held->second->leased();
    for (;; ask = true) {
        if (ask) {
            auto snap = co_await self->st.load(id, false);
            if (!snap)
                co_return unexpected(failure{instance_status::failed, "no process instance " + id});
            if (auto done = outcome_of(snap->status, snap->result, snap->error))
                co_return std::move(*done);
        }
        engine::impl::final_waiter w{
            asio::steady_timer(self->ex, asio::steady_timer::time_point::max()), std::nullopt};
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

}  // namespace

asio::awaitable<expected<nlohmann::json, failure>> engine::wait(std::string id) {
    auto owner = owner_of(id);
    return on_engine(std::move(owner), &wait_here, std::move(id));
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

namespace {

asio::awaitable<action_result> cancel_here(std::shared_ptr<engine::impl> self, std::string id) {
    if (auto it = self->hot.find(id); it != self->hot.end() && it->second->leased()) {
        auto in = it->second;
        in->owe(owed::cancel);
        self->ensure_driving(in);
        co_return action_result();
    }
    // Telling its parent lets the parent end, and cancel this child too, meanwhile: one
    // cancel at a time, the other is told it is done.
    if (!self->cancelling.insert(id).second) co_return action_result();
    struct cancelled_now {
        engine::impl& part;
        const std::string& id;
        ~cancelled_now() { part.cancelling.erase(id); }
    } forget{*self, id};
    auto grant =
        co_await self->st.acquire(id, self->opt.worker, self->clock.now(), self->opt.lease_ttl);
    if (!grant) co_return unexpected(lease_refusal(grant.error(), id));
    if (auto it = self->hot.find(id); it != self->hot.end()) self->drop(it->second);
    auto snap = co_await self->st.load(id, true);
    if (snap && !snap->parent.empty())
        co_await self->tell_parent(snap->parent, id, instance_status::cancelled, {}, {});
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
    if (snap) {
        self->metrics_of(snap->definition).cancelled.fetch_add(1, std::memory_order_relaxed);
        if (auto queue = queue_of(snap->journal)) self->leave_queue_later(*queue, id);
        auto children = engine_parts::children_in(snap->journal);
        engine_parts::note_outcomes(children, snap->inbox);
        self->close_children(id, std::move(children));
    }
    self->log.info("process {}: cancelled", id);
    co_return action_result();
}

}  // namespace

asio::awaitable<action_result> engine::cancel(std::string id) {
    return parts_[0]->cancel_anywhere(std::move(id));
}

asio::awaitable<action_result> engine::impl::cancel_anywhere(std::string id) {
    auto owner = owner_of(id);
    return on_engine(std::move(owner), &cancel_here, std::move(id));
}

namespace {

asio::awaitable<action_result> resume_here(std::shared_ptr<engine::impl> self, std::string id) {
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

}  // namespace

asio::awaitable<action_result> engine::resume(std::string id) {
    auto owner = owner_of(id);
    return on_engine(std::move(owner), &resume_here, std::move(id));
}

namespace {

// The signals that journal entries from `from` on consumed: a retry from there gives them
// back to the inbox, for the handler to take again when it gets there.
std::vector<inbox_entry> consumed_after(const std::vector<journal_entry>& journal,
                                        std::uint64_t from, time_point now) {
    std::vector<inbox_entry> out;
    for (auto i = from; i < journal.size(); ++i) {
        const auto& e = journal[i];
        if (e.kind != op_kind::signal || !e.value.is_object()) continue;
        inbox_entry back;
        back.id = e.value.value("id", std::uint64_t{0});
        back.path = e.name;
        back.payload = e.value.value("payload", nlohmann::json());
        back.at = e.at == time_point{} ? now : e.at;
        if (back.id != 0) out.push_back(std::move(back));
    }
    return out;
}

// Moves the signals named in `left_out` from `restore` to the request's left_out; the id of
// one that is not there, if any.
std::optional<std::uint64_t> leave_out(rewind_request& req,
                                       const std::vector<std::uint64_t>& left_out) {
    for (auto id : left_out) {
        auto it = std::find_if(req.restore.begin(), req.restore.end(),
                               [id](const inbox_entry& e) { return e.id == id; });
        if (it == req.restore.end()) return id;
        req.restore.erase(it);
        req.left_out.push_back(id);
    }
    return std::nullopt;
}

asio::awaitable<action_result> retry_here(std::shared_ptr<engine::impl> self, std::string id,
                                          std::uint64_t from, std::vector<std::uint64_t> left_out) {
    auto snap = co_await self->st.load(id, true);
    if (!snap) co_return unexpected(refuse(refusal::reason::not_found, id, "does not exist"));
    rewind_request req;
    req.instance = id;
    req.expected_length = snap->journal.size();
    req.keep = from;
    req.now = self->clock.now();
    req.restore = consumed_after(snap->journal, from, req.now);
    if (from <= snap->journal.size()) {
        if (auto unknown = leave_out(req, left_out))
            co_return unexpected(refuse(refusal::reason::unknown_signal, id,
                                        "consumed no signal with inbox id " +
                                            std::to_string(*unknown) + " at or after entry " +
                                            std::to_string(from) + ": nothing to leave out"));
    }
    auto r = co_await self->index.rewind(std::move(req));
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
    if (left_out.empty())
        self->log.info("process {}: retried by an operator from journal entry {}", id, from);
    else
        self->log.info(
            "process {}: retried by an operator from journal entry {} without {} "
            "consumed signal(s)",
            id, from, left_out.size());
    self->schedule_wake(id, duration::zero());
    co_return action_result();
}

asio::awaitable<expected<inbox_entry, refusal>> remove_signal_here(
    std::shared_ptr<engine::impl> self, std::string id, std::uint64_t inbox_id) {
    remove_signal_request req{id, inbox_id, self->clock.now()};
    auto r = co_await self->index.remove_signal(std::move(req));
    if (!r) {
        switch (r.error()) {
            case store_error::not_found:
                co_return unexpected(refuse(refusal::reason::not_found, id, "does not exist"));
            case store_error::wrong_state:
                co_return unexpected(refuse(refusal::reason::wrong_state, id,
                                            "is running; a signal can be removed from its inbox "
                                            "only while it is suspended or final"));
            case store_error::busy:
                co_return unexpected(refuse(refusal::reason::owned, id,
                                            "is being resumed by a worker; a signal can be "
                                            "removed from its inbox only while none runs it"));
            case store_error::inbox_missing:
                co_return unexpected(refuse(refusal::reason::unknown_signal, id,
                                            "has no inbox entry " + std::to_string(inbox_id)));
            default:
                co_return unexpected(lease_refusal(r.error(), id));
        }
    }
    if (auto it = self->hot.find(id); it != self->hot.end() && !it->second->leased())
        self->drop(it->second);
    self->log.info("process {}: signal {} (inbox entry {}) removed by an operator", id, r->path,
                   inbox_id);
    co_return std::move(*r);
}

}  // namespace

asio::awaitable<action_result> engine::retry(std::string id, std::uint64_t from) {
    return retry(std::move(id), from, {});
}

asio::awaitable<action_result> engine::retry(std::string id, std::uint64_t from,
                                             std::vector<std::uint64_t> left_out) {
    auto owner = owner_of(id);
    return on_engine(std::move(owner), &retry_here, std::move(id), from, std::move(left_out));
}

asio::awaitable<expected<inbox_entry, refusal>> engine::remove_signal(std::string id,
                                                                      std::uint64_t inbox_id) {
    auto owner = owner_of(id);
    return on_engine(std::move(owner), &remove_signal_here, std::move(id), inbox_id);
}

void engine::run() {
    impl::start_admitting(parts_.front());
    for (auto& part : parts_) {
        if (part->loop_running) continue;
        part->loop_running = true;
        part->stopped = false;
        asio::co_spawn(part->ex, impl::wake_loop(part), [self = part](std::exception_ptr e) {
            self->loop_running = false;
            if (!e) return;
            try {
                std::rethrow_exception(e);
            } catch (const std::exception& x) {
                self->log.error("process engine wake loop: {}", x.what());
            }
        });
    }
}

namespace {

void stop_part(engine::impl& self) {
    if (self.stopped) return;
    self.stopped = true;
    self.poke();
    self.poke_queues();
    std::vector<std::shared_ptr<hot_instance>> all;
    for (auto& [_, in] : self.hot) all.push_back(in);
    for (auto& in : all) self.drop(in);
    for (auto& [_, list] : self.waiters)
        for (auto* w : list) w->timer.cancel();
    if (self.part == 0) self.withdraw_later();
}

// Runs `f(part)` on each part's thread: here for the part this thread runs (or the only
// one), posted to the others.
template <class F>
void on_each_part(const std::vector<std::shared_ptr<engine::impl>>& parts, F f) {
    for (const auto& part : parts) {
        if (parts.size() == 1 || part->runs_this_thread())
            f(*part);
        else
            asio::post(part->ex, [part, f] { f(*part); });
    }
}

}  // namespace

void engine::stop() {
    on_each_part(parts_, [](impl& part) { stop_part(part); });
}

void engine::poke() {
    on_each_part(parts_, [](impl& part) { part.poke(); });
}

namespace {

asio::awaitable<void> withdraw_here(std::shared_ptr<engine::impl> self) {
    co_await self->withdraw();
}

}  // namespace

asio::awaitable<void> engine::withdraw() {
    return on_engine(parts_.front(), &withdraw_here);  // the part that announces
}

namespace {

asio::awaitable<std::vector<worker_record>> workers_here(std::shared_ptr<engine::impl> self) {
    co_return co_await self->registry.workers(self->clock.now());
}

}  // namespace

asio::awaitable<std::vector<worker_record>> engine::workers() {
    auto here = part_for(co_await asio::this_coro::executor);
    co_return co_await on_engine(std::move(here), &workers_here);
}

namespace {

asio::awaitable<std::vector<step_progress>> steps_in_flight_here(std::shared_ptr<engine::impl> self,
                                                                 std::string id) {
    std::vector<step_progress> out;
    if (auto it = self->hot.find(id); it != self->hot.end())
        for (const auto& [_, p] : it->second->steps) out.push_back(p);
    co_return out;
}

}  // namespace

asio::awaitable<std::vector<step_progress>> engine::steps_in_flight(std::string id) {
    auto owner = owner_of(id);
    return on_engine(std::move(owner), &steps_in_flight_here, std::move(id));
}

std::size_t engine::hot_count() const noexcept {
    std::size_t n = 0;
    for (const auto& part : parts_) n += part->hot_size.load(std::memory_order_relaxed);
    return n;
}

bool engine::writes_documents(const document_address& where) const {
    return parts_.front()->st.writes_documents(where);
}

std::size_t engine::parts() const noexcept {
    return parts_.size();
}

const std::string& engine::worker() const noexcept {
    return parts_.front()->opt.worker;
}

keel::clock& engine::clock() noexcept {
    return parts_.front()->clock;
}

void to_json(nlohmann::json& out, const instance_info& info) {
    out = {{"id", info.id},
           {"definition", info.definition},
           {"status", to_string(info.status)},
           {"result", info.result.value_or(nullptr)},
           {"error", info.error ? nlohmann::json(*info.error) : nlohmann::json(nullptr)}};
}

}  // namespace keel::process
