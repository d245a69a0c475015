#pragma once

/// @file
/// The journal: what a process instance has done, one entry per completed durable operation,
/// in the order of completion. Replay feeds these entries back to the handler. Plain values,
/// JSON-serialisable (a store keeps them as JSON text).

#include <cstdint>
#include <keel/framework/clock.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace keel::process {

/// What kind of durable operation an entry records. `lock` is ctx.lock (value: the entity as
/// read under the lease, null when absent); `relock` records the re-acquisition of a held lock
/// when the instance resumed after a suspension (seq: the lock operation's; value: the entity
/// read again, or {"message"} with `failed` when the lock could not be taken again).
enum class op_kind : std::uint8_t {
    run,     ///< a step: ctx.run, and the steps built on it (update, http, start, deliver, ...)
    timer,   ///< a durable timer (sleep, timer, timer_at)
    signal,  ///< a signal consumed from the inbox (wait, receive, join)
    race,    ///< which arm of a race won
    any,     ///< which arm of an any succeeded
    now,     ///< ctx.now()
    random,  ///< ctx.random()
    uuid,    ///< ctx.uuid()
    lock,    ///< ctx.lock
    relock,  ///< a held lock taken again when the instance resumed
    patch    ///< a code change this instance runs with (context::patched)
};

/// The kind's name as journaled: "run", "timer", "signal", ...
std::string_view to_string(op_kind kind) noexcept;
/// The kind named `text` (as to_string gives it); nullopt for any other text.
std::optional<op_kind> parse_op_kind(std::string_view text) noexcept;

/// One completed durable operation. `seq` is the operation's number in the order the handler
/// created its operations (deterministic, so replay gives every operation the same number);
/// the entry's position in the journal is the order of completion. `value` is the result
/// (for a signal: {"id", "payload"}; for a race: the winning index); `failed` marks a `run`,
/// `lock` or `relock` whose error was recorded (value is then {"message": ...}).
struct journal_entry {
    std::uint64_t seq = 0;        ///< the operation's number (creation order)
    op_kind kind = op_kind::run;  ///< what kind of operation
    std::string name;             ///< a step's or timer's name, a signal's path
    nlohmann::json value;         ///< the result, or {"message"} when `failed`
    bool failed = false;          ///< the operation's error was recorded
    time_point at{};              ///< when it was committed (for operators; zero when unknown)
    /// A step's (run) first attempt began at `started`, and it took `attempts` attempts
    /// (operators' figures, like `at`; written only when they say more than `at` does).
    time_point started{};
    std::uint32_t attempts = 1;  ///< how many attempts the step took (see `started`)

    /// The same operation with the same outcome; the times and attempts are not compared.
    friend bool operator==(const journal_entry& a, const journal_entry& b) {
        return a.seq == b.seq && a.kind == b.kind && a.name == b.name && a.value == b.value &&
               a.failed == b.failed;
    }
};

/// The entry as a store keeps it: {"seq", "kind", "name", "value"}, with "failed", "at",
/// "started" (milliseconds since the epoch) and "attempts" only when they say something.
void to_json(nlohmann::json& j, const journal_entry& e);
/// Reads an entry that to_json wrote. Throws std::invalid_argument (or nlohmann's exceptions)
/// on an entry that is not one, including a value nested deeper than max_value_depth.
void from_json(const nlohmann::json& j, journal_entry& e);
/// The same, with the value moved out of `j` rather than copied.
void from_json(nlohmann::json&& j, journal_entry& e);

/// Journaled values (step results, signal payloads, entities) nest at most this deep:
/// nlohmann copies, compares and prints values recursively, so a deeper one would overflow a
/// worker's stack each time its instance is loaded. A step whose result nests deeper fails.
inline constexpr std::size_t max_value_depth = 256;
/// How deeply `j` nests (a scalar: 0, `[]`: 1), counted without recursion; stops counting
/// past `limit`.
std::size_t nesting_depth(const nlohmann::json& j, std::size_t limit = max_value_depth + 1);

/// "run \"charge\"": how an operation is named in messages.
std::string describe(op_kind kind, std::string_view name);

/// The lifecycle of an instance. `running`: owned by a worker that is executing it;
/// `suspended`: waiting for a signal or timer, owned by nobody; the other three are final
/// (except a `failed` instance parked by a journal mismatch, which can be resumed).
enum class instance_status : std::uint8_t { running, suspended, completed, failed, cancelled };

/// The status's name: "running", "suspended", "completed", "failed" or "cancelled".
std::string_view to_string(instance_status s) noexcept;
/// The status named `text` (as to_string gives it); nullopt for any other text.
std::optional<instance_status> parse_instance_status(std::string_view text) noexcept;
/// Whether `s` is completed, failed or cancelled (a parked instance is failed, and so final
/// by this test).
bool is_final(instance_status s) noexcept;

/// Thrown into the handler when a `run` step failed for good (its error is in the journal),
/// identically on the first execution and on every replay.
class step_failed : public std::runtime_error {
  public:
    /// Step `step` failed with `message`; what() is `step "<step>" failed: <message>`.
    step_failed(std::string step, const std::string& message)
        : std::runtime_error("step \"" + step + "\" failed: " + message), step_(std::move(step)) {}
    /// The step's name.
    const std::string& step() const noexcept { return step_; }

  private:
    std::string step_;
};

/// Thrown by a `run` function to stop retrying at once: the error is recorded as final.
class terminal_error : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

}  // namespace keel::process
