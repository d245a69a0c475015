// Queues on the engine: registering, enqueueing (the store's line first, then the queued
// start), part 0's admission loop, and giving slots back when instances end.
//
// An admitted instance is told with a signal (admission_path, key "admitted": a second
// telling is a duplicate) by the worker that admitted it, which takes it first so that it
// runs there (engine::impl::deliver_taken; worker_concurrency counts it there). The store
// hands back each admitted entry again every `recheck`: read again, the instance says
// whether it still runs (one that ended gives its slot back then, should the leave at its
// end have been lost with its worker) and whether it still waits for its admission (then it
// is told again: the first telling was lost).

#include <fmt/format.h>

#include <algorithm>
#include <keel/framework/errors.hpp>

#include "impl.hpp"

namespace keel::process {

using engine_parts::on_engine;

namespace {

constexpr std::size_t admit_batch = 64;
// How often an admitted instance is told again (a duplicate) to learn whether it ended: what
// gives back a slot whose leave was lost with its worker.
constexpr auto recheck = std::chrono::seconds(30);
// While entries wait, look again this often even when nothing is due: a slot freed by a
// worker that does not admit this queue wakes no loop. An empty queue is looked at less
// often: an entry left by a worker that died after its enqueue wakes no loop either.
constexpr auto idle_look = std::chrono::seconds(5);
constexpr auto empty_look = std::chrono::seconds(60);
// A queue with a worker_concurrency is looked at every second, waiting or empty: a worker at
// its limit leaves what it enqueues to the others, whose loops nothing of it wakes.
constexpr auto spread_look = std::chrono::seconds(1);
// An entry whose instance does not exist this long after its enqueue was left by a
// worker that died between the two: its slot is given back.
constexpr auto start_grace = std::chrono::seconds(60);
// A fresh admission that found no instance yet (its start is a moment behind) is told again.
constexpr auto start_lag = std::chrono::milliseconds(100);
constexpr auto outage_retry = std::chrono::seconds(1);

// A queue without concurrency limits only counts admissions (its rate): its entries leave
// once their instance is told (or started at once), holding nothing while it runs.
bool holds_slots(const queue& q) {
    return q.concurrency > 0 || q.partition_concurrency > 0 || q.worker_concurrency > 0;
}

}  // namespace

struct engine::impl::admissions {
    std::shared_ptr<asio::cancellation_signal> sleeping;
    bool poked = false;
    std::optional<std::string> outage;

