#include <keel/framework/concurrency/context.hpp>
#include <string_view>
#include <unordered_map>

#include "impl.hpp"

namespace keel::process {

using namespace engine_parts;

void engine::impl::stamp(commit_request& req) {
    req.now = clock.now();
    for (auto& e : req.entries)
        if (e.at == time_point{}) e.at = req.now;
}

void engine::impl::schedule_wake(std::string id, duration delay) {
    asio::co_spawn(ex, delayed_wake(shared_from_this(), std::move(id), delay),
                   [](std::exception_ptr) {});
}

asio::awaitable<void> engine::impl::delayed_wake(std::shared_ptr<impl> self, std::string id,
                                                 duration delay) {
    if (delay > duration::zero()) {
        error_code ec;
        co_await self->clock.async_wait_until(self->ex, self->clock.now() + delay,
                                              asio::redirect_error(asio::use_awaitable, ec));
    }
    co_await self->wake(id);
}

namespace {

asio::awaitable<void> delivered_to(std::shared_ptr<engine::impl> self, std::string instance,
                                   inbox_entry e, delivery d) {
    co_await self->delivered(std::move(instance), std::move(e), d);
}

asio::awaitable<void> wake_here(std::shared_ptr<engine::impl> self, std::string id) {
    co_await self->wake(std::move(id));
}

asio::awaitable<void> taken_here(std::shared_ptr<engine::impl> self, std::string id,
                                 taken_instance got) {
    co_await self->taken_by_emit(std::move(id), std::move(got));
}

}  // namespace

bool engine::impl::runs_this_thread() const {
    return concurrency::runs_in_this_thread(ex);
}

std::shared_ptr<engine::impl> engine::impl::owner_of(const std::string& id) {
    if (parts.size() <= 1) return shared_from_this();
    auto owner = parts[shard_of(id, parts.size())].lock();
    return owner ? owner : shared_from_this();
}

namespace {

asio::awaitable<signals::emit_result> emit_here(std::shared_ptr<engine::impl> self,
                                                signals::emit_request request) {
    co_return co_await self->emit_here(std::move(request));
}

}  // namespace

// On the caller's own part when it runs on one (an HTTP thread of the service): the fan-out
// needs no instance, and each instance it reached is handed to its owner.
asio::awaitable<signals::emit_result> engine::emit(signals::emit_request request) {
    auto here = part_for(co_await asio::this_coro::executor);
    co_return co_await on_engine(std::move(here), &emit_here, std::move(request));
}

asio::awaitable<signals::emit_result> engine::impl::emit_here(signals::emit_request request) {
    fan_out_request req;
    req.subscriptions = std::move(request.subscriptions);
    req.signal.key = signals::scoped_key(request.path, request.key);
    req.signal.path = std::move(request.path);
    req.signal.payload = std::move(request.payload);
    req.signal.at = clock.now();
    // Kept only where spans are recorded: nothing else reads it, and storing it costs every
    // emit a JSON member written and parsed back (tracing off costs nothing).
    if (opt.spans) req.signal.trace = std::move(request.trace);
    req.window = opt.emit_window;
    req.documents = std::move(request.documents);
    // The instances this signal makes ready are taken in the same step, not by a take after.
    if (!stopped && !watch->doubt())
        req.take = fan_out_request::taker{opt.worker, clock.now(), opt.lease_ttl, refusals()};
    auto out = co_await st.fan_out(req);
    signals::emit_result result;
    if (out.documents_changed) {
        result.documents_changed = true;
        co_return result;
    }
    // By id: a broadcast reaches thousands, and a search per instance would be quadratic.
    std::unordered_map<std::string_view, taken_instance*> taken;
    taken.reserve(out.taken.size());
    for (auto& [instance, got] : out.taken) taken.emplace(instance, &got);
    for (auto& [instance, d] : out.delivered) {
        if (auto got = taken.find(instance); got != taken.end()) {
            if (owner_of(instance).get() == this && adopt_at_once(instance, *got->second)) continue;
            hand_over(instance, taken_here(owner_of(instance), instance, std::move(*got->second)));
        } else
            hand_over(instance, delivered_to(owner_of(instance), instance, req.signal, d));
    }
    result.reached = out.reached;
    result.duplicate = out.duplicate;
    co_return result;
}

// The emit is answered once its fan-out committed: what the signal reached is in the store.
// Each reached instance goes to its part's executor in the order the fan-out gave, without
// the emit waiting for it: adopting a woken instance may read its journal back, one round
// trip each. An instance taken here whose adoption fails keeps its lease until the lease
// ends, and is then taken again like the instances of a worker that stopped.
void engine::impl::hand_over(const std::string& instance, asio::awaitable<void> work) {
    auto owner = owner_of(instance);
    asio::co_spawn(owner->ex, std::move(work), [owner, id = instance](std::exception_ptr e) {
        if (!e) return;
        try {
            std::rethrow_exception(e);
        } catch (const std::exception& x) {
            owner->log.warn("process {}: taking it after a signal failed: {}", id, x.what());
        }
    });
}

asio::awaitable<void> engine::impl::delivered(std::string instance, inbox_entry e, delivery d) {
    auto it = hot.find(instance);
    if (it != hot.end() && it->second->leased()) {
        e.id = d.id;
        it->second->inbox.push_back(std::move(e));
        ensure_driving(it->second);
    } else if (auto t = taking.find(instance); t != taking.end()) {
        e.id = d.id;
        t->second.push_back(std::move(e));
    } else if (d.waiting) {
        co_await wake(instance);
    }
}

namespace {

// Whether the store still has what this worker last committed for an instance it keeps in
// memory. A commit acknowledged and then lost (a Redis failover before the replica had it)
// that wrote no journal entries leaves the journal's length as it was, but not the status,
// the wait set or the timers.
bool holds_last_commit(const hot_instance& in, const instance_snapshot& s) {
    return s.status == in.stored && s.waits == in.stored_waits && in.exec->rt.armed_as(s.timers);
}

// Whether this worker's copy of a taken instance can run on as it is: not let go, and the
// store has the journal's length and the last commit as the copy does.
bool is_current(const hot_instance& in, const taken_instance& got) {
    return !in.dropped() && in.exec->rt.committed_length() == got.grant.journal_length &&
           holds_last_commit(in, got.snapshot);
}

// An instance being taken by this part, from the take until it runs or is left.
class taking_mark {
  public:
    taking_mark(engine::impl& part, std::string id) : part_(part), id_(std::move(id)) {
        part_.taking.try_emplace(id_);
    }
    ~taking_mark() { part_.taking.erase(id_); }
    taking_mark(const taking_mark&) = delete;
    taking_mark& operator=(const taking_mark&) = delete;

