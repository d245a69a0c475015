// Queues: checking declarations, the marker an enqueued instance's journal starts with, the
// in-memory accounting (queue_book, the rules of lua/queue.lua), and the store's defaults.

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <keel/process/detail/queue_book.hpp>
#include <keel/process/queue.hpp>
#include <keel/process/store.hpp>
#include <stdexcept>

namespace keel::process {

namespace {

constexpr std::string_view marker_prefix = "keel.queue:";
constexpr std::string_view admitted_prefix = "keel.queue.admitted:";

const journal_entry* marker_of(const std::vector<journal_entry>& journal) {
    if (journal.empty()) return nullptr;
    const auto& first = journal.front();
    if (first.seq != 0 || first.kind != op_kind::patch) return nullptr;
    if (!first.name.starts_with(marker_prefix) && !first.name.starts_with(admitted_prefix))
        return nullptr;
    return &first;
}

bool plain(char c, std::string_view also) {
    return std::isalnum(static_cast<unsigned char>(c)) || also.find(c) != std::string_view::npos;
}

}  // namespace

void check(const queue& q) {
    auto bad = [&](std::string_view field, std::string_view why) {
        throw std::invalid_argument(fmt::format("queue '{}': {} {}", q.name, field, why));
    };
    if (q.name.empty() || q.name.size() > 64 ||
        !std::ranges::all_of(q.name, [](char c) { return plain(c, "-_."); }))
        bad("name", "must be 1 to 64 letters, digits, '-', '_' or '.'");
    if (q.rate > 0 && q.per < std::chrono::milliseconds(1)) bad("per", "must be 1 ms or more");
    if (q.concurrency > 0 && q.partition_concurrency > q.concurrency)
        bad("partition_concurrency", "must not exceed concurrency");
    if (q.concurrency > 0 && q.worker_concurrency > q.concurrency)
        bad("worker_concurrency", "must not exceed concurrency");
}

void check(const enqueue_options& o) {
    if (o.partition.size() > 128 ||
        !std::ranges::all_of(o.partition, [](char c) { return plain(c, "-_.:@"); }))
        throw std::invalid_argument(
            "enqueue: partition must be at most 128 letters, digits, '-', '_', '.', ':' or '@', "
            "got \"" +
            o.partition + "\"");
    if (o.priority < -1000 || o.priority > 1000)
        throw std::invalid_argument(
            fmt::format("enqueue: priority must be from -1000 to 1000, got {}", o.priority));
    if (o.dedup.size() > 256)
        throw std::invalid_argument("enqueue: dedup must be at most 256 bytes");
}

std::string queue_marker(std::string_view queue, bool admitted_at_enqueue) {
    return std::string(admitted_at_enqueue ? admitted_prefix : marker_prefix) + std::string(queue);
}

std::optional<std::string> queue_of(const std::vector<journal_entry>& journal) {
    const auto* m = marker_of(journal);
    if (!m) return std::nullopt;
    auto prefix = m->name.starts_with(admitted_prefix) ? admitted_prefix : marker_prefix;
    return m->name.substr(prefix.size());
}

bool admitted_at_enqueue(const std::vector<journal_entry>& journal) {
    const auto* m = marker_of(journal);
    return m && m->name.starts_with(admitted_prefix);
}

bool waits_for_admission(const instance_snapshot& s) {
    return s.status == instance_status::suspended && s.journal.size() == 1 && queue_of(s.journal) &&
           !admitted_at_enqueue(s.journal);
}

index_status index_status_of(const instance_snapshot& s) {
    return waits_for_admission(s) ? index_status::queued : index_status_of(s.status, s.parked);
}

// ---- the store's defaults: a store without queues -------------------------------------

namespace {
[[noreturn]] void no_queues() {
    throw std::logic_error("this process store keeps no queues");
}
}  // namespace

asio::awaitable<enqueued> instance_store::enqueue(queue, queue_entry, duration) {
    no_queues();
    co_return enqueued{};
}
asio::awaitable<admission_round> instance_store::admit(queue, time_point, std::size_t, duration,
                                                       std::string) {
    no_queues();
    co_return admission_round{};
}
asio::awaitable<void> instance_store::leave_queue(std::string, std::vector<std::string>) {
    no_queues();
    co_return;
}
asio::awaitable<queue_state> instance_store::describe_queue(std::string, std::size_t) {
    no_queues();
    co_return queue_state{};
}

// ---- in memory ------------------------------------------------------------------------

namespace detail {

enqueued queue_book::enqueue(const queue& q, queue_entry e, duration recheck) {
    if (entries_.contains(e.instance)) return {e.instance, false, false};
    if (!e.options.dedup.empty()) {
        auto [it, fresh] = dedup_.try_emplace(e.options.dedup, e.instance);
        if (!fresh) return {it->second, false, false};
    }
    auto seq = ++seq_;
    const auto& p = e.options.partition;
    if (ring_.empty() && has_room(q, p, e.at) && worker_has_room(q, e.worker)) {
        // Nobody waits: admitted at once.
        entries_[e.instance] = entry{e.options, e.at, seq, false, {}};
        admit_entry(q, p, e.instance, e.at, recheck, e.worker);
        return {std::move(e.instance), true, true};
    }
    auto& waiting = waiting_[p];
    waiting.emplace(e.options.priority, seq, e.instance);
    if (waiting.size() == 1) ring_.push_back(p);
    entries_[e.instance] = entry{e.options, e.at, seq, false, {}};
    return {std::move(e.instance), true, false};
}

bool queue_book::has_room(const queue& q, const std::string& partition, time_point now) {
    if (q.concurrency > 0 && checks_.size() >= q.concurrency) return false;
    if (q.partition_concurrency > 0) {
        auto held = held_.find(partition);
        if (held != held_.end() && held->second >= q.partition_concurrency) return false;
    }
    if (q.rate > 0) {
        while (!window_.empty() && window_.front() <= now - q.per) window_.pop_front();
        if (window_.size() >= q.rate) return false;
    }
    return true;
}

void queue_book::admit_entry(const queue& q, const std::string& partition,
                             const std::string& instance, time_point now, duration recheck,
                             const std::string& worker) {
    checks_[instance] = now + recheck;
    ++held_[partition];
    if (q.rate > 0) window_.push_back(now);
    auto& e = entries_.at(instance);
    e.admitted = true;
    if (q.worker_concurrency > 0 && !worker.empty()) {
        e.worker = worker;
        ++by_worker_[worker];
    }
}

bool queue_book::worker_has_room(const queue& q, const std::string& worker) const {
    if (q.worker_concurrency == 0 || worker.empty()) return true;
    auto it = by_worker_.find(worker);
    return it == by_worker_.end() || it->second < q.worker_concurrency;
}

admission_round queue_book::admit(const queue& q, time_point now, std::size_t max, duration recheck,
                                  const std::string& worker) {
    admission_round round;
    auto& out = round.admitted;
    bool rate_bound = false;
    // Checks due, by time then instance (as the sorted set orders them).
    std::vector<std::pair<time_point, std::string>> due;
    for (const auto& [id, at] : checks_)
        if (at <= now) due.emplace_back(at, id);
    std::ranges::sort(due);
    for (auto& [at, id] : due) {
        if (out.size() >= max) break;
        checks_[id] = now + recheck;
        auto it = entries_.find(id);
        out.push_back({id, it == entries_.end() ? time_point{} : it->second.at, false});
    }
    while (out.size() < max) {
        if (q.concurrency > 0 && checks_.size() >= q.concurrency) break;
        if (!worker_has_room(q, worker)) break;
        if (q.rate > 0) {
            while (!window_.empty() && window_.front() <= now - q.per) window_.pop_front();
            if (window_.size() >= q.rate) {
                rate_bound = true;
                break;
            }
        }
        std::optional<std::string> picked;
        for (std::size_t i = 0, n = ring_.size(); i < n; ++i) {
            auto p = ring_.front();
            ring_.pop_front();
            ring_.push_back(p);
            auto held = held_.find(p);
            if (q.partition_concurrency == 0 || held == held_.end() ||
                held->second < q.partition_concurrency) {
                picked = std::move(p);
                break;
            }
        }
        if (!picked) break;
        auto& waiting = waiting_[*picked];
        auto head = waiting.begin();
        auto id = std::get<2>(*head);
        waiting.erase(head);
        if (waiting.empty()) {
            waiting_.erase(*picked);
            ring_.pop_back();  // the partition just picked went to the back
        }
        admit_entry(q, *picked, id, now, recheck, worker);
        out.push_back({id, entries_.at(id).at, true});
    }
    round.waiting = !ring_.empty();
    for (const auto& [id, at] : checks_)
        if (!round.next || at < *round.next) round.next = at;
    if (rate_bound && round.waiting) {
        auto free_at = window_.front() + q.per;
        if (!round.next || free_at < *round.next) round.next = free_at;
    }
    return round;
}

void queue_book::leave(const std::string& instance) {
    auto it = entries_.find(instance);
    if (it == entries_.end()) return;
    const auto& e = it->second;
    const auto& p = e.options.partition;
    if (checks_.erase(instance) > 0) {
        if (auto h = held_.find(p); h != held_.end() && --h->second == 0) held_.erase(h);
        if (auto w = by_worker_.find(e.worker); w != by_worker_.end() && --w->second == 0)
            by_worker_.erase(w);
    } else if (auto w = waiting_.find(p); w != waiting_.end()) {
        w->second.erase({e.options.priority, e.seq, instance});
        if (w->second.empty()) {
            waiting_.erase(w);
            std::erase(ring_, p);
        }
    }
    if (auto d = dedup_.find(e.options.dedup); d != dedup_.end() && d->second == instance)
        dedup_.erase(d);
    entries_.erase(it);
}

queue_state queue_book::describe(std::size_t top) const {
    std::set<std::string, std::less<>> names;
    for (const auto& [p, line] : waiting_) names.insert(p);
    for (const auto& [p, n] : held_) names.insert(p);
    queue_state out;
    out.admitted = checks_.size();
    for (const auto& p : names) {
        auto w = waiting_.find(p);
        auto h = held_.find(p);
        std::uint64_t waiting = w == waiting_.end() ? 0 : w->second.size();
        out.waiting += waiting;
        if (out.partitions.size() < top)
            out.partitions.push_back({p, waiting, h == held_.end() ? 0 : h->second});
    }
    out.more_partitions = names.size() > top;
    return out;
}

}  // namespace detail

}  // namespace keel::process