    void wake() {
        poked = true;
        if (sleeping) sleeping->emit(asio::cancellation_type::all);
    }
};

std::shared_ptr<engine::impl> engine::impl::first_part() {
    if (parts.empty()) return shared_from_this();
    return parts.front().lock();
}

void engine::impl::poke_queues() {
    auto first = first_part();
    if (!first || !first->admitting) return;
    asio::post(first->ex, [first] {
        if (first->admitting) first->admitting->wake();
    });
}

namespace {

// "a, b, c and 7 more"
std::string some_of(const std::vector<std::string>& ids) {
    constexpr std::size_t shown = 3;
    std::string out;
    for (std::size_t i = 0; i < std::min(ids.size(), shown); ++i)
        out += (i > 0 ? ", " : "") + ids[i];
    if (ids.size() > shown) out += fmt::format(" and {} more", ids.size() - shown);
    return out;
}

asio::awaitable<void> send_leaving(std::shared_ptr<engine::impl> self) {
    while (!self->leaving.empty()) {
        auto batch = std::exchange(self->leaving, {});
        bool left = false;
        for (auto& [queue, instances] : batch) {
            auto named = some_of(instances);
            try {
                co_await self->st.leave_queue(queue, std::move(instances));
                left = true;
            } catch (const std::exception& e) {
                self->log.warn(
                    "queue {}: could not give the slots of {} back ({}); the queue's check gives "
                    "them back",
                    queue, named, e.what());
            }
        }
        if (left) self->poke_queues();
    }
    self->leaving_in_flight = false;
}

}  // namespace

void engine::impl::leave_queue_later(std::string queue, std::string instance) {
    leaving[std::move(queue)].push_back(std::move(instance));
    if (leaving_in_flight) return;
    leaving_in_flight = true;
    asio::co_spawn(ex, send_leaving(shared_from_this()), asio::detached);
}

namespace {

// A check of an earlier admission (not fresh) of an instance that runs or waits for something
// else: it needs no telling. A signal would stay in the inbox of one admitted at its enqueue,
// which never waits for it.
asio::awaitable<bool> needs_no_telling(std::shared_ptr<engine::impl> self, const admission& a) {
    if (a.fresh) co_return false;
    auto snap = co_await self->st.load(a.instance, false);
    if (!snap || is_final(snap->status)) co_return false;  // told: it answers as it is
    co_return std::ranges::none_of(snap->waits,
                                   [](const signal_wait& w) { return w.path == admission_path; });
}

// Tells one admitted instance, and settles its entry by what the telling found.
asio::awaitable<void> tell_admitted(std::shared_ptr<engine::impl> self, const queue& q,
                                    admission a) {
    if (co_await needs_no_telling(self, a)) {
        if (!holds_slots(q)) co_await self->st.leave_queue(q.name, a.instance);
        co_return;
    }
    auto d = co_await self->deliver_taken(a.instance, std::string(admission_path),
                                          nlohmann::json::object(), "admitted");
    switch (d.result) {
        case delivery::outcome::stored:
        case delivery::outcome::duplicate:
            if (!holds_slots(q)) co_await self->st.leave_queue(q.name, a.instance);
            break;
        case delivery::outcome::finished:
            co_await self->st.leave_queue(q.name, a.instance);
            break;
        case delivery::outcome::no_instance:
            if (self->clock.now() - a.enqueued_at > start_grace) {
                self->log.warn("queue {}: {} was enqueued but never started; its entry is dropped",
                               q.name, a.instance);
                co_await self->st.leave_queue(q.name, a.instance);
            } else if (a.fresh) {
                auto& clock = self->clock;
                auto ex = self->ex;
                co_await clock.async_wait_until(ex, clock.now() + start_lag, asio::use_awaitable);
                a.fresh = false;
                if (!self->stopped) co_await tell_admitted(self, q, std::move(a));
            }
            break;
    }
}

struct round_outcome {
    bool busy = false;               // it admitted or checked something
    std::optional<time_point> next;  // when to look again; nullopt: when poked
};

asio::awaitable<round_outcome> admit_round(std::shared_ptr<engine::impl> self, queue q) {
    auto now = self->clock.now();
    auto round = co_await self->st.admit(q, now, admit_batch, recheck, self->opt.worker);
    for (auto& a : round.admitted) co_await tell_admitted(self, q, std::move(a));
    round_outcome out{!round.admitted.empty(), round.next};
    auto look = now + (q.worker_concurrency > 0 ? spread_look
                       : round.waiting          ? idle_look
                                                : empty_look);
    out.next = std::min(out.next.value_or(look), look);
    co_return out;
}

// Sleeps until `until` (nullopt: until poked), or until poked.
asio::awaitable<void> rest(engine::impl& self, std::optional<time_point> until) {
    auto& d = *self.admitting;
    if (d.poked) co_return;
    auto sig = std::make_shared<asio::cancellation_signal>();
    d.sleeping = sig;
    error_code ec;
    auto token =
        asio::bind_cancellation_slot(sig->slot(), asio::redirect_error(asio::use_awaitable, ec));
    if (until) {
        co_await self.clock.async_wait_until(self.ex, *until, token);
    } else {
        asio::steady_timer forever(self.ex, asio::steady_timer::time_point::max());
        co_await forever.async_wait(token);
    }
    d.sleeping.reset();
}

asio::awaitable<void> admission_loop(std::shared_ptr<engine::impl> self) {
    while (!self->stopped) {
        self->admitting->poked = false;
        if (!self->watch->open()) {  // the wake loop opens the store, then pokes the queues
            co_await rest(*self, std::nullopt);
            continue;
        }
        bool busy = false;
        std::optional<time_point> next;
        auto sooner = [&next](time_point t) { next = std::min(next.value_or(t), t); };
        std::vector<queue> all;
        for (const auto& [_, q] : self->queues) all.push_back(q);
        std::optional<std::string> failed;
        for (auto& q : all) {
            try {
                auto r = co_await admit_round(self, q);
                busy = busy || r.busy;
                if (r.next) sooner(*r.next);
            } catch (const std::exception& e) {
                failed = fmt::format("queue {}: {}", q.name, e.what());
                sooner(self->clock.now() + outage_retry);
            }
            if (self->stopped) co_return;
        }
        auto& outage = self->admitting->outage;
        if (failed && !outage) self->log.warn("admitting: {}; retrying", *failed);
        if (!failed && outage) self->log.info("admitting again");
        outage = std::move(failed);
        if (busy) {
            co_await asio::post(self->ex, asio::use_awaitable);  // let the admitted run
            continue;
        }
        co_await rest(*self, next);
    }
}

}  // namespace

void engine::impl::start_admitting(std::shared_ptr<impl> first) {
    if (first->admitting) return;
    first->admitting = std::make_shared<admissions>();
    asio::co_spawn(first->ex, admission_loop(first), [first](std::exception_ptr e) {
        first->admitting.reset();
        if (!e) return;
        try {
            std::rethrow_exception(e);
        } catch (const std::exception& x) {
            first->log.error("process engine admission loop: {}", x.what());
        }
    });
}

void engine::add_queue(const queue& q) {
    check(q);
    if (parts_.front()->queues.contains(q.name))
        throw std::invalid_argument("queue '" + q.name + "' is registered already");
    for (auto& part : parts_) part->queues.emplace(q.name, q);
    parts_.front()->poke_queues();
}

std::vector<queue> engine::queues() const {
    std::vector<queue> out;
    for (const auto& [_, q] : parts_.front()->queues) out.push_back(q);
    return out;
}

namespace {

asio::awaitable<std::string> enqueue_here(std::shared_ptr<engine::impl> self, std::string queue,
                                          enqueue_options options, std::string definition,
                                          std::string id, nlohmann::json params,
                                          std::string parent) {
    if (!self->queues.contains(queue))
        throw std::invalid_argument("queue '" + queue +
                                    "' is not registered with this engine (engine::add_queue)");
    check(options);
    if (!self->definitions.contains(definition))
        throw std::invalid_argument("process definition " + definition +
                                    " is not registered with this engine");
    self->refuse_while_in_question();
    if (const auto* old = self->worker_below(store_level_queues))
        throw keel::unavailable_error(fmt::format(
            "queue {}: worker {} runs a Keel build before queues, which would run {} unqueued; "
            "enqueue again once it has left",
            queue, old->worker, id));
    // The line first: a worker that dies before the start leaves an entry the admission
    // drops after start_grace; the other order would leave an instance queued forever.
    auto caller = std::move(options.trace);
    queue_entry entry{id, std::move(options), self->clock.now(), self->opt.worker};
    const auto& q = self->queues.at(queue);
    auto got = co_await self->st.enqueue(q, std::move(entry), recheck);
    if (got.instance != id) co_return got.instance;  // deduplicated
    engine_parts::queued_start starting{queue, got.admitted};
    co_await engine_parts::start_queued(self, std::move(definition), id, std::move(params),
                                        std::move(starting), std::move(parent), std::move(caller));
    if (!got.admitted)
        self->poke_queues();
    else if (!holds_slots(q))
        co_await self->st.leave_queue(std::move(queue), id);  // nothing to hold: only counted
    co_return id;
}

asio::awaitable<std::optional<queue_state>> describe_here(std::shared_ptr<engine::impl> self,
                                                          std::string name, std::size_t top) {
    if (!self->queues.contains(name)) co_return std::nullopt;
    co_return co_await self->st.describe_queue(std::move(name), top);
}

}  // namespace

asio::awaitable<std::string> engine::impl::enqueue(std::string queue, enqueue_options options,
                                                   std::string definition, std::string id,
                                                   nlohmann::json params, std::string parent) {
    auto owner = owner_of(id);
    return on_engine(std::move(owner), &enqueue_here, std::move(queue), std::move(options),
                     std::move(definition), std::move(id), std::move(params), std::move(parent));
}

asio::awaitable<std::string> engine::enqueue_instance(std::string queue, enqueue_options options,
                                                      std::string definition, std::string id,
                                                      nlohmann::json params) {
    return parts_.front()->enqueue(std::move(queue), std::move(options), std::move(definition),
                                   std::move(id), std::move(params), std::string());
}

asio::awaitable<std::optional<queue_state>> engine::describe_queue(std::string name,
                                                                   std::size_t top) {
    return on_engine(parts_.front(), &describe_here, std::move(name), top);
}

}  // namespace keel::process
