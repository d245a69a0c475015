#pragma once

/// @file
/// Child processes: a handler starts another process durably and waits for its outcome.
///
/// @code
///   auto invoice = co_await ctx.start(invoicing, ref<subscription>(id), period);  // child<R>
///   ...                                                     // the child runs meanwhile
///   invoice_total t = co_await ctx.join(invoice);            // its result, or child_failed
///   auto r = co_await ctx.call(invoicing, ref<subscription>(id), period);  // start and join
/// @endcode
///
/// The child's id is its path (definition::instance_id), as for any start, so starting it
/// again (a replay, a crash before the parent's commit) finds it instead of starting a second
/// one. The child tells its parent its outcome before it records it: a signal in the
/// parent's inbox (path child_path(id)), delivered once (its idempotency key is the child's
/// id). join() waits for that signal like any other, so it races with timers and signals:
/// ctx.race(ctx.join(invoice), ctx.timer(1h)).
///
/// What becomes of a child when its parent ends (completes, fails or is cancelled) is the
/// child's parent_close: cancel (the default) cancels it if it is unfinished, and so its own
/// children; abandon leaves it running. A parked child leaves its parent waiting.

#include <keel/process/errors.hpp>
#include <keel/process/store.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace keel::process {

/// What becomes of a child process when its parent ends (completes, fails or is cancelled).
enum class parent_close : std::uint8_t {
    cancel,   ///< an unfinished child is cancelled when its parent ends
    abandon,  ///< the child lives on
};

/// How context::start starts a child. Every field is trivially destructible, so that
/// child_options{...} may be written inside a co_await (g++ 12, docs/architecture.md,
/// "Toolchain traps").
struct child_options {
    parent_close on_parent_close = parent_close::cancel;  ///< when the parent ends

    /// Started as a process of its own: no parent recorded, nothing told, never closed, and
    /// not to be joined (a join would wait for ever). Still started exactly once.
    bool detached = false;
    /// Started on this queue (engine::add_queue; keel/process/queue.hpp): queued until the
    /// queue admits it, as engine::enqueue, with this partition and priority (copied at the
    /// start). A child takes no dedup id: its id is its path. Null: started at once.
    const queue* on_queue = nullptr;
    /// With on_queue: the partition it waits in (enqueue_options::partition); empty: the
    /// queue's default one. Only viewed: start() copies it.
    std::string_view partition;
    /// With on_queue: its priority in the partition (enqueue_options::priority).
    std::int32_t priority = 0;
};
static_assert(std::is_trivially_destructible_v<child_options>);

/// A started child process whose result is an R: what ctx.join and ctx.race take. A value.
template <class R>
class child {
  public:
    using result_type = R;  ///< what join() returns
    /// No child: a placeholder to assign a started one to.
    child() = default;
    /// The child whose instance id is `id`.
    explicit child(std::string id) : id_(std::move(id)) {}
    /// The child's instance id (its path).
    const std::string& id() const noexcept { return id_; }

  private:
    std::string id_;
};

/// Thrown into a parent that joins a child that failed or was cancelled.
class child_failed : public std::runtime_error {
  public:
    /// Child `child` ended with `status` (failed or cancelled) and `error`; what() names the
    /// child and says how it ended.
    child_failed(std::string child, instance_status status, std::string error);
    /// The child's instance id.
    const std::string& child_id() const noexcept { return child_; }
    /// How it ended: failed or cancelled.
    instance_status status() const noexcept { return status_; }
    /// The error the child failed with ("cancelled" for a cancelled one).
    const std::string& error() const noexcept { return error_; }

  private:
    std::string child_;
    instance_status status_;
    std::string error_;
};

/// The path of the signal a child sends its parent when it ends: `/keel/child/<child id>`.
std::string child_path(std::string_view child_id);

/// The signal's payload: {"status": "completed", "result": ...} or {"status": "failed" |
/// "cancelled", "error": "..."}.
nlohmann::json child_outcome(instance_status status, const std::optional<nlohmann::json>& result,
                             const std::optional<std::string>& error);

namespace detail {

// The result in a child's outcome signal, as an R; child_failed when it did not complete.
nlohmann::json completed_result(const std::string& child, const nlohmann::json& outcome);

template <class R>
R child_result(const std::string& child, const nlohmann::json& outcome) {
    auto result = completed_result(child, outcome);
    if constexpr (std::is_void_v<R>)
        return;
    else
        return result.template get<R>();
}

}  // namespace detail

}  // namespace keel::process
