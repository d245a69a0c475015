#pragma once

// Whether a worker may trust the store it uses (docs/architecture.md, "A store that comes
// back empty"): shared by the engine's parts, kept by part 0's heartbeat. While the store is
// in question the engine starts nothing and claims no work: an empty store in the place of
// the one the worker was using would have every idempotent start begin its flow again.
// Internal to keel_process.

#include <atomic>
#include <mutex>
#include <optional>
#include <string>

namespace keel::process::engine_parts {

class store_watch {
  public:
    enum class state { unknown, trusted, in_question };

    // Whether the engine has opened its store (store::prepare): once, by the first part's
    // wake loop to get there.
    bool open() const { return open_.load(std::memory_order_acquire); }
    void opened() { open_.store(true, std::memory_order_release); }

    // nullopt while the store may be trusted (or before it was first seen); else why not.
    std::optional<std::string> doubt() const {
        std::lock_guard lock(mutex_);
        if (state_ != state::in_question) return std::nullopt;
        return why_;
    }
    state current() const {
        std::lock_guard lock(mutex_);
        return state_;
    }
    std::string known() const {
        std::lock_guard lock(mutex_);
        return known_;
    }
    void trust(std::string id) {
        std::lock_guard lock(mutex_);
        state_ = state::trusted;
        known_ = std::move(id);
        why_.clear();
    }
    void question(std::string why) {
        std::lock_guard lock(mutex_);
        state_ = state::in_question;
        why_ = std::move(why);
    }

  private:
    std::atomic<bool> open_{false};
    mutable std::mutex mutex_;
    state state_ = state::unknown;
    std::string known_;  // the id of the store this worker has been using
    std::string why_;
};

}  // namespace keel::process::engine_parts
