// Schedules' calendar (keel/process/cron.hpp): every form of expression and every refusal,
// ticks across month and year ends, leap days and the day-of-month/day-of-week rule, and the
// ticks of daylight-saving days in Berlin, New York and Lord Howe Island as exact UTC
// instants. Every instant is fixed; the real clock is never read.

#include <date/date.h>
#include <gtest/gtest.h>

#include <chrono>
#include <keel/process/cron.hpp>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace keel::process {
namespace {

using std::chrono::hours;
using std::chrono::minutes;
using std::chrono::seconds;
using strings = std::vector<std::string>;

time_point utc(int y, unsigned mo, unsigned d, int h = 0, int mi = 0, int s = 0) {
    auto day = date::sys_days{date::year{y} / date::month{mo} / date::day{d}};
    return time_point{day + hours{h} + minutes{mi} + seconds{s}};
}

std::string text(time_point t) {
    return date::format("%F %T", date::floor<seconds>(t));
}

cron_schedule schedule(std::string_view expression, std::string_view zone = "UTC") {
    auto parsed = cron_schedule::parse(expression, zone);
    if (!parsed) throw std::runtime_error(std::string(expression) + ": " + parsed.error().message);
    return *parsed;
}

// The ticks in (from, to], as "YYYY-MM-DD hh:mm:ss" in UTC.
strings ticks(const cron_schedule& s, time_point from, time_point to, std::size_t limit = 100) {
    strings out;
    for (auto t : s.ticks_between(from, to, limit)) out.push_back(text(t));
    return out;
}

strings ticks(std::string_view expression, std::string_view zone, time_point from, time_point to,
              std::size_t limit = 100) {
    return ticks(schedule(expression, zone), from, to, limit);
}

std::string next(std::string_view expression, time_point from, std::string_view zone = "UTC") {
    auto at = schedule(expression, zone).next_after(from);
    return at ? text(*at) : "none";
}

// The minutes of the ticks from 10:00 to 10:59 on Monday 2 June 2025 (UTC).
std::vector<int> minutes_of_hour(std::string_view expression) {
    std::vector<int> out;
    for (auto t : schedule(expression)
                      .ticks_between(utc(2025, 6, 2, 9, 59, 59), utc(2025, 6, 2, 10, 59, 59), 100))
        out.push_back(static_cast<int>(date::floor<minutes>(t - utc(2025, 6, 2, 10)).count()));
    return out;
}

// The weekdays (0 Sunday) of the ticks in the two weeks from Monday 2 June 2025.
std::vector<unsigned> weekdays_of(std::string_view expression) {
    std::vector<unsigned> out;
    for (auto t :
         schedule(expression)
             .ticks_between(utc(2025, 6, 1, 23, 59, 59), utc(2025, 6, 15, 23, 59, 59), 100))
        out.push_back(date::weekday{date::floor<date::days>(t)}.c_encoding());
    return out;
}

// Two schedules tick at the same instants (the first `limit` of two years).
void expect_same_ticks(std::string_view a, std::string_view b, std::size_t limit = 60) {
    auto from = utc(2025, 1, 1);
    auto to = utc(2027, 1, 1);
    auto expected = ticks(a, "UTC", from, to, limit);
    EXPECT_FALSE(expected.empty()) << a;
    EXPECT_EQ(ticks(b, "UTC", from, to, limit), expected) << a << " vs " << b;
}

// ---- Parsing: every form ----

TEST(cron_parse, minute_forms) {
    EXPECT_EQ(minutes_of_hour("* 10 * * *").size(), 60u);
    EXPECT_EQ(minutes_of_hour("7 10 * * *"), (std::vector<int>{7}));
    EXPECT_EQ(minutes_of_hour("05 10 * * *"), (std::vector<int>{5}));
    EXPECT_EQ(minutes_of_hour("10-12 10 * * *"), (std::vector<int>{10, 11, 12}));
    EXPECT_EQ(minutes_of_hour("*/20 10 * * *"), (std::vector<int>{0, 20, 40}));
    EXPECT_EQ(minutes_of_hour("10-40/15 10 * * *"), (std::vector<int>{10, 25, 40}));
    EXPECT_EQ(minutes_of_hour("50/4 10 * * *"), (std::vector<int>{50, 54, 58}));
    EXPECT_EQ(minutes_of_hour("1,5-6,*/30 10 * * *"), (std::vector<int>{0, 1, 5, 6, 30}));
    EXPECT_EQ(minutes_of_hour("59,0 10 * * *"), (std::vector<int>{0, 59}));
    EXPECT_EQ(minutes_of_hour("*/60 10 * * *"), (std::vector<int>{0}));
}

TEST(cron_parse, hours_days_and_months) {
    auto day = [](std::string_view e) { return ticks(e, "UTC", utc(2025, 6, 2), utc(2025, 6, 3)); };
    EXPECT_EQ(day("0 */6 * * *"), (strings{"2025-06-02 06:00:00", "2025-06-02 12:00:00",
                                           "2025-06-02 18:00:00", "2025-06-03 00:00:00"}));
    EXPECT_EQ(day("0 9-17/4 * * *"),
              (strings{"2025-06-02 09:00:00", "2025-06-02 13:00:00", "2025-06-02 17:00:00"}));
    EXPECT_EQ(ticks("0 0 1,15,31 * *", "UTC", utc(2025, 6, 1), utc(2025, 8, 1)),
              (strings{"2025-06-15 00:00:00", "2025-07-01 00:00:00", "2025-07-15 00:00:00",
                       "2025-07-31 00:00:00", "2025-08-01 00:00:00"}));
    EXPECT_EQ(ticks("0 0 1 jan,Jul *", "UTC", utc(2025, 1, 1), utc(2026, 12, 31)),
              (strings{"2025-07-01 00:00:00", "2026-01-01 00:00:00", "2026-07-01 00:00:00"}));
    expect_same_ticks("0 0 1 1,7 *", "0 0 1 JAN,jul *");
    expect_same_ticks("0 0 1 3-5 *", "0 0 1 MAR-may *");
    expect_same_ticks("0 0 1 */3 *", "0 0 1 1,4,7,10 *");
    expect_same_ticks("0 0 1 FEB/5 *", "0 0 1 2,7,12 *");
}

TEST(cron_parse, weekdays_by_number_and_name) {
    EXPECT_EQ(weekdays_of("0 0 * * MON-FRI"),
              (std::vector<unsigned>{1, 2, 3, 4, 5, 1, 2, 3, 4, 5}));
    EXPECT_EQ(weekdays_of("0 0 * * 5-7"), (std::vector<unsigned>{5, 6, 0, 5, 6, 0}));
    EXPECT_EQ(weekdays_of("0 0 * * */2"), (std::vector<unsigned>{2, 4, 6, 0, 2, 4, 6, 0}));
    EXPECT_EQ(weekdays_of("0 0 * * 1/2"), (std::vector<unsigned>{1, 3, 5, 1, 3, 5}));
    expect_same_ticks("0 0 * * 1-5", "0 0 * * mon-Fri");
    expect_same_ticks("0 0 * * 0", "0 0 * * 7");
    expect_same_ticks("0 0 * * 0", "0 0 * * SUN");
    expect_same_ticks("0 0 * * 0", "0 0 * * sun");
    expect_same_ticks("0 0 * * 6,0", "0 0 * * SAT-7");
}

TEST(cron_parse, question_mark_is_any_day) {
    expect_same_ticks("0 0 ? * 1", "0 0 * * 1");
    expect_same_ticks("0 0 1 * ?", "0 0 1 * *");
    expect_same_ticks("0 0 ? * ?", "0 0 * * *");
}

TEST(cron_parse, blanks_between_fields_and_around) {
    expect_same_ticks("0 0 * * *", "  0\t 0   *\t\t* *  ");
    auto s = schedule("\t 30 2 * * * ");
    EXPECT_EQ(s.expression(), "\t 30 2 * * * ");
    EXPECT_EQ(s.zone(), "UTC");
}

TEST(cron_parse, six_fields_lead_with_seconds) {
    EXPECT_EQ(ticks("*/20 * * * * *", "UTC", utc(2025, 6, 2, 10), utc(2025, 6, 2, 10, 1)),
              (strings{"2025-06-02 10:00:20", "2025-06-02 10:00:40", "2025-06-02 10:01:00"}));
    EXPECT_EQ(next("30 0 0 * * *", utc(2025, 6, 1)), "2025-06-01 00:00:30");
    EXPECT_EQ(next("15-17 * * * * *", utc(2025, 6, 1, 8, 0, 16)), "2025-06-01 08:00:17");
    EXPECT_EQ(next("15-17 * * * * *", utc(2025, 6, 1, 8, 0, 17)), "2025-06-01 08:01:15");
    expect_same_ticks("0 0 0 * * *", "0 0 * * *");
}

TEST(cron_parse, aliases) {
    expect_same_ticks("@yearly", "0 0 1 1 *");
    expect_same_ticks("@annually", "0 0 1 1 *");
    expect_same_ticks("@monthly", "0 0 1 * *");
    expect_same_ticks("@weekly", "0 0 * * 0");
    expect_same_ticks("@daily", "0 0 * * *");
    expect_same_ticks("@midnight", "0 0 * * *");
    expect_same_ticks("@hourly", "0 * * * *");
    expect_same_ticks(" @DAILY\t", "0 0 * * *");
    auto wednesday = utc(2025, 6, 4, 10, 30);
    EXPECT_EQ(next("@hourly", wednesday), "2025-06-04 11:00:00");
    EXPECT_EQ(next("@daily", wednesday), "2025-06-05 00:00:00");
    EXPECT_EQ(next("@weekly", wednesday), "2025-06-08 00:00:00");
    EXPECT_EQ(next("@monthly", wednesday), "2025-07-01 00:00:00");
    EXPECT_EQ(next("@yearly", wednesday), "2026-01-01 00:00:00");
}

// ---- Parsing: refusals ----

struct refusal {
    std::string expression;
    std::string field;
    std::string message;  // the whole message, or empty: only its field prefix is checked
};

TEST(cron_parse, refuses_bad_expressions_naming_the_field) {
    const std::vector<refusal> cases = {
        {"61 * * * *", "minute", "minute: 61 is out of range 0-59"},
        {"0 24 * * *", "hour", "hour: 24 is out of range 0-23"},
        {"0 0 0 * *", "day of month", "day of month: 0 is out of range 1-31"},
        {"0 0 32 * *", "day of month", "day of month: 32 is out of range 1-31"},
        {"0 0 * 13 *", "month", "month: 13 is out of range 1-12"},
        {"0 0 * 0 *", "month", "month: 0 is out of range 1-12"},
        {"0 0 * * 8", "day of week", "day of week: 8 is out of range 0-7"},
        {"60 0 0 * * *", "second", "second: 60 is out of range 0-59"},
        {"99999999999999999999 * * * *", "minute", ""},
        {"30-10 * * * *", "minute", "minute: range '30-10' is reversed"},
        {"0 0 * * FRI-MON", "day of week", "day of week: range 'FRI-MON' is reversed"},
        {"0 0 * DEC-JAN *", "month", "month: range 'DEC-JAN' is reversed"},
        {"*/0 * * * *", "minute", "minute: step 0 is out of range 1-60"},
        {"0 0-12/0 * * *", "hour", "hour: step 0 is out of range 1-24"},
        {"*/61 * * * *", "minute", "minute: step 61 is out of range 1-60"},
        {"0 0 * * */8", "day of week", "day of week: step 8 is out of range 1-7"},
        {"*/x * * * *", "minute", "minute: step 'x' in '*/x' is not a number"},
        {"5/ * * * *", "minute", ""},
        {"*/2/3 * * * *", "minute", ""},
        {"1,,2 * * * *", "minute", "minute: empty item in '1,,2'"},
        {",1 * * * *", "minute", ""},
        {"0 1, * * *", "hour", "hour: empty item in '1,'"},
        {"0 0 * FOO *", "month", "month: unknown name 'FOO'"},
        {"0 0 * MON *", "month", "month: unknown name 'MON'"},
        {"0 0 * * FUNDAY", "day of week", "day of week: unknown name 'FUNDAY'"},
        {"0 JAN * * *", "hour", "hour: 'JAN' is not a value"},
        {"5x * * * *", "minute", "minute: '5x' is not a value"},
        {"-5 * * * *", "minute", "minute: a value is missing in '-5'"},
        {"1-2-3 * * * *", "minute", ""},
        {"? * * * *", "minute", "minute: '?' is only for day of month and day of week"},
        {"0 0 * ? *", "month", ""},
        {"\xff * * * *", "minute", "minute: '\\xff' is not a value"},
        {"0 0 * *", "expression", ""},
        {"0 0 * * * * *", "expression", ""},
        {"0 0 * * * garbage", "day of week", ""},
        {"", "expression", "expression: empty"},
        {" \t ", "expression", "expression: empty"},
        {"@reboot", "expression", ""},
        {"@daily 0", "expression", "expression: '0' after '@daily'"},
        {"0 0 30 2 *", "day of month", ""},
        {"0 0 30,31 FEB *", "day of month", ""},
        {"0 0 31 4,6,9,11 *", "day of month",
         "day of month: '31' never occurs in month '4,6,9,11': the expression never fires"},
        {std::string(1025, ' '), "expression",
         "expression: 1025 characters, more than the 1024 allowed"},
        {std::string(100000, '*'), "expression", ""},
    };
    for (const auto& c : cases) {
        keel::expected<cron_schedule, cron_error> parsed = unexpected(cron_error{});
        EXPECT_NO_THROW(parsed = cron_schedule::parse(c.expression)) << c.expression;
        ASSERT_FALSE(parsed) << c.expression;
        EXPECT_EQ(parsed.error().field, c.field) << c.expression;
        EXPECT_TRUE(parsed.error().message.starts_with(c.field + ": "))
            << c.expression << ": " << parsed.error().message;
        if (!c.message.empty()) {
            EXPECT_EQ(parsed.error().message, c.message);
        }
        EXPECT_LE(parsed.error().message.size(), 200u);
    }
}

TEST(cron_parse, accepts_days_that_occur_only_sometimes_or_by_weekday) {
    EXPECT_TRUE(cron_schedule::parse("0 0 29 2 *"));
    EXPECT_TRUE(cron_schedule::parse("0 0 30 2 MON"));  // every Monday in February
    EXPECT_TRUE(cron_schedule::parse("0 0 31 2,3 *"));
    EXPECT_EQ(cron_schedule::parse("0 0 1024 2 *").error().field, "day of month");
}

TEST(cron_parse, refuses_unknown_zones) {
    auto unknown = cron_schedule::parse("0 0 * * *", "Mars/Olympus_Mons");
    ASSERT_FALSE(unknown);
    EXPECT_EQ(unknown.error().field, "time zone");
    EXPECT_EQ(unknown.error().message, "time zone: 'Mars/Olympus_Mons' is not in the tz database");
    auto empty = cron_schedule::parse("0 0 * * *", "");
    ASSERT_FALSE(empty);
    EXPECT_EQ(empty.error().message, "time zone: empty");
    EXPECT_EQ(cron_schedule::parse("0 0 * * *", "../../etc/passwd").error().field, "time zone");
    EXPECT_EQ(cron_schedule::parse("0 0 * * *", std::string(5000, 'x')).error().field, "time zone");
}

// ---- next_after ----

TEST(cron_next, crosses_month_and_year_ends) {
    EXPECT_EQ(next("0 0 * * *", utc(2025, 1, 31, 12)), "2025-02-01 00:00:00");
    EXPECT_EQ(next("0 0 1 1 *", utc(2025, 6, 1)), "2026-01-01 00:00:00");
    EXPECT_EQ(next("0 0 1 1 *", utc(2025, 12, 31, 23, 59, 59)), "2026-01-01 00:00:00");
    EXPECT_EQ(next("0 0 1 1 *", utc(2026, 1, 1)), "2027-01-01 00:00:00");
    EXPECT_EQ(next("59 23 31 12 *", utc(2025, 12, 31, 23, 59)), "2026-12-31 23:59:00");
    EXPECT_EQ(ticks("0 0 31 * *", "UTC", utc(2025, 4, 1), utc(2025, 8, 1)),
              (strings{"2025-05-31 00:00:00", "2025-07-31 00:00:00"}));
}

TEST(cron_next, leap_days) {
    EXPECT_EQ(next("0 12 29 2 *", utc(2025, 1, 1)), "2028-02-29 12:00:00");
    EXPECT_EQ(next("0 12 29 2 *", utc(2024, 2, 29, 12)), "2028-02-29 12:00:00");
    EXPECT_EQ(next("0 12 29 2 *", utc(2096, 3, 1)), "2104-02-29 12:00:00");  // 2100 is no leap year
    EXPECT_EQ(next("0 0 * 2 *", utc(2024, 2, 28, 1)), "2024-02-29 00:00:00");
    EXPECT_EQ(next("0 0 * 2 *", utc(2025, 2, 28, 1)), "2026-02-01 00:00:00");
}

TEST(cron_next, day_of_month_or_day_of_week_when_both_are_restricted) {
    auto june = utc(2025, 6, 1);  // a Sunday
    auto july = utc(2025, 7, 19);
    EXPECT_EQ(ticks("0 0 13 * FRI", "UTC", june, july),
              (strings{"2025-06-06 00:00:00", "2025-06-13 00:00:00", "2025-06-20 00:00:00",
                       "2025-06-27 00:00:00", "2025-07-04 00:00:00", "2025-07-11 00:00:00",
                       "2025-07-13 00:00:00", "2025-07-18 00:00:00"}));
    EXPECT_EQ(ticks("0 0 */10 * 1", "UTC", utc(2025, 5, 31), utc(2025, 6, 30)),
              (strings{"2025-06-01 00:00:00", "2025-06-02 00:00:00", "2025-06-09 00:00:00",
                       "2025-06-11 00:00:00", "2025-06-16 00:00:00", "2025-06-21 00:00:00",
                       "2025-06-23 00:00:00", "2025-06-30 00:00:00"}));
    // One restricted: it alone decides.
    EXPECT_EQ(ticks("0 0 13 * *", "UTC", june, july),
              (strings{"2025-06-13 00:00:00", "2025-07-13 00:00:00"}));
    EXPECT_EQ(ticks("0 0 13 * ?", "UTC", june, july),
              (strings{"2025-06-13 00:00:00", "2025-07-13 00:00:00"}));
    EXPECT_EQ(ticks("0 0 ? * FRI", "UTC", june, utc(2025, 6, 21)),
              (strings{"2025-06-06 00:00:00", "2025-06-13 00:00:00", "2025-06-20 00:00:00"}));
    EXPECT_EQ(ticks("0 0 * 6 FRI", "UTC", june, utc(2025, 6, 21)),
              (strings{"2025-06-06 00:00:00", "2025-06-13 00:00:00", "2025-06-20 00:00:00"}));
}

TEST(cron_next, strictly_after_to_the_second) {
    EXPECT_EQ(next("* * * * *", utc(2025, 6, 1, 10)), "2025-06-01 10:01:00");
    EXPECT_EQ(next("* * * * *", utc(2025, 6, 1, 10) + std::chrono::milliseconds(500)),
              "2025-06-01 10:01:00");
    EXPECT_EQ(next("* * * * *", utc(2025, 6, 1, 10) - std::chrono::nanoseconds(1)),
              "2025-06-01 10:00:00");
    EXPECT_EQ(next("* * * * * *", utc(2025, 6, 1, 10) + std::chrono::milliseconds(999)),
              "2025-06-01 10:00:01");
    EXPECT_EQ(next("*/15 * * * * *", utc(2025, 6, 1, 10, 0, 7)), "2025-06-01 10:00:15");
}

TEST(cron_next, at_the_ends_of_time_point) {
    EXPECT_FALSE(schedule("@yearly").next_after(time_point::max() - hours{1}));
    EXPECT_FALSE(schedule("* * * * * *", "Europe/Berlin").next_after(time_point::max()));
    auto first = schedule("@yearly").next_after(time_point::min());
    ASSERT_TRUE(first);
    EXPECT_EQ(text(*first), "1678-01-01 00:00:00");
}

TEST(cron_next, skips_by_field_not_by_minute) {
    auto yearly = schedule("0 0 29 2 MON", "Europe/Berlin");
    auto leap = schedule("59 23 29 2 *", "America/New_York");
    auto started = std::chrono::steady_clock::now();
    for (int i = 0; i < 1000; ++i) {
        auto from = utc(2020, 1, 1) + hours{i * 97};
        ASSERT_TRUE(yearly.next_after(from));
        ASSERT_TRUE(leap.next_after(from));
    }
    // Stepping minute by minute would take seconds here; skipping takes a few milliseconds.
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(500));
}

