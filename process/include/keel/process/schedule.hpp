#pragma once

/// @file
/// Schedules: recurring process starts on a calendar (a cron expression in a time zone).
///
/// @code
///   durable<report> nightly_report(context& ctx, std::string region, std::string tick);
///   inline constexpr auto reporting = define<nightly_report>("/report/:region/:tick");
///
///   keel::process::schedule_options eu{                  // named: g++ 12, see engine.hpp
///       .name = "report-eu", .cron = "0 3 * * *", .zone = "Europe/Berlin"};
///   co_await eng.schedule(eu, reporting, std::string("eu"));
/// @endcode
///
/// The scheduled definition takes the tick as its last parameter: the tick's time as
/// "20261129T020000Z" (UTC, to the second), so each tick's instance has an id of its own
/// ("report/eu/20261129T020000Z") and a tick starts once however many workers run.
///
/// A schedule is itself a durable process (`keel/schedule/<name>`, definition
/// "/keel/schedule/:name") that sleeps until the next tick, starts the tick's instance as an
/// abandoned child and watches it end: it survives restarts like any process, one worker runs
/// it at a time, and the admin API lists it with the others. Declaring a schedule again with
/// another calendar or policy changes the running one; eng.pause_schedule(name),
/// resume_schedule, trigger_schedule (a tick now) and delete_schedule act on it at run time.
///
/// Overlap (a tick falls while the previous tick's instance still runs): skip the tick (the
/// default), buffer_one (start it when the previous one ends; should another tick fall
/// meanwhile, it takes the buffered one's place, which is skipped), allow_all, or
/// cancel_previous (cancel the running one, then start the tick's).
/// Downtime: ticks missed while no worker ran the schedule start when it runs again if they
/// are within catch_up_window of now (all in order, or only the latest); older ones are
/// skipped, and eng.backfill_schedule(name, from, to) runs them on request. Jitter spreads a
/// fleet's starts: each tick's instance starts up to `jitter` after the tick (an offset fixed
/// per schedule and tick), while its id and tick parameter keep the calendar's time.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <keel/framework/clock.hpp>
#include <string>

namespace keel::process {

/// What a tick does when the previous tick's instance still runs: `skip` it; `buffer_one`:
/// start it when the running one ends (a later tick meanwhile takes its place, and it is
/// skipped); `allow_all`: start it anyway, detached, so instances may run side by side;
/// `cancel_previous`: cancel the running instance, then start the tick's.
enum class overlap_policy : std::uint8_t { skip, buffer_one, allow_all, cancel_previous };

/// A schedule's declaration (engine::schedule): its calendar and policies.
struct schedule_options {
    std::string name;          ///< a path segment: non-empty, no '/'
    std::string cron;          ///< five or six fields, or an alias (keel/process/cron.hpp)
    std::string zone = "UTC";  ///< the calendar's IANA time zone, e.g. "Europe/Berlin"
    overlap_policy overlap = overlap_policy::skip;  ///< when a tick's predecessor still runs
    /// After downtime, missed ticks at most this old (at the time the schedule runs again)
    /// are started; older ones are skipped (engine::backfill_schedule runs them).
    duration catch_up_window = std::chrono::hours(1);
    bool catch_up_latest_only = false;  ///< after downtime, run only the latest missed tick
    duration jitter{};                  ///< each tick starts up to this long after it; 0: on time
    /// The journal entries the schedule's process keeps (a few a tick) before it continues
    /// as new, its state carried over (context::continue_as_new); at least min_journal_bound.
    std::uint64_t journal_bound = 1000;
};

/// The least schedule_options::journal_bound: room for one tick and its signals.
inline constexpr std::uint64_t min_journal_bound = 20;

/// The most ticks one backfill runs.
inline constexpr std::size_t max_backfill = 1000;

/// "20261129T020000Z": how a tick is given to its instance (and appears in its id).
std::string tick_text(time_point tick);

/// The id of the process that runs schedule `name`: `keel/schedule/<name>`.
std::string schedule_instance_id(std::string_view name);

/// The definition of every schedule's own process (its instances are the schedules; each
/// publishes "schedule": its plan, paused, next and last tick, the running tick's instance,
/// and counts of ticks started, skipped and missed).
inline constexpr std::string_view schedule_definition = "/keel/schedule/:name";

}  // namespace keel::process
