#include "../queued_handler.hpp"
#include "impl.hpp"

namespace keel::process {

using namespace engine_parts;

definition_metrics& engine::impl::metrics_of(const std::string& definition) {
    return metrics.of(definitions.contains(definition) ? definition : "(unknown)");
}

std::shared_ptr<hot_instance> engine::impl::make_hot(instance_snapshot snap, lease_token lease,
                                                     time_point expires) {
    auto in = make_instance(std::move(snap), lease, expires);
    keep_hot(in, phase::held);
    return in;
}

std::shared_ptr<hot_instance> engine::impl::make_instance(instance_snapshot snap, lease_token lease,
                                                          time_point expires,
                                                          queued_start starting) {
    auto in = std::make_shared<hot_instance>();
    auto queued = snap.journal.empty()
                      ? std::move(starting)
                      : queued_start{queue_of(snap.journal).value_or(std::string()),
                                     admitted_at_enqueue(snap.journal)};
    in->queue = queued.queue;
    in->id = snap.id;
    in->definition = snap.definition;
    in->version = snap.version;
    in->parent = std::move(snap.parent);
    auto replayed = snap.journal.size();
    in->exec = std::make_shared<execution>(snap.id, clock, std::move(snap.journal), snap.timers,
                                           snap.waits, rng());
    in->exec->rt.set_engine_calls(calls_for(snap.id));
    in->lease = lease;
    in->lease_expires = expires;
    in->stored = snap.status;
    in->stored_waits = snap.waits;
    in->inbox = std::move(snap.inbox);
    in->log = log.with("instance", snap.id).with("definition", snap.definition);
    if (auto started = trace::parse_traceparent(snap.trace)) in->enter(*started);
    in->metrics = &metrics_of(snap.definition);
    auto def = definitions.find(snap.definition);
    durable<nlohmann::json> root;
    try {
        if (def == definitions.end())
            throw std::runtime_error("unknown process definition " + snap.definition);
        root = in->queue.empty() ? def->second(in->exec->ctx, snap.params)
                                 : detail::admitted_then(in->exec->ctx, in->queue, queued.admitted,
                                                         def->second, std::move(snap.params));
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
    return in;
}

void engine::impl::keep_hot(const std::shared_ptr<hot_instance>& in, phase as) {
    lru.push_front(in->id);
    in->lru = lru.begin();
    hot[in->id] = in;
    move_to(*in, as);
    evict();
    count_hot();
}

void engine::impl::move_to(hot_instance& in, phase to) {
    if (!checked_move(in.state, to))
        log.error("process {}: illegal move from {} to {}", in.id, to_string(in.state),
                  to_string(to));
    if (leased(to) && !leased(in.state))
        leased_ids.insert(in.id);
    else if (!leased(to) && leased(in.state))
        leased_ids.erase(in.id);
    in.state = to;
}

void engine::impl::count_hot() {
    auto before = hot_size.exchange(hot.size(), std::memory_order_relaxed);
    metrics.add_hot(static_cast<std::ptrdiff_t>(hot.size()) - static_cast<std::ptrdiff_t>(before));
}

void engine::impl::drop(std::shared_ptr<hot_instance> in) {
    if (in->dropped()) return;
    move_to(*in, phase::dropped);
    in->exec->rt.detached = true;
    if (auto it = hot.find(in->id); it != hot.end() && it->second == in) hot.erase(it);
    lru.erase(in->lru);
    in->exec.reset();
    in->commits.forget();
    count_hot();
}

void engine::impl::evict() {
    if (hot.size() <= opt.max_hot) return;
    for (auto it = lru.end(); it != lru.begin() && hot.size() > opt.max_hot;) {
        --it;
        auto in = hot.at(*it);
        if (in->state != phase::released || in->exec->rt.runs_in_flight() > 0) continue;
        auto prev = it;
        bool first = it == lru.begin();
        if (!first) --prev;
        drop(in);
        if (first) break;
        it = std::next(prev);
    }
}

}  // namespace keel::process