TEST(cron_next, leaves_the_second_pass_of_a_repeated_hour_at_once) {
    auto every_second = schedule("* * * * * *", "America/New_York");
    auto second_pass = utc(2025, 11, 2, 6, 0, 1);  // 01:00:01 EST; 01:00-02:00 fired as EDT
    EXPECT_EQ(text(*every_second.next_after(second_pass)), "2025-11-02 07:00:00");
    auto started = std::chrono::steady_clock::now();
    for (int i = 0; i < 1000; ++i) ASSERT_TRUE(every_second.next_after(second_pass));
    // Trying each second of the hour would take about a third of a second here.
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(100));
}

// ---- ticks_between ----

TEST(cron_ticks, from_excluded_to_included_at_most_limit) {
    auto s = schedule("0 * * * *");
    EXPECT_EQ(ticks(s, utc(2025, 6, 1, 10), utc(2025, 6, 1, 13)),
              (strings{"2025-06-01 11:00:00", "2025-06-01 12:00:00", "2025-06-01 13:00:00"}));
    EXPECT_EQ(ticks(s, utc(2025, 6, 1, 10), utc(2025, 6, 1, 13), 2),
              (strings{"2025-06-01 11:00:00", "2025-06-01 12:00:00"}));
    EXPECT_TRUE(s.ticks_between(utc(2025, 6, 1, 10), utc(2025, 6, 1, 13), 0).empty());
    EXPECT_TRUE(s.ticks_between(utc(2025, 6, 1, 13), utc(2025, 6, 1, 10), 10).empty());
    EXPECT_TRUE(s.ticks_between(utc(2025, 6, 1, 10), utc(2025, 6, 1, 10), 10).empty());
    EXPECT_EQ(s.ticks_between(utc(2000, 1, 1), utc(2100, 1, 1), 3).size(), 3u);
}

