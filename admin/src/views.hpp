#pragma once

// How the admin API writes what the store knows as JSON, and reads times from queries.
// Internal to keel::admin.

#include <keel/framework/clock.hpp>
#include <keel/process/child.hpp>
#include <keel/process/engine.hpp>
#include <keel/process/store.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace keel::admin::detail {

// RFC 3339 in UTC with milliseconds: "2026-11-23T10:00:00.123Z"; null for the zero time.
nlohmann::json time_json(time_point t);
// {"id", "path", "key", "payload", "at"}: a signal in an inbox.
nlohmann::json inbox_entry_json(const process::inbox_entry& e);

// An RFC 3339 time ("2026-11-23T10:00:00Z", "2026-11-23T11:00:00.5+01:00") or a duration
// back from `now` ("15m", "3d"); nullopt when it is neither.
std::optional<time_point> parse_time(std::string_view text, time_point now);

nlohmann::json summary_json(const process::instance_summary& s);
// A schedule as its process published it (process::schedule_definition), with its name and
// "deleted" when its process has ended.
nlohmann::json schedule_json(const process::instance_snapshot& s);
// A child in its parent's view: the summary with its parent-close policy ("cancel", "abandon").
nlohmann::json child_json(const process::instance_summary& s, process::parent_close on_close);
nlohmann::json snapshot_json(const process::instance_snapshot& s, std::uint64_t journal_length);
// A queue's declaration with its depth and admitted instances (GET /admin/queues).
nlohmann::json queue_json(const process::queue& q, const process::queue_state& s);
// Its partitions' waiting and admitted (GET /admin/queues/<name>).
nlohmann::json partitions_json(const process::queue_state& s);
nlohmann::json entry_json(const process::journal_entry& e, std::uint64_t position);
nlohmann::json counts_json(const process::instance_counts& counts);
// [{worker, versions: {definition: version}, seen, expires}], by worker.
nlohmann::json workers_json(const std::vector<process::worker_record>& workers);

// The steps in flight, by seq: the failed attempts the store holds (from whichever worker
// runs the instance), overlaid with what this worker's engine knows first hand (`here`).
// Each: seq, name, attempt (the latest known: in progress on this worker, else the latest
// that failed), last_error, failed_at (of that failure), worker.
nlohmann::json steps_json(const std::vector<process::step_attempt>& stored,
                          const std::vector<process::step_progress>& here,
                          const std::string& this_worker);

}  // namespace keel::admin::detail
