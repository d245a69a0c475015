#pragma once

// What an instance's next commit carries besides its journal entries, and whether it may
// be left to the commit after it. Three optimisations sit here, in one place:
//
//   - deferred waits: a commit that would write only what the handler consumed (signals,
//     timers that fired, the races they decided) is left to the next one;
//   - consecutive entity steps: the commit of an entity step (context::update) waits for
//     the next when the steps about to start are entity steps too;
//   - carried documents: a step's document writes wait for the commit of its entry, and
//     writes of one document by consecutive steps become one.
//
// docs/architecture.md ("A resume is written with the step that follows it", "Consecutive
// entity steps in one commit") says why each is safe. Internal to keel_process.

#include <cstddef>
#include <cstdint>
#include <keel/process/detail/runtime.hpp>
#include <keel/process/store.hpp>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace keel::process::engine_parts {

// Whether the engine executes an operation of this kind (run steps and lock acquisitions).
bool executes(op_kind kind) noexcept;

// One instance's commit plan, from one commit to the next.
class commit_plan {
  public:
    // A step began; an entity step (run_body::changes_entities_only) may share a commit.
    void step_started(std::uint64_t seq, bool entity_step);
    // A step's document writes, kept until the commit of its entry carries them.
    void step_finished(std::uint64_t seq, std::vector<detail::staged_document> writes);
    // A step whose result the handler did not take (it lost a race): nothing to carry.
    void step_discarded(std::uint64_t seq) { staged_.erase(seq); }

    // Whether the commit due now (the instance going on as `status`, waiting for `waits`)
    // may be left to its next one. `stored` and `stored_waits` are what the store says;
    // `conflicted` is true while the instance's last commits met a changed document, and
    // then each entity step commits on its own.
    bool may_wait(detail::runtime& rt, instance_status status,
                  const std::vector<signal_wait>& waits, instance_status stored,
                  const std::vector<signal_wait>& stored_waits, bool conflicted);

    // Moves into `req` the document writes of the steps whose entries it commits, and
    // returns them (to tell their documents how the commit ended: documents_written).
    // `chained` is false when a later step did not start from what the one before it
    // wrote (it read the entity from elsewhere): then the commit must not be made.
    std::vector<detail::staged_document> carry(commit_request& req, bool& chained);

    // The commit was acknowledged: what was left to it is written.
    void committed();
    // The instance is dropped: its kept writes were never committed.
    void forget();

  private:
    std::size_t deferred_ = 0;  // buffered entries left to the next commit (0: none)
    std::map<std::uint64_t, std::vector<detail::staged_document>> staged_;  // by seq
    std::set<std::uint64_t> entity_steps_;  // started since the last commit
};

// Tells each written document's cache how its commit ended: the new text, or forget it.
void documents_written(std::vector<detail::staged_document>& staged, bool written);

// Per engine part: the instances whose last commits found a document changed or locked,
// with how many times in a row. The next try comes after a delay that doubles with each;
// from the max_in_a_row-th on, the step writes the document itself.
class document_conflicts {
  public:
    static constexpr int max_in_a_row = 4;

    int note(const std::string& id) { return ++in_a_row_[id]; }  // returns the count
    void clear(const std::string& id) {
        if (!in_a_row_.empty()) in_a_row_.erase(id);
    }
    bool any(const std::string& id) const { return in_a_row_.contains(id); }
    // Whether the instance's steps write their documents themselves now.
    bool steps_write_themselves(const std::string& id) const {
        auto it = in_a_row_.find(id);
        return it != in_a_row_.end() && it->second >= max_in_a_row;
    }

  private:
    std::unordered_map<std::string, int> in_a_row_;
};

}  // namespace keel::process::engine_parts