// ---- Time zones and daylight saving ----

// Europe/Berlin, 2025: CET to CEST on 30 March at 01:00 UTC (02:00 to 03:00 local), back on
// 26 October at 01:00 UTC (03:00 to 02:00 local: 02:00-03:00 twice).

TEST(cron_zones, berlin_hourly) {
    EXPECT_EQ(
        ticks("0 * * * *", "Europe/Berlin", utc(2025, 3, 29, 23, 30), utc(2025, 3, 30, 3, 30)),
        (strings{"2025-03-30 00:00:00", "2025-03-30 01:00:00", "2025-03-30 02:00:00",
                 "2025-03-30 03:00:00"}));
    EXPECT_EQ(
        ticks("0 * * * *", "Europe/Berlin", utc(2025, 10, 25, 21, 30), utc(2025, 10, 26, 3, 30)),
        (strings{"2025-10-25 22:00:00", "2025-10-25 23:00:00", "2025-10-26 00:00:00",
                 "2025-10-26 02:00:00", "2025-10-26 03:00:00"}));
}

TEST(cron_zones, berlin_daily_at_2_30) {
    EXPECT_EQ(ticks("30 2 * * *", "Europe/Berlin", utc(2025, 3, 29), utc(2025, 4, 1)),
              (strings{"2025-03-29 01:30:00", "2025-03-30 01:00:00", "2025-03-31 00:30:00"}));
    EXPECT_EQ(ticks("30 2 * * *", "Europe/Berlin", utc(2025, 10, 25), utc(2025, 10, 28)),
              (strings{"2025-10-25 00:30:00", "2025-10-26 00:30:00", "2025-10-27 01:30:00"}));
}

