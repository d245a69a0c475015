#include <algorithm>
#include <keel/framework/clock.hpp>
#include <keel/process/detail/runtime.hpp>

namespace keel::process::detail {

runtime::runtime(std::string id, keel::clock& clock, std::vector<journal_entry> journal,
                 const std::vector<timer_record>& timers, const std::vector<signal_wait>& waits,
                 std::uint64_t seed)
    : id_(std::move(id)), clock_(clock), journal_(std::move(journal)), rng_(seed) {
    committed_ = journal_.size();
    for (const auto& t : timers) {
        armed_.emplace(t.seq, t.due);
        expected_.emplace(t.seq, expected_op{op_kind::timer, t.name});
    }
    for (const auto& w : waits) expected_.emplace(w.seq, expected_op{op_kind::signal, w.path});
}

runtime::~runtime() {
    tearing_down_ = true;
    ready_.clear();
    ready_head_ = 0;
    root_alive_ = false;
    root_ = durable<nlohmann::json>();
    for (auto h : graveyard_) h.destroy();
    graveyard_.clear();
}

runtime::check runtime::replay(std::uint64_t seq, op_kind kind, std::string_view name,
                               op_sink& sink) {
    if (park_) return check::parked;
    if (cursor_ >= journal_.size()) {
        if (auto it = expected_.find(seq);
            it != expected_.end() && (it->second.kind != kind || it->second.name != name)) {
            park("journal mismatch at the frontier: the instance waits for " +
                 describe(it->second.kind, it->second.name) + " (operation #" +
                 std::to_string(seq) + ") but the handler now performs " + describe(kind, name) +
                 " (operation #" + std::to_string(seq) + ")");
            return check::parked;
        }
        return check::wait;
    }
    const journal_entry& e = journal_[cursor_];
    if (e.seq != seq) return check::wait;
    if (e.kind != kind || e.name != name) {
        mismatch(e, kind, name);
        return check::parked;
    }
    if (ready_head_ < ready_.size()) return check::wait;
    std::string reason;
    if (!sink.accept(e, reason)) {
        park("journal mismatch at entry " + std::to_string(cursor_) + ": the recorded value of " +
             describe(e.kind, e.name) + " does not decode: " + reason);
        return check::parked;
    }
    advance();
    return check::ready;
}

void runtime::advance() noexcept {
    ++cursor_;
}

void runtime::verify_frontier() {
    if (expected_.empty() || park_) return;
    for (const auto& [seq, op] : expected_) {
        auto it = pending_.find(seq);
        if (it == pending_.end() || it->second.kind != op.kind || it->second.name != op.name) {
            park("journal mismatch at the frontier: the instance waits for " +
                 describe(op.kind, op.name) + " (operation #" + std::to_string(seq) +
                 ") but the handler does not wait for it any more");
            return;
        }
    }
    expected_.clear();
}

void runtime::trim() noexcept {
    if (cursor_ == journal_.size() && cursor_ > 0) {
        journal_ = {};
        cursor_ = 0;
    }
}

pending_op& runtime::add_pending(std::uint64_t seq, op_kind kind, std::string name, op_sink& sink) {
    auto [it, _] = pending_.try_emplace(seq);
    pending_op& op = it->second;
    op.seq = seq;
    op.kind = kind;
    op.name = std::move(name);
    op.branch = current_branch_;
    op.sink = &sink;
    return op;
}

void runtime::set_waiter(std::uint64_t seq, std::coroutine_handle<> h) noexcept {
    auto it = pending_.find(seq);
    if (it != pending_.end()) it->second.waiter = h;
}

void runtime::cancel_op(std::uint64_t seq) noexcept {
    auto it = pending_.find(seq);
    if (it != pending_.end()) remove_pending(it);
}

void runtime::remove_pending(std::map<std::uint64_t, pending_op>::iterator it) noexcept {
    pending_op& op = it->second;
    if (!tearing_down_) {
        if (op.kind == op_kind::timer && op.armed) {
            buffered_.cancel_timers.push_back(op.seq);
            armed_.erase(op.seq);
        }
        if (op.cancel) op.cancel->emit(asio::cancellation_type::terminal);
    }
    pending_.erase(it);
}

std::pair<time_point, bool> runtime::timer_due(std::uint64_t seq, duration d) const {
    if (auto it = armed_.find(seq); it != armed_.end()) return {it->second, true};
    return {clock_.now() + d, false};
}

std::pair<time_point, bool> runtime::timer_due(std::uint64_t seq, time_point at) const {
    if (auto it = armed_.find(seq); it != armed_.end()) return {it->second, true};
    return {at, false};
}

const nlohmann::json* runtime::immediate(std::uint64_t seq, op_kind kind, std::string_view name,
                                         const std::function<nlohmann::json()>& live) {
    if (park_) return nullptr;
    if (cursor_ < journal_.size()) {
        const journal_entry& e = journal_[cursor_];
        if (e.seq != seq || e.kind != kind || e.name != name) {
            mismatch(e, kind, name);
            return nullptr;
        }
        ++cursor_;  // the entry stays alive until trim()
        return &e.value;
    }
    buffered_.entries.push_back(journal_entry{seq, kind, std::string(name), live(), false});
    return &buffered_.entries.back().value;
}

void runtime::mismatch(const journal_entry& recorded, op_kind kind, std::string_view name) {
    park("journal mismatch at entry " + std::to_string(committed_ - journal_.size() + cursor_) +
         ": the journal has " + describe(recorded.kind, recorded.name) + " (operation #" +
         std::to_string(recorded.seq) + ") but the handler now performs " + describe(kind, name) +
         " (operation #" + std::to_string(next_seq_ - 1) + ")");
}

void runtime::park(std::string message) noexcept {
    if (!park_) park_ = park_reason{std::move(message)};
    ready_.clear();
    ready_head_ = 0;
}

void runtime::spawn(branch_node& node) noexcept {
    node.rt = this;
    node.id = next_branch_++;
    node.parent = current_branch_;
    branches_.emplace(node.id, &node);
    node.promise().on_done = &runtime::branch_done;
    node.promise().on_done_arg = &node;
    schedule(node.frame(), node.id);
}

void runtime::branch_done(void* p) noexcept {
    auto* node = static_cast<branch_node*>(p);
    runtime* rt = node->rt;
    rt->branches_.erase(node->id);
    node->done = true;
    if (node->combinator)
        node->combinator->arm_done(node->arm);
    else if (node->joiner)
        rt->schedule(node->joiner, node->joiner_branch);
}

void runtime::collect_subtree(std::uint64_t id, std::vector<std::uint64_t>& out) const {
    out.push_back(id);
    for (std::size_t i = out.size() - 1; i < out.size(); ++i) {
        for (const auto& [child, node] : branches_)
            if (node->parent == out[i]) out.push_back(child);
    }
}

void runtime::cancel_branch(branch_node& node) noexcept {
    if (node.done) return;
    std::vector<std::uint64_t> subtree;
    collect_subtree(node.id, subtree);
    for (auto id : subtree) {
        if (auto it = branches_.find(id); it != branches_.end()) {
            it->second->done = true;
            it->second->cancelled = true;
            branches_.erase(it);
        }
    }
    node.done = true;
    node.cancelled = true;
    for (auto it = pending_.begin(); it != pending_.end();) {
        auto next = std::next(it);
        if (std::find(subtree.begin(), subtree.end(), it->second.branch) != subtree.end())
            remove_pending(it);
        it = next;
    }
    auto frame = node.release_frame();
    if (!frame) return;
    if (runs_in_flight_ > 0 && !tearing_down_)
        graveyard_.push_back(frame);  // a run may still use the frame's locals
    else
        frame.destroy();
}

void runtime::run_finished() noexcept {
    if (--runs_in_flight_ == 0 && !graveyard_.empty()) {
        auto frames = std::move(graveyard_);
        graveyard_.clear();
        for (auto h : frames) h.destroy();
    }
}

void runtime::schedule(std::coroutine_handle<> h, std::uint64_t branch) {
    ready_.push_back(ready_item{h, branch});
}

void runtime::start(durable<nlohmann::json> root) {
    root_ = std::move(root);
    root_.handle().promise().on_done = &runtime::root_done;
    root_.handle().promise().on_done_arg = this;
    root_alive_ = true;
    schedule(root_.handle(), 0);
}

void runtime::root_done(void* self) noexcept {
    auto* rt = static_cast<runtime*>(self);
    rt->root_alive_ = false;
    rt->finished_ = true;
    auto& p = rt->root_.handle().promise();
    if (p.error) {
        try {
            std::rethrow_exception(p.error);
        } catch (restart_requested& r) {
            rt->restart_ = std::move(r.params);
        } catch (const std::exception& e) {
            rt->error_ = e.what();
        } catch (...) {
            rt->error_ = "unknown exception";
        }
    } else {
        rt->result_ = std::move(*p.value);
    }
}

void runtime::run_ready() {
    while (ready_head_ < ready_.size() && !park_) {
        ready_item item = ready_[ready_head_++];
        if (ready_head_ == ready_.size()) {
            ready_.clear();
            ready_head_ = 0;
        }
        bool alive = item.branch == 0 ? root_alive_ : branches_.contains(item.branch);
        if (!alive) continue;
        current_branch_ = item.branch;
        item.handle.resume();
    }
}

void runtime::replay_next() {
    const journal_entry& e = journal_[cursor_];
    if (e.kind == op_kind::relock) {  // recorded at quiescence, so replayed at quiescence
        if (apply_relock(e)) advance();
        return;
    }
    auto it = pending_.find(e.seq);
    if (it == pending_.end()) {
        std::string waits;
        for (const auto& [seq, op] : pending_) {
            if (!waits.empty()) waits += ", ";
            waits += describe(op.kind, op.name) + " (operation #" + std::to_string(seq) + ")";
        }
        park("journal mismatch at entry " + std::to_string(committed_ - journal_.size() + cursor_) +
             ": the journal has " + describe(e.kind, e.name) + " (operation #" +
             std::to_string(e.seq) + ") but the handler " +
             (waits.empty() ? std::string("does not perform it") : "waits for " + waits));
        return;
    }
    if (it->second.kind != e.kind || it->second.name != e.name) {
        auto seq = next_seq_;
        next_seq_ = e.seq + 1;  // name the operation by its own number in the message
        mismatch(e, it->second.kind, it->second.name);
        next_seq_ = seq;
        return;
    }
    complete(it, e);
    if (!park_) advance();
}

void runtime::complete(std::map<std::uint64_t, pending_op>::iterator it, const journal_entry& e) {
    std::string reason;
    op_sink* sink = it->second.sink;
    auto waiter = it->second.waiter;
    auto branch = it->second.branch;
    pending_.erase(it);
    if (!sink->accept(e, reason)) {
        park("the value of " + describe(e.kind, e.name) + " does not decode: " + reason);
        return;
    }
    schedule(waiter, branch);
}

bool runtime::complete_live(journal_entry entry, std::optional<std::uint64_t> consumed) {
    auto it = pending_.find(entry.seq);
    if (it == pending_.end() || park_) return false;
    if (it->second.kind == op_kind::timer && it->second.armed) {
        buffered_.cancel_timers.push_back(entry.seq);
        armed_.erase(entry.seq);
    }
    if (consumed) buffered_.consume.push_back(*consumed);
    buffered_.entries.push_back(std::move(entry));
    complete(it, buffered_.entries.back());
    return true;
}

void runtime::register_lock(std::uint64_t seq, std::shared_ptr<lock_slot> slot, bool live) {
    locks_[seq] = std::move(slot);
    if (!live) relock_due_ = true;
}

void runtime::unregister_lock(std::uint64_t seq) noexcept {
    locks_.erase(seq);
}

std::vector<std::pair<std::uint64_t, std::shared_ptr<lock_slot>>> runtime::held_locks() const {
    return {locks_.begin(), locks_.end()};
}

void runtime::release_locks() noexcept {
    for (auto& [_, slot] : locks_) slot->release();
    if (!locks_.empty()) relock_due_ = true;
}

bool runtime::apply_relock(const journal_entry& e) {
    auto it = locks_.find(e.seq);
    if (it == locks_.end()) {
        park("journal mismatch at entry " + std::to_string(committed_ - journal_.size() + cursor_) +
             ": the journal has " + describe(e.kind, e.name) + " (operation #" +
             std::to_string(e.seq) + ") but the handler holds no such lock");
        return false;
    }
    if (it->second->name() != e.name) {
        park("journal mismatch at entry " + std::to_string(committed_ - journal_.size() + cursor_) +
             ": the journal has " + describe(e.kind, e.name) + " (operation #" +
             std::to_string(e.seq) + ") but the handler holds lock \"" + it->second->name() +
             "\" under that number");
        return false;
    }
    std::string reason;
    if (!it->second->apply(e, reason)) {
        park("the value of " + describe(e.kind, e.name) + " does not decode: " + reason);
        return false;
    }
    return true;
}

bool runtime::relocked(journal_entry entry) {
    if (park_ || !locks_.contains(entry.seq)) return false;
    buffered_.entries.push_back(std::move(entry));
    return apply_relock(buffered_.entries.back());
}

std::vector<signal_wait> runtime::wait_set() const {
    std::vector<signal_wait> waits;
    for (const auto& [seq, op] : pending_)
        if (op.kind == op_kind::signal) waits.push_back(signal_wait{seq, op.name});
    return waits;
}

void runtime::arm_new_timers() {
    for (auto& [seq, op] : pending_) {
        if (op.kind != op_kind::timer || op.armed) continue;
        op.armed = true;
        armed_[seq] = op.due;
        buffered_.add_timers.push_back(timer_record{seq, op.due, op.name});
    }
}

// The patch marker is recorded like an immediate operation, with one difference: where the
// journal shows the old code's operation at this point instead (or the old code waits here),
// the marker takes no operation number, so everything after keeps the numbers the old code
// gave it and the instance replays as it ran.
bool runtime::patched(std::string_view change) {
    if (park_) return false;
    auto seq = next_seq_;
    if (cursor_ < journal_.size()) {
        const journal_entry& e = journal_[cursor_];
        if (e.kind != op_kind::patch || e.name != change || e.seq != seq) return false;
        ++next_seq_;
        ++cursor_;
        return true;
    }
    if (expected_.contains(seq)) return false;
    ++next_seq_;
    buffered_.entries.push_back(
        journal_entry{seq, op_kind::patch, std::string(change), true, false});
    return true;
}

void runtime::deprecate_patch(std::string_view change) {
    if (park_ || cursor_ >= journal_.size()) return;
    const journal_entry& e = journal_[cursor_];
    if (e.kind != op_kind::patch || e.name != change || e.seq != next_seq_) return;
    ++next_seq_;
    ++cursor_;
}

bool runtime::armed_as(const std::vector<timer_record>& timers) const {
    if (timers.size() != armed_.size()) return false;
    return std::all_of(timers.begin(), timers.end(),
                       [this](const timer_record& t) { return armed_.contains(t.seq); });
}

void runtime::publish(std::string name, nlohmann::json value) {
    // Replayed code, or code between the journal's end and the waits the store has: it ran
    // before the instance suspended, whose commit wrote what it published.
    if (replaying() || !expected_.empty()) return;
    for (auto& [n, v] : buffered_.published)
        if (n == name) {
            v = std::move(value);
            return;
        }
    buffered_.published.emplace_back(std::move(name), std::move(value));
}

void runtime::mark_committed() noexcept {
    committed_ += buffered_.entries.size();
    buffered_ = changes{};
}

void runtime::mark_entries_committed(std::size_t n) noexcept {
    auto& entries = buffered_.entries;
    n = std::min(n, entries.size());
    committed_ += n;
    entries.erase(entries.begin(), entries.begin() + static_cast<std::ptrdiff_t>(n));
}

}  // namespace keel::process::detail
