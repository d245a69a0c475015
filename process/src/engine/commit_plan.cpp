#include "commit_plan.hpp"

#include <algorithm>

namespace keel::process::engine_parts {

bool executes(op_kind kind) noexcept {
    return kind == op_kind::run || kind == op_kind::lock;
}

namespace {

// Whether every step about to start is an entity step (and there is one).
bool only_entity_steps_to_start(detail::runtime& rt) {
    bool any = false;
    for (const auto& [_, op] : rt.pending()) {
        if (!executes(op.kind) || op.started) continue;
        if (!op.body || !op.body->changes_entities_only()) return false;
        any = true;
    }
    return any;
}

}  // namespace

void commit_plan::step_started(std::uint64_t seq, bool entity_step) {
    if (entity_step) entity_steps_.insert(seq);
}

void commit_plan::step_finished(std::uint64_t seq, std::vector<detail::staged_document> writes) {
    if (!writes.empty()) staged_[seq] = std::move(writes);
}

// The commit may wait when the store already says the instance runs, and all it would write
// is what the handler consumed, which the inbox and the timers keep until a commit removes
// them, so a worker that takes over replays the same choice. Nothing else waits: the entries
// a step's effect may depend on (a step's result, now(), random(), relocks) and new timers
// are written before the step runs, and a wait set is written when the instance waits while
// it runs. Entity steps wait too when the steps about to start are entity steps as well.
bool commit_plan::may_wait(detail::runtime& rt, instance_status status,
                           const std::vector<signal_wait>& waits, instance_status stored,
                           const std::vector<signal_wait>& stored_waits, bool conflicted) {
    // Stored suspended, it was taken to resume: the store says so until this commit.
    bool stored_in_flight =
        stored == instance_status::running || stored == instance_status::suspended;
    if (status != instance_status::running || !stored_in_flight) return false;
    if (!waits.empty() && waits != stored_waits) return false;
    const auto& entries = rt.buffered().entries;
    if (!rt.buffered().add_timers.empty()) return false;
    if (entries.size() == deferred_) return true;  // nothing new since the steps started
    // A step in flight could have won a race against what was consumed.
    if (rt.runs_in_flight() > 0) return false;
    bool entity_steps_next = only_entity_steps_to_start(rt) && !conflicted;
    bool waits_ok = std::all_of(entries.begin(), entries.end(), [&](const journal_entry& e) {
        if (e.kind == op_kind::signal || e.kind == op_kind::timer || e.kind == op_kind::race ||
            e.kind == op_kind::any)
            return true;
        return entity_steps_next && e.kind == op_kind::run && !e.failed &&
               entity_steps_.contains(e.seq);
    });
    if (waits_ok) deferred_ = entries.size();
    return waits_ok;
}

std::vector<detail::staged_document> commit_plan::carry(commit_request& req, bool& chained) {
    chained = true;
    std::vector<detail::staged_document> carried;
    if (staged_.empty()) return carried;
    for (const auto& e : req.entries) {
        auto it = staged_.find(e.seq);
        if (it == staged_.end()) continue;
        for (auto& d : it->second) {
            auto same = std::find_if(req.documents.begin(), req.documents.end(),
                                     [&](const document_write& w) { return w.key == d.write.key; });
            if (same == req.documents.end()) {
                req.documents.push_back(d.write);
            } else if (d.write.expected == same->text) {
                same->text = d.write.text;  // the first one's check, the last one's text
            } else {
                chained = false;
            }
            carried.push_back(std::move(d));
        }
        staged_.erase(it);
    }
    return carried;
}

void commit_plan::committed() {
    deferred_ = 0;
    entity_steps_.clear();
}

void commit_plan::forget() {
    for (auto& [_, staged] : staged_) documents_written(staged, false);
    staged_.clear();
}

void documents_written(std::vector<detail::staged_document>& staged, bool written) {
    for (auto& d : staged) {
        std::optional<std::string> now;
        if (written) now = std::move(d.write.text);
        d.docs->written_elsewhere(d.model, d.id, std::move(now));
    }
}

}  // namespace keel::process::engine_parts