TEST(cron_zones, berlin_every_15_minutes_at_2) {
    EXPECT_EQ(ticks("*/15 2 * * *", "Europe/Berlin", utc(2025, 3, 29), utc(2025, 3, 31, 1)),
              (strings{"2025-03-29 01:00:00", "2025-03-29 01:15:00", "2025-03-29 01:30:00",
                       "2025-03-29 01:45:00", "2025-03-30 01:00:00", "2025-03-31 00:00:00",
                       "2025-03-31 00:15:00", "2025-03-31 00:30:00", "2025-03-31 00:45:00"}));
    EXPECT_EQ(ticks("*/15 2 * * *", "Europe/Berlin", utc(2025, 10, 25, 23), utc(2025, 10, 26, 23)),
              (strings{"2025-10-26 00:00:00", "2025-10-26 00:15:00", "2025-10-26 00:30:00",
                       "2025-10-26 00:45:00"}));
}

TEST(cron_zones, a_gap_fires_once_also_when_the_hour_after_it_fires) {
    EXPECT_EQ(
        ticks("*/15 * * * *", "Europe/Berlin", utc(2025, 3, 30, 0, 30), utc(2025, 3, 30, 1, 30)),
        (strings{"2025-03-30 00:45:00", "2025-03-30 01:00:00", "2025-03-30 01:15:00",
                 "2025-03-30 01:30:00"}));
    EXPECT_EQ(ticks("*/15 2,3 * * *", "Europe/Berlin", utc(2025, 3, 30), utc(2025, 3, 30, 2)),
              (strings{"2025-03-30 01:00:00", "2025-03-30 01:15:00", "2025-03-30 01:30:00",
                       "2025-03-30 01:45:00"}));
    EXPECT_EQ(next("*/15 2 * * *", utc(2025, 3, 30, 1), "Europe/Berlin"), "2025-03-31 00:00:00");
    EXPECT_EQ(next("0 0 2 * * *", utc(2025, 3, 30, 0, 59, 59), "Europe/Berlin"),
              "2025-03-30 01:00:00");
}

