#pragma once

// The admin API's JSON answers as text for people: the instance list, one instance, a
// journal and the statistics. Pure functions of the JSON and `now` (for relative times),
// tolerant of missing fields, every line within 100 columns except the values of
// `show`'s key: value block, which are printed whole when they are text.

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "format.hpp"

namespace keel::cli {

// The seven statuses, in the order the stats table shows them.
inline constexpr std::string_view statuses[] = {"running", "suspended", "queued",   "parked",
                                                "failed",  "completed", "cancelled"};

// `instances`: the "instances" array of GET /admin/instances.
std::string render_instances(const nlohmann::json& instances, time_point now);
// The line after a page that is not the last: how to ask for the next one.
std::string render_more_hint(std::string_view cursor);
// GET /admin/instances/<id>: a key: value block, then waits, timers, inbox and retries.
std::string render_instance(const nlohmann::json& instance, time_point now);
// `entries`: the journal entries, every page merged.
std::string render_journal(const nlohmann::json& entries, time_point now);
// GET /admin/stats: a row per definition, a column per status, and a total row.
std::string render_stats(const nlohmann::json& stats);
// `workers`: the "workers" array of GET /admin/workers; a row per worker and definition.
std::string render_workers(const nlohmann::json& workers, time_point now);
// `schedules`: the "schedules" array of GET /admin/schedules; a row per schedule.
std::string render_schedules(const nlohmann::json& schedules, time_point now);
// GET /admin/queues's list, and one queue with its partitions (GET /admin/queues/<name>).
std::string render_queues(const nlohmann::json& queues);
std::string render_queue(const nlohmann::json& queue);

}  // namespace keel::cli
