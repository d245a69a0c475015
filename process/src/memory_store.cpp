#include <algorithm>
#include <keel/process/memory_store.hpp>
#include <map>
#include <ranges>
#include <set>
#include <stdexcept>

#include "listing.hpp"

namespace keel::process {

struct memory_store::record {
    instance_snapshot snap;
    std::map<std::uint64_t, timer_record> timers;
    std::unordered_map<std::string, std::uint64_t> keys;  // idempotency key -> inbox id
    std::uint64_t next_inbox = 1;
    std::uint64_t epoch = 0;
    std::optional<time_point> wake;
    std::vector<std::string> subscriptions;
    std::vector<std::vector<journal_entry>> earlier_journals;  // before each operator retry
    index_status listed = index_status::running;
    bool queued = false;  // waiting for its queue's admission (as the meta's `queued` in Redis)
    std::map<std::uint64_t, step_attempt> attempts;  // failed attempts of steps in flight
};

namespace {

bool final_for_writes(const instance_snapshot& s) {
    return s.status == instance_status::completed || s.status == instance_status::cancelled ||
           (s.status == instance_status::failed && !s.parked);
}

std::optional<time_point> wake_of(const instance_snapshot& s,
                                  const std::map<std::uint64_t, timer_record>& timers) {
    if (is_final(s.status)) return std::nullopt;
    if (s.status == instance_status::running) return s.lease ? s.lease_expires : time_point::min();
    std::optional<time_point> w;
    for (const auto& [_, t] : timers)
        if (!w || t.due < *w) w = t.due;
    for (const auto& e : s.inbox) {
        bool awaited = std::any_of(s.waits.begin(), s.waits.end(),
                                   [&](const signal_wait& sw) { return sw.path == e.path; });
        if (awaited && (!w || e.at < *w)) w = e.at;
    }
    // Leased (taken to resume): not before the lease ends, and then even with nothing to
    // resume it (its holder failed before the commit that would have said so).
    if (s.lease && (!w || s.lease_expires > *w)) w = s.lease_expires;
    return w;
}

}  // namespace

memory_store::memory_store() = default;
memory_store::~memory_store() = default;

std::int64_t memory_store::created_ms(const record& r) {
    return std::chrono::floor<std::chrono::milliseconds>(r.snap.created.time_since_epoch()).count();
}

void memory_store::relist(record& r) {
    auto now = r.queued && r.snap.status == instance_status::suspended
                   ? index_status::queued
                   : index_status_of(r.snap.status, r.snap.parked);
    if (now == r.listed) return;
    --counts_[r.snap.definition][static_cast<std::size_t>(r.listed)];
    ++counts_[r.snap.definition][static_cast<std::size_t>(now)];
    r.listed = now;
}

// As the Redis store's (prelude.lua, resumed_and_running): a suspended instance taken to
// resume whose step outlasts half a lease or fails an attempt is marked running.
void memory_store::resumed_and_running(record& r, time_point now) {
    if (r.snap.status != instance_status::suspended) return;
    r.snap.status = instance_status::running;
    r.snap.changed = now;
    r.queued = false;
    relist(r);
}

void memory_store::reindex(record& r) {
    if (r.wake) wake_index_.erase({*r.wake, r.snap.id});
    r.snap.timers.clear();
    r.wake = wake_of(r.snap, r.timers);
    if (r.wake) wake_index_.insert({*r.wake, r.snap.id});
}

start_result memory_store::start_now(const start_request& req) {
    std::lock_guard lock(mutex_);
    if (auto it = records_.find(req.id); it != records_.end())
        return start_result{false, {}, it->second->snap.status};
    auto r = std::make_unique<record>();
    r->snap.id = req.id;
    r->snap.definition = req.definition;
    r->snap.version = req.version;
    r->snap.parent = req.parent;
    r->snap.trace = req.trace;
    r->snap.params = req.params;
    r->snap.status = instance_status::running;
    r->epoch = 1;
    r->snap.lease = lease_token{req.worker, 1};
    r->snap.lease_expires = req.now + req.lease_ttl;
    if (req.suspended) {  // as the commit that would follow the start
        r->snap.status = instance_status::suspended;
        r->snap.lease.reset();
        r->snap.journal = req.suspended->entries;
        for (const auto& t : req.suspended->timers) r->timers.insert_or_assign(t.seq, t);
        r->snap.waits = req.suspended->waits;
        r->queued = req.suspended->queued;
        r->listed = r->queued ? index_status::queued : index_status::suspended;
    } else {
        r->snap.journal = req.entries;
    }
    r->subscriptions = req.subscriptions;
    r->snap.created = req.now;
    r->snap.changed = req.now;
    for (const auto& key : req.subscriptions) subscribers_[key].insert(req.id);
    auto& rec = *r;
    records_.emplace(req.id, std::move(r));
    reindex(rec);
    ++counts_[rec.snap.definition][static_cast<std::size_t>(rec.listed)];
    by_created_.emplace(created_ms(rec), rec.snap.id);
    return start_result{true, rec.snap.lease.value_or(lease_token{}), rec.snap.status};
}

std::optional<instance_snapshot> memory_store::load_now(const std::string& id, bool journal) const {
    std::lock_guard lock(mutex_);
    auto it = records_.find(id);
    if (it == records_.end()) return std::nullopt;
    return snapshot_of(*it->second, journal);
}

instance_snapshot memory_store::snapshot_of(const record& r, bool journal) const {
    instance_snapshot s;
    s.id = r.snap.id;
    s.definition = r.snap.definition;
    s.version = r.snap.version;
    s.parent = r.snap.parent;
    s.trace = r.snap.trace;
    s.params = r.snap.params;
    s.status = r.snap.status;
    s.parked = r.snap.parked;
    s.result = r.snap.result;
    s.error = r.snap.error;
    if (journal) s.journal = r.snap.journal;
    s.inbox = r.snap.inbox;
    for (const auto& [_, t] : r.timers) s.timers.push_back(t);
    s.waits = r.snap.waits;
    s.lease = r.snap.lease;
    s.lease_expires = r.snap.lease_expires;
    s.created = r.snap.created;
    s.changed = r.snap.changed;
    s.retries = r.snap.retries;
    s.removed = r.snap.removed;
    s.left = r.snap.left;
    s.published = r.snap.published;
    if (s.status == instance_status::running) {
        for (const auto& [seq, a] : r.attempts)
            if (seq >= r.snap.journal.size()) s.attempts.push_back(a);
    }
    return s;
}

expected<commit_result, store_error> memory_store::commit_now(const commit_request& req) {
    std::lock_guard lock(mutex_);
    auto it = records_.find(req.instance);
    if (it == records_.end()) return unexpected(store_error::not_found);
    record& r = *it->second;
    instance_snapshot& s = r.snap;
    // Validate everything first.
    if (final_for_writes(s)) return unexpected(store_error::finished);
    if (!s.lease || *s.lease != req.lease) return unexpected(store_error::fenced);
    if (s.journal.size() != req.expected_length) return unexpected(store_error::conflict);
    for (auto id : req.consume) {
        bool present = std::any_of(s.inbox.begin(), s.inbox.end(),
                                   [id](const inbox_entry& e) { return e.id == id; });
        if (!present) return unexpected(store_error::inbox_missing);
    }
    // Then write.
    commits_.push_back(commit_record{s.id, req.lease, r.epoch, s.lease ? s.lease->worker : "",
                                     req.restart_params ? 0 : req.entries.size()});
    if (!req.restart_params)
        s.journal.insert(s.journal.end(), req.entries.begin(), req.entries.end());
    for (auto id : req.consume) {
        auto e = std::find_if(s.inbox.begin(), s.inbox.end(),
                              [id](const inbox_entry& x) { return x.id == id; });
        // An id listed twice was taken at its first mention: the signal is consumed once, as
        // commit.lua's HDEL does it.
        if (e == s.inbox.end()) continue;
        consumed_.push_back(consume_record{s.id, id, e->key});
        s.inbox.erase(e);
    }
    for (auto seq : req.cancel_timers) r.timers.erase(seq);
    for (const auto& t : req.add_timers) r.timers[t.seq] = t;
    if (req.waits) s.waits = *req.waits;
    if (req.restart_params) {  // continue as new, as commit.lua does it
        s.journal.clear();
        r.timers.clear();
        r.attempts.clear();
        s.waits.clear();
        s.params = *req.restart_params;
    }
    if (req.status) s.status = *req.status;
    if (req.status && is_final(*req.status) && !req.parked) {
        r.timers.clear();  // a final instance waits for nothing
        s.waits.clear();
        unsubscribe(r);
    }
    s.parked = req.parked;
    if (req.result) s.result = req.result;
    if (req.error) s.error = req.error;
    if (req.status && *req.status != instance_status::failed) s.error.reset();
    if (req.release) s.lease.reset();
    for (const auto& [name, value] : req.published) s.published.insert_or_assign(name, value);
    s.changed = req.now;
    r.queued = false;  // admitted (or cancelled) by now
    reindex(r);
    relist(r);
    // signal_waiting says the instance is to be run again at once, which a final one (parked
    // included) never is (wake_of: not due): false for it, as prelude.lua's wake_of answers.
    commit_result result;
    if (req.waits && !is_final(s.status))
        for (const auto& e : s.inbox)
            for (const auto& w : s.waits)
                if (w.path == e.path) result.signal_waiting = true;
    return result;
}

delivery memory_store::deliver_now(const std::string& id, inbox_entry signal) {
    std::lock_guard lock(mutex_);
    auto it = records_.find(id);
    if (it == records_.end()) return delivery{delivery::outcome::no_instance, false, 0};
    return deliver_locked(*it->second, std::move(signal));
}

delivery memory_store::deliver_locked(record& r, inbox_entry signal) {
    if (final_for_writes(r.snap)) return delivery{delivery::outcome::finished, false, 0};
    if (!signal.key.empty()) {
        if (auto k = r.keys.find(signal.key); k != r.keys.end())
            return delivery{delivery::outcome::duplicate, false, k->second};
    }
    signal.id = r.next_inbox++;
    if (!signal.key.empty()) r.keys.emplace(signal.key, signal.id);
    bool waiting = std::any_of(r.snap.waits.begin(), r.snap.waits.end(),
                               [&](const signal_wait& w) { return w.path == signal.path; });
    auto given = signal.id;
    r.snap.inbox.push_back(std::move(signal));
    reindex(r);
    return delivery{delivery::outcome::stored, waiting, given};
}

void memory_store::unsubscribe(record& r) {
    for (const auto& key : r.subscriptions) {
        auto it = subscribers_.find(key);
        if (it == subscribers_.end()) continue;
        it->second.erase(r.snap.id);
        if (it->second.empty()) subscribers_.erase(it);
    }
}

fan_out_result memory_store::fan_out_now(const fan_out_request& req) {
    std::lock_guard lock(mutex_);
    const auto& key = req.signal.key;
    if (!key.empty()) {
        auto memo = fan_outs_.find(key);
        if (memo != fan_outs_.end() && memo->second.expires > req.signal.at)
            return fan_out_result{memo->second.reached, true, {}};
    }
    std::set<std::string> targets;
    for (const auto& sub : req.subscriptions)
        if (auto it = subscribers_.find(sub); it != subscribers_.end())
            targets.insert(it->second.begin(), it->second.end());
    fan_out_result out;
    for (const auto& id : targets) {
        auto it = records_.find(id);
        if (it == records_.end()) continue;
        auto d = deliver_locked(*it->second, req.signal);
        if (d.result == delivery::outcome::finished) continue;
        ++out.reached;
        if (d.result != delivery::outcome::stored) continue;
        out.delivered.emplace_back(id, d);
        const auto& s = it->second->snap;
        if (req.take && d.waiting && s.status == instance_status::suspended && !s.lease) {
            const auto& t = *req.take;
            auto taken = take_locked(id, t.worker, t.now, t.ttl, t.refused, s.journal.size());
            if (taken) out.taken.emplace_back(id, std::move(*taken));  // else declined: as it was
        }
    }
    if (!key.empty()) {
        if (fan_outs_.size() >= 4096)
            std::erase_if(fan_outs_,
                          [&](const auto& m) { return m.second.expires <= req.signal.at; });
        fan_outs_[key] = fan_out_memo{out.reached, req.signal.at + req.window};
    }
    return out;
}

expected<lease_grant, store_error> memory_store::acquire_now(const std::string& id,
                                                             const std::string& worker,
                                                             time_point now, duration ttl,
                                                             const version_refusals& refused) {
    std::lock_guard lock(mutex_);
    return acquire_locked(id, worker, now, ttl, refused);
}

expected<store::taken, store_error> memory_store::take_now(
    const std::string& id, const std::string& worker, time_point now, duration ttl,
    const version_refusals& refused, std::optional<std::uint64_t> known_length) {
    std::lock_guard lock(mutex_);
    return take_locked(id, worker, now, ttl, refused, known_length);
}

expected<store::taken, store_error> memory_store::take_locked(
    const std::string& id, const std::string& worker, time_point now, duration ttl,
    const version_refusals& refused, std::optional<std::uint64_t> known_length) {
    auto grant = acquire_locked(id, worker, now, ttl, refused);
    if (!grant) return unexpected(grant.error());
    record& r = *records_.at(id);
    bool with_journal = !known_length || *known_length != grant->journal_length;
    taken out{*grant, snapshot_of(r, with_journal), with_journal};
    out.resumed = r.snap.status == instance_status::suspended;  // and stays so until a commit
    return out;
}

expected<lease_grant, store_error> memory_store::acquire_locked(const std::string& id,
                                                                const std::string& worker,
                                                                time_point now, duration ttl,
                                                                const version_refusals& refused) {
    auto it = records_.find(id);
    if (it == records_.end()) return unexpected(store_error::not_found);
    record& r = *it->second;
    instance_snapshot& s = r.snap;
    if (final_for_writes(s)) return unexpected(store_error::finished);
    if (refuses(refused, s.definition, s.version)) return unexpected(store_error::declined);
    if (s.lease && s.lease->worker != worker && s.lease_expires > now)
        return unexpected(store_error::busy);
    bool taken_over = s.lease && s.lease->worker != worker;
    if (!s.lease || s.lease->worker != worker) s.lease = lease_token{worker, ++r.epoch};
    s.lease_expires = now + ttl;
    reindex(r);
    return lease_grant{*s.lease, s.journal.size(), s.status, s.lease_expires, taken_over};
}

bool memory_store::renew_now(const std::string& id, const lease_token& lease, time_point now,
                             duration ttl) {
    std::lock_guard lock(mutex_);
    auto it = records_.find(id);
    if (it == records_.end()) return false;
    record& r = *it->second;
    if (!r.snap.lease || *r.snap.lease != lease) return false;
    r.snap.lease_expires = now + ttl;
    resumed_and_running(r, now);
    reindex(r);
    return true;
}

bool memory_store::note_attempt_now(const std::string& id, const lease_token& lease,
                                    step_attempt failed) {
    std::lock_guard lock(mutex_);
    auto it = records_.find(id);
    if (it == records_.end()) return false;
    record& r = *it->second;
    bool in_flight = r.snap.status == instance_status::running ||
                     r.snap.status == instance_status::suspended;  // taken to resume
    if (!in_flight || r.snap.lease != lease) return false;
    bool resumed = r.snap.status == instance_status::suspended;
    resumed_and_running(r, failed.at);
    // Running now: due when its lease ends, no longer at its timers or signals (as renew).
    if (resumed) reindex(r);
    auto seq = failed.seq;
    r.attempts.insert_or_assign(seq, std::move(failed));
    return true;
}

void memory_store::release_now(const std::string& id, const lease_token& lease,
                               std::optional<departure> why) {
    std::lock_guard lock(mutex_);
    auto it = records_.find(id);
    if (it == records_.end()) return;
    record& r = *it->second;
    if (!r.snap.lease || *r.snap.lease != lease) return;
    r.snap.lease.reset();
    if (why) r.snap.left = std::move(why);
    reindex(r);
}

std::vector<std::string> memory_store::due_now(time_point now, std::size_t limit,
                                               const version_refusals& refused) const {
    std::lock_guard lock(mutex_);
    std::vector<std::string> ids;
    for (auto it = wake_index_.begin(); it != wake_index_.end() && ids.size() < limit; ++it) {
        if (it->first > now) break;
        const auto& s = records_.at(it->second)->snap;
        if (!refuses(refused, s.definition, s.version)) ids.push_back(it->second);
    }
    return ids;
}

std::vector<worker_record> memory_store::announce_now(worker_record self) {
    std::lock_guard lock(mutex_);
    auto seen = self.seen;
    workers_.insert_or_assign(self.worker, std::move(self));
    std::erase_if(workers_, [&](const auto& w) { return w.second.expires < seen; });
    std::vector<worker_record> live;
    for (const auto& [_, w] : workers_) live.push_back(w);
    return live;
}

void memory_store::withdraw_now(const std::string& worker) {
    std::lock_guard lock(mutex_);
    workers_.erase(worker);
}

std::vector<worker_record> memory_store::workers_now(time_point now) const {
    std::lock_guard lock(mutex_);
    std::vector<worker_record> live;
    for (const auto& [_, w] : workers_)
        if (w.expires >= now) live.push_back(w);
    return live;
}

std::optional<time_point> memory_store::next_due_now() const {
    std::lock_guard lock(mutex_);
    if (wake_index_.empty()) return std::nullopt;
    return wake_index_.begin()->first;
}

std::vector<memory_store::commit_record> memory_store::commits() const {
    std::lock_guard lock(mutex_);
    return commits_;
}

std::vector<memory_store::consume_record> memory_store::consumed() const {
    std::lock_guard lock(mutex_);
    return consumed_;
}

std::size_t memory_store::size() const {
    std::lock_guard lock(mutex_);
    return records_.size();
}

class memory_store::saved_instance {
  public:
    saved_instance(const record& r, bool subscribed, std::size_t commits, std::size_t consumed)
        : rec(r), subscribed(subscribed), commits(commits), consumed(consumed) {}
    record rec;
    bool subscribed;
    std::size_t commits;  // the history's length at the save
    std::size_t consumed;
};

std::shared_ptr<const memory_store::saved_instance> memory_store::save(
    const std::string& id) const {
    std::lock_guard lock(mutex_);
    auto it = records_.find(id);
    if (it == records_.end()) return nullptr;
    const record& r = *it->second;
    bool subscribed = std::any_of(r.subscriptions.begin(), r.subscriptions.end(), [&](auto& key) {
        auto s = subscribers_.find(key);
        return s != subscribers_.end() && s->second.contains(id);
    });
    return std::make_shared<saved_instance>(r, subscribed, commits_.size(), consumed_.size());
}

void memory_store::restore(const saved_instance& saved) {
    std::lock_guard lock(mutex_);
    const auto& id = saved.rec.snap.id;
    auto& slot = records_.at(id);
    if (slot->wake) wake_index_.erase({*slot->wake, id});
    --counts_[slot->snap.definition][static_cast<std::size_t>(slot->listed)];
    unsubscribe(*slot);
    slot = std::make_unique<record>(saved.rec);
    record& r = *slot;
    if (r.wake) wake_index_.insert({*r.wake, id});
    ++counts_[r.snap.definition][static_cast<std::size_t>(r.listed)];
    if (saved.subscribed)
        for (const auto& key : r.subscriptions) subscribers_[key].insert(id);
    auto lost = [&](const auto& x) { return x.instance == id; };
    commits_.erase(std::remove_if(commits_.begin() + static_cast<std::ptrdiff_t>(saved.commits),
                                  commits_.end(), lost),
                   commits_.end());
    consumed_.erase(std::remove_if(consumed_.begin() + static_cast<std::ptrdiff_t>(saved.consumed),
                                   consumed_.end(), lost),
                    consumed_.end());
}

asio::awaitable<start_result> memory_store::start(start_request req) {
    if (!req.documents.empty())  // writes_documents() says no: a caller's bug, not data to drop
        throw std::logic_error("memory_store: a start cannot write entity documents here");
    co_return start_now(req);
}
asio::awaitable<std::optional<instance_snapshot>> memory_store::load(std::string id, bool journal) {
    co_return load_now(id, journal);
}
asio::awaitable<expected<commit_result, store_error>> memory_store::commit(commit_request req) {
    if (!req.documents.empty())  // writes_documents() says no: a caller's bug, not data to drop
        throw std::logic_error("memory_store: a commit cannot write entity documents here");
    co_return commit_now(req);
}
asio::awaitable<fan_out_result> memory_store::fan_out(fan_out_request req) {
    if (!req.documents.empty())  // writes_documents() says no: a caller's bug, not data to drop
        throw std::logic_error("memory_store: a fan-out cannot write entity documents here");
    co_return fan_out_now(req);
}

asio::awaitable<delivery> memory_store::deliver(std::string id, inbox_entry signal) {
    co_return deliver_now(id, std::move(signal));
}
asio::awaitable<void> memory_store::put_answer(std::string id, std::string request,
                                               nlohmann::json answer, duration) {
    std::lock_guard lock(mutex_);
    answers_.insert_or_assign({std::move(id), std::move(request)}, std::move(answer));
    co_return;
}
asio::awaitable<permit_answer> memory_store::acquire_permit(limit l, std::string holder,
                                                            time_point now) {
    std::lock_guard lock(mutex_);
    auto& s = limits_[l.name];
    constexpr auto ms = std::chrono::milliseconds(1);
    if (l.concurrency > 0) {
        std::erase_if(s.holders, [now](const auto& h) { return h.second <= now; });
        if (!s.holders.contains(holder) && s.holders.size() >= l.concurrency) {
            auto first = std::ranges::min(s.holders | std::views::values);
            co_return permit_answer{false, std::clamp<duration>(first - now, ms, 20 * ms)};
        }
    }
    if (l.rate > 0) {
        while (!s.grants.empty() && s.grants.front() <= now - l.per) s.grants.pop_front();
        if (s.grants.size() >= l.rate)
            co_return permit_answer{false, std::max<duration>(s.grants.front() + l.per - now, ms)};
        s.grants.push_back(now);
    }
    if (l.concurrency > 0) s.holders[holder] = now + l.max_hold;
    co_return permit_answer{true, {}};
}
asio::awaitable<void> memory_store::release_permit(std::string limit, std::string holder) {
    std::lock_guard lock(mutex_);
    if (auto it = limits_.find(limit); it != limits_.end()) it->second.holders.erase(holder);
    co_return;
}
asio::awaitable<enqueued> memory_store::enqueue(queue q, queue_entry entry, duration recheck) {
    std::lock_guard lock(mutex_);
    co_return queues_[q.name].enqueue(q, std::move(entry), recheck);
}
asio::awaitable<admission_round> memory_store::admit(queue q, time_point now, std::size_t max,
                                                     duration recheck, std::string worker) {
    std::lock_guard lock(mutex_);
    co_return queues_[q.name].admit(q, now, max, recheck, worker);
}
asio::awaitable<void> memory_store::leave_queue(std::string queue,
                                                std::vector<std::string> instances) {
    std::lock_guard lock(mutex_);
    if (auto it = queues_.find(queue); it != queues_.end())
        for (const auto& id : instances) it->second.leave(id);
    co_return;
}
asio::awaitable<queue_state> memory_store::describe_queue(std::string queue, std::size_t top) {
    std::lock_guard lock(mutex_);
    auto it = queues_.find(queue);
    co_return it == queues_.end() ? queue_state{} : it->second.describe(top);
}
asio::awaitable<std::optional<nlohmann::json>> memory_store::answer(std::string id,
                                                                    std::string request) {
    std::lock_guard lock(mutex_);
    auto it = answers_.find({id, request});
    if (it == answers_.end()) co_return std::nullopt;
    co_return it->second;
}
asio::awaitable<expected<lease_grant, store_error>> memory_store::acquire(
    std::string id, std::string worker, time_point now, duration ttl, version_refusals refused) {
    co_return acquire_now(id, worker, now, ttl, refused);
}
asio::awaitable<expected<store::taken, store_error>> memory_store::take(
    std::string id, std::string worker, time_point now, duration ttl, version_refusals refused,
    std::optional<std::uint64_t> known_length) {
    co_return take_now(id, worker, now, ttl, refused, known_length);
}
asio::awaitable<bool> memory_store::note_attempt(std::string id, lease_token lease,
                                                 step_attempt failed) {
    co_return note_attempt_now(id, lease, std::move(failed));
}
asio::awaitable<bool> memory_store::renew(std::string id, lease_token lease, time_point now,
                                          duration ttl) {
    co_return renew_now(id, lease, now, ttl);
}
asio::awaitable<void> memory_store::release(std::string id, lease_token lease) {
    release_now(id, lease);
    co_return;
}
asio::awaitable<void> memory_store::leave(std::string id, lease_token lease, departure why) {
    release_now(id, lease, std::move(why));
    co_return;
}
asio::awaitable<std::vector<std::string>> memory_store::due(time_point now, std::size_t limit,
                                                            version_refusals refused) {
    co_return due_now(now, limit, refused);
}
asio::awaitable<std::vector<worker_record>> memory_store::announce(worker_record self) {
    co_return announce_now(std::move(self));
}
asio::awaitable<void> memory_store::withdraw(std::string worker) {
    withdraw_now(worker);
    co_return;
}
asio::awaitable<std::vector<worker_record>> memory_store::workers(time_point now) {
    co_return workers_now(now);
}
asio::awaitable<std::optional<time_point>> memory_store::next_due() {
    co_return next_due_now();
}

expected<void, store_error> memory_store::rewind_now(const rewind_request& req) {
    std::lock_guard lock(mutex_);
    auto it = records_.find(req.instance);
    if (it == records_.end()) return unexpected(store_error::not_found);
    record& r = *it->second;
    instance_snapshot& s = r.snap;
    if (!is_final(s.status)) return unexpected(store_error::wrong_state);
    if (s.journal.size() != req.expected_length) return unexpected(store_error::conflict);
    if (req.keep > s.journal.size()) return unexpected(store_error::out_of_range);
    if (s.lease && s.lease_expires > req.now) return unexpected(store_error::busy);
    s.retries.push_back(retry_record{req.keep, req.now, s.journal.size(), req.left_out});
    r.earlier_journals.push_back(s.journal);
    s.journal.resize(req.keep);
    r.attempts.clear();
    for (const auto& e : req.restore) {
        s.inbox.push_back(e);
        r.next_inbox = std::max(r.next_inbox, e.id + 1);
    }
    std::sort(s.inbox.begin(), s.inbox.end(),
              [](const inbox_entry& a, const inbox_entry& b) { return a.id < b.id; });
    if (!s.parked) {
        for (const auto& key : r.subscriptions) subscribers_[key].insert(s.id);
    }
    r.timers.clear();
    s.waits.clear();
    s.status = instance_status::running;
    s.parked = false;
    s.error.reset();
    s.result.reset();
    s.lease.reset();
    s.changed = req.now;
    reindex(r);
    relist(r);
    return {};
}

expected<inbox_entry, store_error> memory_store::remove_signal_now(
    const remove_signal_request& req) {
    std::lock_guard lock(mutex_);
    auto it = records_.find(req.instance);
    if (it == records_.end()) return unexpected(store_error::not_found);
    record& r = *it->second;
    instance_snapshot& s = r.snap;
    if (s.status == instance_status::running) return unexpected(store_error::wrong_state);
    if (s.lease && s.lease_expires > req.now) return unexpected(store_error::busy);
    auto e = std::find_if(s.inbox.begin(), s.inbox.end(),
                          [&](const inbox_entry& x) { return x.id == req.inbox_id; });
    if (e == s.inbox.end()) return unexpected(store_error::inbox_missing);
    inbox_entry removed = std::move(*e);
    s.inbox.erase(e);
    s.removed.push_back(removed_signal{removed, req.now});
    s.changed = req.now;
    reindex(r);
    return removed;
}

list_page memory_store::list_now(const list_query& query) const {
    std::lock_guard lock(mutex_);
    auto limit = std::clamp<std::size_t>(query.limit, 1, 1000);
    auto ms = [](time_point t) {
        return std::chrono::ceil<std::chrono::milliseconds>(t.time_since_epoch()).count();
    };
    std::optional<detail::list_position> cursor;
    if (!query.cursor.empty()) {
        cursor = detail::parse_cursor(query.cursor);
        if (!cursor) throw std::invalid_argument("not a listing cursor: " + query.cursor);
    }
    list_page page;
    for (auto it = by_created_.rbegin(); it != by_created_.rend(); ++it) {
        const auto& [created, id] = *it;
        if (cursor && !detail::lists_before(cursor->created_ms, cursor->id, created, id)) continue;
        if (query.until && created >= ms(*query.until)) continue;
        if (query.since && created < ms(*query.since)) break;
        if (!id.starts_with(query.prefix)) continue;
        const record& r = *records_.at(id);
        if (query.definition && r.snap.definition != *query.definition) continue;
        if (query.status && r.listed != *query.status) continue;
        if (page.instances.size() == limit) {
            const auto& last = page.instances.back();
            page.next = detail::format_cursor(created_ms(*records_.at(last.id)), last.id);
            break;
        }
        page.instances.push_back(
            instance_summary{id, r.snap.definition, r.listed, r.snap.created, r.snap.changed});
    }
    return page;
}

instance_counts memory_store::counts_now() const {
    std::lock_guard lock(mutex_);
    return counts_;
}

std::optional<journal_page> memory_store::read_journal_now(const std::string& id, std::size_t retry,
                                                           std::uint64_t offset,
                                                           std::size_t limit) const {
    std::lock_guard lock(mutex_);
    auto it = records_.find(id);
    if (it == records_.end()) return std::nullopt;
    const record& r = *it->second;
    if (retry > r.earlier_journals.size()) return std::nullopt;
    const auto& journal = retry == 0 ? r.snap.journal : r.earlier_journals[retry - 1];
    journal_page page;
    page.total = journal.size();
    for (auto i = offset; i < journal.size() && page.entries.size() < limit; ++i)
        page.entries.push_back(journal[i]);
    return page;
}

asio::awaitable<expected<void, store_error>> memory_store::rewind(rewind_request req) {
    co_return rewind_now(req);
}
asio::awaitable<expected<inbox_entry, store_error>> memory_store::remove_signal(
    remove_signal_request req) {
    co_return remove_signal_now(req);
}
asio::awaitable<list_page> memory_store::list(list_query query) {
    co_return list_now(query);
}
asio::awaitable<instance_counts> memory_store::counts() {
    co_return counts_now();
}
asio::awaitable<std::optional<journal_page>> memory_store::read_journal(std::string id,
                                                                        std::size_t retry,
                                                                        std::uint64_t offset,
                                                                        std::size_t limit) {
    co_return read_journal_now(id, retry, offset, limit);
}

}  // namespace keel::process