// America/New_York, 2025: EST to EDT on 9 March at 07:00 UTC (02:00 to 03:00 local), back on
// 2 November at 06:00 UTC (02:00 to 01:00 local: 01:00-02:00 twice).

TEST(cron_zones, new_york_hourly) {
    EXPECT_EQ(
        ticks("0 * * * *", "America/New_York", utc(2025, 3, 9, 4, 30), utc(2025, 3, 9, 8, 30)),
        (strings{"2025-03-09 05:00:00", "2025-03-09 06:00:00", "2025-03-09 07:00:00",
                 "2025-03-09 08:00:00"}));
    EXPECT_EQ(
        ticks("0 * * * *", "America/New_York", utc(2025, 11, 2, 3, 30), utc(2025, 11, 2, 8, 30)),
        (strings{"2025-11-02 04:00:00", "2025-11-02 05:00:00", "2025-11-02 07:00:00",
                 "2025-11-02 08:00:00"}));
}

TEST(cron_zones, new_york_daily) {
    EXPECT_EQ(ticks("30 2 * * *", "America/New_York", utc(2025, 3, 8), utc(2025, 3, 11)),
              (strings{"2025-03-08 07:30:00", "2025-03-09 07:00:00", "2025-03-10 06:30:00"}));
    EXPECT_EQ(ticks("30 2 * * *", "America/New_York", utc(2025, 11, 1), utc(2025, 11, 4)),
              (strings{"2025-11-01 06:30:00", "2025-11-02 07:30:00", "2025-11-03 07:30:00"}));
    EXPECT_EQ(ticks("30 1 * * *", "America/New_York", utc(2025, 11, 1), utc(2025, 11, 4)),
              (strings{"2025-11-01 05:30:00", "2025-11-02 05:30:00", "2025-11-03 06:30:00"}));
}

