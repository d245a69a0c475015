#pragma once

/// @file
/// Cron schedules: when a recurring process start fires, given as a cron expression read as
/// wall-clock time in a time zone. A schedule is a small copyable value; it computes its ticks
/// and keeps no state.
///
/// @code
///   auto nightly = keel::process::cron_schedule::parse("30 2 * * *", "Europe/Berlin");
///   if (!nightly) return nightly.error().message;  // e.g. "hour: 25 is out of range 0-23"
///   nightly->next_after(now);                       // the next 02:30 in Berlin, as an instant
///   nightly->ticks_between(last_run, now, 10);      // those missed since last_run, at most 10
/// @endcode
///
/// Expressions. Five fields `minute hour day-of-month month day-of-week`, or six with a leading
/// `second`: second and minute 0-59, hour 0-23, day of month 1-31, month 1-12 or JAN-DEC, day
/// of week 0-7 or SUN-SAT (0 and 7 are Sunday); names in any case. A field is a comma list of
/// @code
///   *        every value            5         one value           MON-FRI   a range
///   */15     every 15th value from the first      1-30/10   every 10th value in a range
///   10/20    every 20th value from 10 to the field's last (Saturday in day of week)
/// @endcode
/// and `?` is `*` in day of month and day of week. A step is at most the number of values in
/// its field (`*/60` in minutes is :00; `*/90` is refused). Aliases: `@yearly` and `@annually`
/// `0 0 1 1 *`, `@monthly` `0 0 1 * *`, `@weekly` `0 0 * * 0`, `@daily` and `@midnight`
/// `0 0 * * *`, `@hourly` `0 * * * *`. Spaces and tabs separate fields.
///
/// Day of month and day of week, as in Vixie cron: when both are restricted (neither is just
/// `*` or `?`), a day matches when either matches; otherwise the restricted one decides.
/// `0 0 13 * FRI` fires on every 13th and on every Friday.
///
/// Time zones and daylight saving. Ticks are wall-clock times in the schedule's zone, an IANA
/// name ("Europe/Berlin") looked up in the system's tz database; "UTC" needs no database.
/// - A time the clocks skip (spring forward) fires once, at the instant the gap ends:
///   `30 2 * * *` in Europe/Berlin fires at 03:00 CEST on the last Sunday of March, and
///   `*/15 2 * * *` fires once there, not four times.
/// - A time that occurs twice (fall back) fires once, at its first occurrence: `30 2 * * *`
///   fires at 02:30 CEST on the last Sunday of October. So `0 * * * *` and `*/15 * * * *`
///   have no ticks during the repeated hour's second pass.
/// - The system's zone files list a zone's clock changes up to 2037, then give its rule as a
///   formula that date/tz does not read. Past 2037 a zone keeps its rules: a month is read as
///   the latest month up to 2037 that starts on the same weekday. (Zones whose files list
///   changes further, Gaza's and Morocco's to 2087, are read as listed, then keep their last
///   offset.)
///
/// parse refuses, naming the field and the text at fault: numbers out of range, reversed
/// ranges, steps of 0 or too large, empty list items, unknown names, a wrong number of fields,
/// trailing text, days that never occur (`0 0 30 2 *`, `0 0 31 4,6,9,11 *`), expressions over
/// 1024 characters, unknown zones. It does not throw on bad input.

#include <cstddef>
#include <cstdint>
#include <keel/framework/clock.hpp>
#include <keel/framework/expected.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace keel::process {

/// Why an expression or a zone was refused. field: "second", "minute", "hour", "day of month",
/// "month", "day of week", "expression" (its shape) or "time zone"; message: for people, starts
/// with the field ("minute: 61 is out of range 0-59"), printable ASCII.
struct cron_error {
    std::string field;    ///< the field at fault, as listed above
    std::string message;  ///< for people, starting with the field
};

namespace detail {

// A parsed expression: bit n of each mask set when value n matches.
struct cron_fields {
    std::uint64_t seconds = 0;
    std::uint64_t minutes = 0;
    std::uint64_t hours = 0;
    std::uint64_t days = 0;      // days of the month, 1-31
    std::uint64_t months = 0;    // 1-12
    std::uint64_t weekdays = 0;  // 0 (Sunday) - 6
    bool any_day = false;        // day of month is `*` or `?`
    bool any_weekday = false;    // day of week is `*` or `?`
};

}  // namespace detail

/// A parsed cron expression in a time zone: computes its ticks (see the file's description).
/// A small copyable value without state.
class cron_schedule {
  public:
    /// Parses `expression` in IANA time zone `zone`; the cron_error names the field and the
    /// text at fault. Does not throw on bad input.
    static keel::expected<cron_schedule, cron_error> parse(std::string_view expression,
                                                           std::string_view zone = "UTC");

    /// The first tick strictly after t; nullopt only if there is none in the next 100 years
    /// (or before the end of time_point's range, in 2262).
    std::optional<time_point> next_after(time_point t) const;

    /// The ticks in (from, to], in order, at most `limit` of them (catch-up and backfill).
    std::vector<time_point> ticks_between(time_point from, time_point to, std::size_t limit) const;

    /// The expression, as given to parse().
    const std::string& expression() const noexcept { return expression_; }
    /// The time zone's name, as given to parse().
    const std::string& zone() const noexcept { return zone_name_; }

  private:
    cron_schedule() = default;

    std::string expression_;
    std::string zone_name_;
    detail::cron_fields fields_;
    const void* zone_ =
        nullptr;  // the zone's date::time_zone (lives as long as the program); null: UTC
};

}  // namespace keel::process