  private:
    engine::impl& part_;
    std::string id_;
};

}  // namespace

asio::awaitable<void> engine::impl::wake(std::string id) {
    if (stopped || taking.contains(id)) co_return;
    std::shared_ptr<hot_instance> in;
    if (auto it = hot.find(id); it != hot.end()) in = it->second;
    if (in && in->leased()) {
        ensure_driving(in);  // ours already
        co_return;
    }
    taking_mark mark(*this, id);
    auto got = co_await take_here(id, in);
    if (got) co_await adopt(std::move(id), std::move(in), std::move(*got));
}

asio::awaitable<std::optional<taken_instance>> engine::impl::take_here(
    const std::string& id, const std::shared_ptr<hot_instance>& in) {
    // The lease and the instance in one step; the journal only if the copy in memory is not
    // current.
    std::optional<std::uint64_t> known;
    if (in && !in->dropped()) known = in->exec->rt.committed_length();
    auto got = co_await st.take(id, opt.worker, clock.now(), opt.lease_ttl, refusals(), known);
    if (got) co_return std::move(*got);
    if (in && got.error() != store_error::busy) drop(in);
    co_return std::nullopt;
}

namespace {

asio::awaitable<delivery> deliver_taken_here(std::shared_ptr<engine::impl> self, std::string id,
                                             std::string path, nlohmann::json payload,
                                             std::string key) {
    std::shared_ptr<hot_instance> in;
    if (auto it = self->hot.find(id); it != self->hot.end()) in = it->second;
    // Ours already, or being taken by this part: the signal reaches it through delivered().
    bool as_any = self->stopped || self->taking.contains(id) || (in && in->leased());
    if (!as_any) {
        taking_mark mark(*self, id);
        auto got = co_await self->take_here(id, in);
        if (got) {
            // Leased to this worker, the instance is due to no other when the signal arrives;
            // delivered() puts the signal with the take. Should the delivery fail, the lease
            // ends and the instance is taken again like those of a worker that stopped.
            auto d = co_await self->deliver_on_this_part(id, std::move(path), std::move(payload),
                                                         std::move(key));
            co_await self->adopt(std::move(id), std::move(in), std::move(*got));
            co_return d;
        }
    }
    co_return co_await self->deliver_on_this_part(std::move(id), std::move(path),
                                                  std::move(payload), std::move(key));
}

}  // namespace

asio::awaitable<delivery> engine::impl::deliver_taken(std::string instance, std::string path,
                                                      nlohmann::json payload, std::string key) {
    auto owner = owner_of(instance);
    return on_engine(std::move(owner), &deliver_taken_here, std::move(instance), std::move(path),
                     std::move(payload), std::move(key));
}

asio::awaitable<void> engine::impl::taken_by_emit(std::string id, taken_instance got) {
    std::shared_ptr<hot_instance> in;
    if (auto it = hot.find(id); it != hot.end()) in = it->second;
    // Stopping, or being taken by a wake-up of this worker (whose take gets the lease the
    // emit gave, the same worker's): the lease is given back, or left to that wake-up.
    if (stopped) {
        co_await st.release(id, got.grant.lease);
        co_return;
    }
    if (run_by_another_path(id, in.get())) co_return;
    taking_mark mark(*this, id);
    co_await adopt(id, std::move(in), std::move(got));
}

bool engine::impl::run_by_another_path(const std::string& id, hot_instance* in) {
    // Being taken by a wake-up of this worker: its take gets the lease the emit gave (the
    // same worker's).
    if (taking.contains(id)) return true;
    if (in && in->leased()) {
        // The store had it released and suspended, so its driver is between the commit that
        // released it and forgetting the lease: it wakes it once it has (its take then gets
        // the lease the emit gave).
        in->owe(owed::wake_once_released);
        return true;
    }
    return false;
}

bool engine::impl::adopt_at_once(const std::string& id, taken_instance& got) {
    auto it = hot.find(id);
    if (stopped || it == hot.end()) return false;
    const auto& in = it->second;
    if (run_by_another_path(id, in.get())) return true;
    const auto& snap = got.snapshot;
    // adopt() without what may need the store: a reload, leaving, the workers' versions.
    if (!is_current(*in, got) || lacks_code_for(snap.definition, snap.version)) return false;
    if (got.grant.taken_over)
        metrics_of(snap.definition).lease_takeovers.fetch_add(1, std::memory_order_relaxed);
    auto held = in;  // `in` is the map's: ensure_driving may not outlive it
    resume_held(held, got);
    ensure_driving(held);
    return true;
}

void engine::impl::resume_held(const std::shared_ptr<hot_instance>& in, taken_instance& got) {
    auto& snap = got.snapshot;
    in->lease = got.grant.lease;
    in->lease_expires = got.grant.expires;
    if (!in->leased()) move_to(*in, phase::held);  // held already if started meanwhile
    in->inbox = std::move(snap.inbox);
    in->stored = snap.status;
    in->stored_waits = std::move(snap.waits);
    in->resumed = got.resumed;
}

asio::awaitable<void> engine::impl::adopt(std::string id, std::shared_ptr<hot_instance> in,
                                          taken_instance got) {
    if (stopped) co_return;
    if (auto it = hot.find(id); it != hot.end() && it->second != in) {
        // Started meanwhile by this worker.
        in = it->second;
    }
    const auto& grant = got.grant;
    const auto& snap = got.snapshot;
    if (grant.taken_over)
        metrics_of(snap.definition).lease_takeovers.fetch_add(1, std::memory_order_relaxed);
    auto why = reason_to_leave(snap);
    // Started by code this worker does not have, before its heartbeat saw who runs it?
    if (!why && lacks_code_for(snap.definition, snap.version)) {
        co_await refresh_workers();
        if (stopped) co_return;
        why = reason_to_leave(snap);
    }
    if (why) {
        if (in) drop(in);
        co_await leave(id, snap.definition, snap.version, grant.lease, std::move(*why));
        co_return;
    }
    if (in && is_current(*in, got)) {
        resume_held(in, got);
    } else {
        if (in) drop(in);
        std::optional<instance_snapshot> loaded;
        if (got.with_journal)
            loaded = std::move(got.snapshot);
        else
            loaded = co_await st.load(id, true);
        if (!loaded) co_return;
        in = make_hot(std::move(*loaded), grant.lease, grant.expires);
        in->resumed = got.resumed;
    }
    if (auto a = taking.find(id); a != taking.end() && !a->second.empty()) {
        for (auto& e : a->second)
            if (std::ranges::none_of(in->inbox, [&](const auto& x) { return x.id == e.id; }))
                in->inbox.push_back(std::move(e));
        std::ranges::sort(in->inbox, {}, &inbox_entry::id);
        a->second.clear();
    }
    ensure_driving(in);
}

void engine::impl::notify(const std::string& id,
                          std::optional<expected<nlohmann::json, failure>> outcome) {
    auto it = waiters.find(id);
    if (it == waiters.end()) return;
    for (auto* w : it->second) {
        w->outcome = outcome;
        w->timer.cancel();
    }
}

std::optional<time_point> engine::impl::first_due(const std::vector<timer_record>& timers) {
    if (timers.empty()) return std::nullopt;
    return std::ranges::min(timers, {}, &timer_record::due).due;
}

void engine::impl::poke_for_timers(std::optional<time_point> first) {
    if (!first || (loop_deadline && *loop_deadline <= *first)) return;
    poke();
}

void engine::impl::poke() {
    poked = true;
    if (loop_wait) loop_wait->emit(asio::cancellation_type::terminal);
    if (loop_idle) loop_idle->cancel();
}

namespace {
// Rounds in a row that go round at once (due work claimed, or a poke), before one waits.
constexpr int max_spins = 100;
constexpr auto busy_breath = std::chrono::milliseconds(5);
}  // namespace

asio::awaitable<std::optional<time_point>> engine::impl::wake_round(int& spins) {
    poked = false;
    co_await heartbeat();
    co_await renew_leases();
    std::vector<std::string> ids;
    if (!watch->doubt()) ids = co_await st.due(clock.now(), 256, refusals());
    for (auto& id : ids) {
        auto owner = owner_of(id);
        co_await on_engine(std::move(owner), &wake_here, id);
    }
    if (stopped) co_return std::nullopt;
    auto next = co_await st.next_due();
    auto now = clock.now();
    if (next && *next <= now && !ids.empty() && spins < max_spins) {
        ++spins;
        co_await asio::post(ex, asio::use_awaitable);  // let woken instances run
        co_return now;
    }
    if (poked && spins < max_spins) {
        ++spins;
        co_return now;
    }
    std::optional<time_point> deadline;
    if (next && *next > now) deadline = next;
    // Due work that waking did not resolve (owned elsewhere): look again a bit later. Work
    // still claimed after `max_spins` busy rounds (a storm of timers) gets a breath only,
    // so that a round that keeps claiming instances it cannot settle does not spin.
    if (next && *next <= now) deadline = now + (ids.empty() ? opt.lease_ttl / 10 : busy_breath);
    spins = 0;
    if (auto r = next_renewal()) deadline = deadline ? std::min(*deadline, *r) : *r;
    // A withdrawn worker sends no more heartbeats (heartbeat() returns at once and
    // next_heartbeat stays in the past): waking for it would go round without ever
    // sleeping, and on a store whose calls do not suspend (memory_store) never give its
    // thread back to the io_context, not even for the engine's stop().
    if (opt.heartbeat > duration::zero() && !withdrawn)
        deadline = deadline ? std::min(*deadline, next_heartbeat) : next_heartbeat;
    if (auto poll = opt.poll_interval ? opt.poll_interval : st.poll_interval()) {
        auto p = now + *poll;
        deadline = deadline ? std::min(*deadline, p) : p;
    }
    co_return deadline;
}

asio::awaitable<void> engine::impl::idle_until(std::optional<time_point> deadline) {
    error_code ec;
    if (deadline) {
        auto sig = std::make_shared<asio::cancellation_signal>();
        loop_wait = sig;
        loop_deadline = deadline;
        co_await clock.async_wait_until(
            ex, *deadline,
            asio::bind_cancellation_slot(sig->slot(),
                                         asio::redirect_error(asio::use_awaitable, ec)));
        loop_deadline.reset();
        loop_wait.reset();
    } else {
        asio::steady_timer idle(ex, asio::steady_timer::time_point::max());
        loop_idle = &idle;
        co_await idle.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        loop_idle = nullptr;
    }
}

asio::awaitable<void> engine::impl::wake_loop(std::shared_ptr<impl> self) {
    int spins = 0;
    duration backoff = std::chrono::milliseconds(50);
    std::optional<std::string> outage;
    while (!self->stopped) {
        std::optional<time_point> deadline;
        std::optional<std::string> failed;
        bool refused = false;
        try {
            if (!self->watch->open()) {  // the engine opens its store before it works on it
                co_await self->st.prepare();
                self->watch->opened();
                self->log.info("process store open");
                if (!self->queues.empty()) self->poke_queues();  // admission waits for it
            }
            deadline = co_await self->wake_round(spins);
        } catch (const store_refused& e) {
            failed = e.what();
            refused = true;
        } catch (const std::exception& e) {
            failed = e.what();
        }
        if (self->stopped) break;
        if (failed) {
            // A refusal is said once, also after an outage (Redis down, then answering with
            // a store this service cannot use): waiting does not help, so it says what must
            // change, not "retrying". The loop still looks, backing off to every 2 s.
            if (refused && outage != failed)
                self->log.error(
                    "process store refused: {}; no process runs until the "
                    "configuration or the store changes",
                    *failed);
            else if (!outage)
                self->log.warn("process store unavailable: {}; retrying", *failed);
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

}  // namespace keel::process