TEST(cron_zones, new_york_every_15_minutes) {
    EXPECT_EQ(
        ticks("*/15 2 * * *", "America/New_York", utc(2025, 3, 8, 12), utc(2025, 3, 10, 6, 15)),
        (strings{"2025-03-09 07:00:00", "2025-03-10 06:00:00", "2025-03-10 06:15:00"}));
    EXPECT_EQ(ticks("*/15 1 * * *", "America/New_York", utc(2025, 11, 2), utc(2025, 11, 3, 6, 15)),
              (strings{"2025-11-02 05:00:00", "2025-11-02 05:15:00", "2025-11-02 05:30:00",
                       "2025-11-02 05:45:00", "2025-11-03 06:00:00", "2025-11-03 06:15:00"}));
    // The second pass of 01:00-02:00 has no ticks: its times fired in the first.
    EXPECT_EQ(next("*/15 * * * *", utc(2025, 11, 2, 5, 50), "America/New_York"),
              "2025-11-02 07:00:00");
    EXPECT_EQ(next("*/15 * * * *", utc(2025, 11, 2, 6, 10), "America/New_York"),
              "2025-11-02 07:00:00");
    EXPECT_EQ(next("*/15 * * * *", utc(2025, 11, 2, 6, 59, 59), "America/New_York"),
              "2025-11-02 07:00:00");
}

// Australia/Lord_Howe moves by 30 minutes: +11 to +10:30 on 6 April 2025 at 15:00 UTC (5
// April; 02:00 to 01:30 local), back to +11 on 5 October 2025 at 15:30 UTC (4 October; 02:00
// to 02:30 local).
TEST(cron_zones, lord_howe_half_hour_shift) {
    if (!cron_schedule::parse("0 0 * * *", "Australia/Lord_Howe"))
        GTEST_SKIP() << "no Australia/Lord_Howe in this tz database";
    EXPECT_EQ(ticks("15 2 * * *", "Australia/Lord_Howe", utc(2025, 10, 3), utc(2025, 10, 6)),
              (strings{"2025-10-03 15:45:00", "2025-10-04 15:30:00", "2025-10-05 15:15:00"}));
    EXPECT_EQ(ticks("45 1 * * *", "Australia/Lord_Howe", utc(2025, 4, 4), utc(2025, 4, 7)),
              (strings{"2025-04-04 14:45:00", "2025-04-05 14:45:00", "2025-04-06 15:15:00"}));
    EXPECT_EQ(
        ticks("*/15 * * * *", "Australia/Lord_Howe", utc(2025, 10, 4, 15), utc(2025, 10, 4, 16)),
        (strings{"2025-10-04 15:15:00", "2025-10-04 15:30:00", "2025-10-04 15:45:00",
                 "2025-10-04 16:00:00"}));
    EXPECT_EQ(ticks("*/15 * * * *", "Australia/Lord_Howe", utc(2025, 4, 5, 14, 30),
                    utc(2025, 4, 5, 15, 30)),
              (strings{"2025-04-05 14:45:00", "2025-04-05 15:30:00"}));
}

TEST(cron_zones, rules_continue_past_the_listed_years) {
    // Berlin, 2040: summer time from 25 March to 28 October.
    EXPECT_EQ(ticks("30 2 * * *", "Europe/Berlin", utc(2040, 3, 24), utc(2040, 3, 27)),
              (strings{"2040-03-24 01:30:00", "2040-03-25 01:00:00", "2040-03-26 00:30:00"}));
    EXPECT_EQ(next("0 12 * * *", utc(2040, 7, 1), "Europe/Berlin"), "2040-07-01 10:00:00");
    EXPECT_EQ(ticks("30 2 * * *", "Europe/Berlin", utc(2040, 10, 27), utc(2040, 10, 30)),
              (strings{"2040-10-27 00:30:00", "2040-10-28 00:30:00", "2040-10-29 01:30:00"}));
    // New York, 2045: daylight time from 12 March to 5 November.
    EXPECT_EQ(next("0 12 4 7 *", utc(2045, 1, 1), "America/New_York"), "2045-07-04 16:00:00");
    EXPECT_EQ(ticks("0 * * * *", "America/New_York", utc(2045, 3, 12, 5, 30), utc(2045, 3, 12, 8)),
              (strings{"2045-03-12 06:00:00", "2045-03-12 07:00:00", "2045-03-12 08:00:00"}));
    EXPECT_EQ(next("30 1 * * *", utc(2045, 11, 5), "America/New_York"), "2045-11-05 05:30:00");
    // Sydney, southern summer of 2050: +11.
    EXPECT_EQ(next("0 12 1 1 *", utc(2049, 6, 1), "Australia/Sydney"), "2050-01-01 01:00:00");
    // Nuuk moved from -03 to -02 in 2023: a leap day far ahead is read from a recent February.
    EXPECT_EQ(next("0 12 29 2 *", utc(2114, 1, 1), "America/Nuuk"), "2116-02-29 14:00:00");
}

TEST(cron_zones, named_as_given_and_links_resolve) {
    auto eastern = schedule("30 2 * * *", "US/Eastern");
    EXPECT_EQ(eastern.zone(), "US/Eastern");
    EXPECT_EQ(ticks(eastern, utc(2025, 3, 8), utc(2025, 3, 11)),
              ticks("30 2 * * *", "America/New_York", utc(2025, 3, 8), utc(2025, 3, 11)));
    EXPECT_EQ(next("0 9 * * *", utc(2025, 6, 1), "Asia/Kolkata"), "2025-06-01 03:30:00");
    EXPECT_EQ(schedule("0 9 * * *").zone(), "UTC");
}

// ---- A value ----

TEST(cron_schedule_value, copies_and_assigns) {
    static_assert(std::is_copy_constructible_v<cron_schedule>);
    static_assert(std::is_copy_assignable_v<cron_schedule>);
    static_assert(std::is_nothrow_move_constructible_v<cron_schedule>);
    auto copy = schedule("@daily");
    {
        auto berlin = schedule("30 2 * * *", "Europe/Berlin");
        copy = berlin;
        auto again = berlin;
        EXPECT_EQ(again.expression(), "30 2 * * *");
    }
    EXPECT_EQ(copy.expression(), "30 2 * * *");
    EXPECT_EQ(copy.zone(), "Europe/Berlin");
    EXPECT_EQ(text(*copy.next_after(utc(2025, 3, 29, 12))), "2025-03-30 01:00:00");
    std::vector<cron_schedule> many(3, copy);
    for (const auto& s : many)
        EXPECT_EQ(s.next_after(utc(2025, 1, 1)), copy.next_after(utc(2025, 1, 1)));
}

}  // namespace
}  // namespace keel::process
