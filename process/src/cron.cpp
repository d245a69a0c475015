#include <keel/process/cron.hpp>

// The calendar search works on local wall-clock time, field by field (the next matching
// month, then day, then hour, minute and second), and converts the local time it finds to an
// instant with the zone (Howard Hinnant's date/tz, the library C++20's <chrono> zones came
// from; the system's tz database).

#include <date/date.h>
#include <date/tz.h>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cstdio>
#include <exception>
#include <span>

namespace keel::process {
namespace {

using std::chrono::seconds;
using fields = detail::cron_fields;

constexpr std::size_t max_expression_size = 1024;
constexpr int horizon_years = 100;

// ---- Parsing ----

struct field_spec {
    const char* name;
    int min;
    int max;          // the last value of `*` and of `a/n`
    int top;          // the largest value written (7, Sunday, in day of week)
    int first_named;  // the value of names[0]
    std::span<const std::string_view> names;
};

constexpr std::array<std::string_view, 12> month_names{"JAN", "FEB", "MAR", "APR", "MAY", "JUN",
                                                       "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"};
constexpr std::array<std::string_view, 7> weekday_names{"SUN", "MON", "TUE", "WED",
                                                        "THU", "FRI", "SAT"};

constexpr field_spec second_field{"second", 0, 59, 59, 0, {}};
constexpr field_spec minute_field{"minute", 0, 59, 59, 0, {}};
constexpr field_spec hour_field{"hour", 0, 23, 23, 0, {}};
constexpr field_spec day_field{"day of month", 1, 31, 31, 0, {}};
constexpr field_spec month_field{"month", 1, 12, 12, 1, month_names};
constexpr field_spec weekday_field{"day of week", 0, 6, 7, 0, weekday_names};

struct alias {
    std::string_view name;
    std::string_view expression;
};

constexpr std::array<alias, 7> aliases{{{"@yearly", "0 0 1 1 *"},
                                        {"@annually", "0 0 1 1 *"},
                                        {"@monthly", "0 0 1 * *"},
                                        {"@weekly", "0 0 * * 0"},
                                        {"@daily", "0 0 * * *"},
                                        {"@midnight", "0 0 * * *"},
                                        {"@hourly", "0 * * * *"}}};

// Text from the input, for a message: printable ASCII, other bytes as \xNN, cut at about 40
// characters.
std::string shown(std::string_view text) {
    constexpr std::size_t longest = 40;
    std::string out;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (out.size() >= longest) return out + "...";
        auto c = static_cast<unsigned char>(text[i]);
        if (c >= 0x20 && c < 0x7f) {
            out += static_cast<char>(c);
        } else {
            char escaped[8];
            std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
            out += escaped;
        }
    }
    return out;
}

std::string quoted(std::string_view text) {
    return "'" + shown(text) + "'";
}

keel::unexpected<cron_error> refuse(std::string field, const std::string& message) {
    return keel::unexpected(cron_error{field, field + ": " + message});
}

keel::unexpected<cron_error> refuse(const field_spec& field, const std::string& message) {
    return refuse(std::string(field.name), message);
}

char upper(char c) {
    return (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;
}

bool same_letters(std::string_view a, std::string_view b) {
    return std::ranges::equal(a, b, [](char x, char y) { return upper(x) == upper(y); });
}

bool all_digits(std::string_view text) {
    return !text.empty() && std::ranges::all_of(text, [](char c) { return c >= '0' && c <= '9'; });
}

bool all_letters(std::string_view text) {
    return !text.empty() &&
           std::ranges::all_of(text, [](char c) { return (upper(c) >= 'A' && upper(c) <= 'Z'); });
}

// The digits' value, saturated well above any field's range.
int number(std::string_view digits) {
    int value = 0;
    for (char c : digits) value = std::min(value * 10 + (c - '0'), 100000);
    return value;
}

std::string range_text(int low, int high) {
    return std::to_string(low) + "-" + std::to_string(high);
}

keel::expected<int, cron_error> parse_value(const field_spec& field, std::string_view text,
                                            std::string_view item) {
    if (all_digits(text)) {
        int value = number(text);
        if (value < field.min || value > field.top)
            return refuse(field,
                          shown(text) + " is out of range " + range_text(field.min, field.top));
        return value;
    }
    if (all_letters(text) && !field.names.empty()) {
        for (std::size_t i = 0; i < field.names.size(); ++i)
            if (same_letters(text, field.names[i])) return field.first_named + static_cast<int>(i);
        return refuse(field, "unknown name " + quoted(text));
    }
    if (text.empty()) return refuse(field, "a value is missing in " + quoted(item));
    if (text == item) return refuse(field, quoted(text) + " is not a value");
    return refuse(field, quoted(text) + " in " + quoted(item) + " is not a value");
}

keel::expected<int, cron_error> parse_step(const field_spec& field, std::string_view text,
                                           std::string_view item) {
    if (!all_digits(text))
        return refuse(field, "step " + quoted(text) + " in " + quoted(item) + " is not a number");
    int most = field.max - field.min + 1;
    int step = number(text);
    if (step < 1 || step > most)
        return refuse(field, "step " + shown(text) + " is out of range " + range_text(1, most));
    return step;
}

// Day of week 7 is Sunday, 0.
int bit_of(const field_spec& field, int value) {
    return value > field.max ? value % 7 : value;
}

// The mask of one list item: `*`, `?`, a value, a range, each with an optional step.
keel::expected<std::uint64_t, cron_error> parse_item(const field_spec& field, std::string_view item,
                                                     bool question_allowed) {
    auto slash = item.find('/');
    auto base = item.substr(0, slash);
    int first = field.min;
    int last = field.max;
    if (base == "?" && !question_allowed)
        return refuse(field, "'?' is only for day of month and day of week");
    if (base != "*" && base != "?") {
        auto dash = base.find('-');
        auto low = parse_value(field, base.substr(0, dash), item);
        if (!low) return keel::unexpected(low.error());
        first = *low;
        last = slash == std::string_view::npos ? first : std::max(field.max, first);
        if (dash != std::string_view::npos) {
            auto high = parse_value(field, base.substr(dash + 1), item);
            if (!high) return keel::unexpected(high.error());
            if (*high < first) return refuse(field, "range " + quoted(base) + " is reversed");
            last = *high;
        }
    }
    int step = 1;
    if (slash != std::string_view::npos) {
        auto parsed = parse_step(field, item.substr(slash + 1), item);
        if (!parsed) return keel::unexpected(parsed.error());
        step = *parsed;
    }
    std::uint64_t mask = 0;
    for (int value = first; value <= last; value += step)
        mask |= std::uint64_t{1} << bit_of(field, value);
    return mask;
}

keel::expected<std::uint64_t, cron_error> parse_field(const field_spec& field,
                                                      std::string_view text,
                                                      bool question_allowed = false) {
    std::uint64_t mask = 0;
    for (std::size_t start = 0;;) {
        auto comma = text.find(',', start);
        auto item = text.substr(start, comma == std::string_view::npos ? comma : comma - start);
        if (item.empty()) return refuse(field, "empty item in " + quoted(text));
        auto parsed = parse_item(field, item, question_allowed);
        if (!parsed) return parsed;
        mask |= *parsed;
        if (comma == std::string_view::npos) return mask;
        start = comma + 1;
    }
}

bool is_blank(char c) {
    return c == ' ' || c == '\t';
}

std::vector<std::string_view> split_fields(std::string_view text) {
    std::vector<std::string_view> out;
    std::size_t i = 0;
    while (i < text.size()) {
        while (i < text.size() && is_blank(text[i])) ++i;
        auto start = i;
        while (i < text.size() && !is_blank(text[i])) ++i;
        if (i > start) out.push_back(text.substr(start, i - start));
    }
    return out;
}

// An expression whose day of month alone decides must name a day that some chosen month has.
bool some_day_occurs(const fields& f) {
    constexpr std::array<int, 13> longest{0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    for (int month = 1; month <= 12; ++month) {
        auto days_of_month = ((std::uint64_t{1} << (longest[month] + 1)) - 1) & ~std::uint64_t{1};
        if ((f.months >> month & 1) && (f.days & days_of_month)) return true;
    }
    return false;
}

keel::expected<fields, cron_error> parse_fields(std::span<const std::string_view> parts) {
    if (parts.size() != 5 && parts.size() != 6)
        return refuse("expression", std::to_string(parts.size()) +
                                        " fields; expected 5 (minute hour day-of-month month "
                                        "day-of-week) or 6 (a leading second)");
    fields f;
    if (parts.size() == 6) {
        auto parsed = parse_field(second_field, parts[0]);
        if (!parsed) return keel::unexpected(parsed.error());
        f.seconds = *parsed;
        parts = parts.subspan(1);
    } else {
        f.seconds = 1;
    }
    std::array<std::uint64_t*, 5> masks{&f.minutes, &f.hours, &f.days, &f.months, &f.weekdays};
    std::array<const field_spec*, 5> specs{&minute_field, &hour_field, &day_field, &month_field,
                                           &weekday_field};
    for (std::size_t i = 0; i < 5; ++i) {
        bool question_allowed = i == 2 || i == 4;
        auto parsed = parse_field(*specs[i], parts[i], question_allowed);
        if (!parsed) return keel::unexpected(parsed.error());
        *masks[i] = *parsed;
    }
    f.any_day = parts[2] == "*" || parts[2] == "?";
    f.any_weekday = parts[4] == "*" || parts[4] == "?";
    if (f.any_weekday && !some_day_occurs(f))
        return refuse(day_field, quoted(parts[2]) + " never occurs in month " + quoted(parts[3]) +
                                     ": the expression never fires");
    return f;
}

keel::expected<fields, cron_error> parse_expression(std::string_view expression) {
    if (expression.size() > max_expression_size)
        return refuse("expression", std::to_string(expression.size()) +
                                        " characters, more than the " +
                                        std::to_string(max_expression_size) + " allowed");
    auto parts = split_fields(expression);
    if (parts.empty()) return refuse("expression", "empty");
    if (parts[0].starts_with('@')) {
        auto found = std::ranges::find_if(
            aliases, [&](const alias& a) { return same_letters(parts[0], a.name); });
        if (found == aliases.end())
            return refuse("expression", "unknown alias " + quoted(parts[0]) +
                                            " (@yearly, @annually, @monthly, @weekly, @daily, "
                                            "@midnight, @hourly)");
        if (parts.size() > 1)
            return refuse("expression", quoted(parts[1]) + " after " + quoted(parts[0]));
        parts = split_fields(found->expression);
    }
    return parse_fields(parts);
}

const date::time_zone* as_zone(const void* zone) {
    return static_cast<const date::time_zone*>(zone);
}

// The zone, loaded now so that a database that cannot be read is refused here.
keel::expected<const date::time_zone*, cron_error> find_zone(std::string_view name) {
    if (name == "UTC") return nullptr;
    if (name.empty()) return refuse("time zone", "empty");
    try {
        date::get_tzdb();
    } catch (const std::exception& e) {
        return refuse("time zone", "the tz database cannot be read (" + shown(e.what()) + ")");
    }
    try {
        auto zone = date::locate_zone(name);
        zone->get_info(date::sys_seconds{});
        return zone;
    } catch (const std::exception&) {
        return refuse("time zone", quoted(name) + " is not in the tz database");
    }
}

// ---- Local time and the zone ----

// The system's zone files list the transitions of a zone that still changes its clocks up to
// 2037, then state its rule as a formula, which date's reader of those files ignores: past
// 2037 it would keep the zone on its last offset for ever.
constexpr int last_listed_year = 2037;

bool rules_continue_past_listing(const date::time_zone& zone) {
    auto last_change = zone.get_info(date::sys_days{date::year{3000} / 1 / 1}).begin;
    return date::year_month_day{date::floor<date::days>(last_change)}.year() ==
           date::year{last_listed_year};
}

// How far to move a day to read the zone's offsets there: zero, or past 2037 for a zone whose
// rules continue, back to the same day of the latest month up to 2037 (at most 10 years back)
// that starts on the same weekday. Rules name months and weekdays ("the last Sunday of
// March"), so that month has the same clock changes. (A 29 February reads 1 March.)
date::days listed_shift(const date::time_zone& zone, date::days since_epoch) {
    date::year_month_day day{date::sys_days{since_epoch}};
    if (day.year() <= date::year{last_listed_year} || !rules_continue_past_listing(zone))
        return date::days{0};
    auto first = date::sys_days{day.year() / day.month() / 1};
    for (int year = last_listed_year; year > last_listed_year - 14; --year) {
        auto other = date::sys_days{date::year{year} / day.month() / 1};
        if (date::weekday{other} == date::weekday{first}) return other - first;
    }
    return date::days{0};
}

template <class Clock>
date::days listed_shift(const date::time_zone& zone, std::chrono::time_point<Clock, seconds> at) {
    return listed_shift(zone, date::floor<date::days>(at).time_since_epoch());
}

date::local_seconds local_of(date::sys_seconds at) {
    return date::local_seconds{at.time_since_epoch()};
}

date::sys_seconds sys_of(date::local_seconds at) {
    return date::sys_seconds{at.time_since_epoch()};
}

// The instant a tick at local time `at` fires: its only occurrence, its first when the
// clocks went back, the end of the gap when they skipped it.
date::sys_seconds instant_of(const date::time_zone* zone, date::local_seconds at) {
    if (!zone) return sys_of(at);
    auto shift = listed_shift(*zone, at);
    auto info = zone->get_info(at + shift);
    if (info.result == date::local_info::nonexistent) return info.first.end - shift;
    return sys_of(at) - info.first.offset;
}

// The earliest local time whose tick can come after `after`: the next second, or, when
// `after` is in the second pass of a repeated hour, the end of that hour (the times in it
// fired in the first pass).
date::local_seconds first_candidate(const date::time_zone* zone, date::sys_seconds after) {
    if (!zone) return local_of(after) + seconds{1};
    auto offset = zone->get_info(after + listed_shift(*zone, after)).offset;
    auto local = local_of(after) + offset;
    auto shift = listed_shift(*zone, local);
    auto info = zone->get_info(local + shift);
    if (info.result == date::local_info::ambiguous && after + shift >= info.second.begin)
        return local_of(info.first.end - shift) + info.first.offset;
    return local + seconds{1};
}

// ---- The calendar search ----

// The lowest set bit at or above `from`, or -1.
int next_bit(std::uint64_t mask, int from) {
    if (from >= 64) return -1;
    auto rest = mask & (~std::uint64_t{0} << from);
    return rest ? std::countr_zero(rest) : -1;
}

bool day_matches(const fields& f, unsigned day, unsigned weekday) {
    bool by_day = f.days >> day & 1;
    bool by_weekday = f.weekdays >> weekday & 1;
    if (f.any_day || f.any_weekday) return by_day && by_weekday;
    return by_day || by_weekday;
}

// The first time of day (seconds after midnight) at or after `from` that matches, or -1.
int first_time_of_day(const fields& f, int from) {
    int from_hour = from / 3600;
    int from_minute = from / 60 % 60;
    for (int h = next_bit(f.hours, from_hour); h >= 0; h = next_bit(f.hours, h + 1)) {
        bool same_hour = h == from_hour;
        for (int m = next_bit(f.minutes, same_hour ? from_minute : 0); m >= 0;
             m = next_bit(f.minutes, m + 1)) {
            int s = next_bit(f.seconds, same_hour && m == from_minute ? from % 60 : 0);
            if (s >= 0) return h * 3600 + m * 60 + s;
        }
    }
    return -1;
}

// The first local time at or after `from`, up to the end of `last_year`, that matches.
std::optional<date::local_seconds> next_local(const fields& f, date::local_seconds from,
                                              int last_year) {
    auto from_day = date::floor<date::days>(from);
    date::year_month_day start{from_day};
    int from_year = static_cast<int>(start.year());
    int from_month = static_cast<int>(static_cast<unsigned>(start.month()));
    unsigned from_date = static_cast<unsigned>(start.day());
    for (int year = from_year; year <= last_year; ++year) {
        for (int month = next_bit(f.months, year == from_year ? from_month : 1); month > 0;
             month = next_bit(f.months, month + 1)) {
            bool same_month = year == from_year && month == from_month;
            auto month_of_year = date::year{year} / date::month{static_cast<unsigned>(month)};
            auto first_day = date::local_days{month_of_year / 1};
            auto days = static_cast<unsigned>((month_of_year / date::last).day());
            for (unsigned day = same_month ? from_date : 1; day <= days; ++day) {
                auto today = first_day + date::days{day - 1};
                if (!day_matches(f, day, date::weekday{today}.c_encoding())) continue;
                bool same_day = same_month && day == from_date;
                int at = first_time_of_day(
                    f, same_day ? static_cast<int>((from - from_day).count()) : 0);
                if (at >= 0) return today + seconds{at};
            }
        }
    }
    return std::nullopt;
}

}  // namespace

keel::expected<cron_schedule, cron_error> cron_schedule::parse(std::string_view expression,
                                                               std::string_view zone) {
    auto parsed = parse_expression(expression);
    if (!parsed) return keel::unexpected(std::move(parsed).error());
    auto found = find_zone(zone);
    if (!found) return keel::unexpected(std::move(found).error());
    cron_schedule schedule;
    schedule.expression_ = std::string(expression);
    schedule.zone_name_ = std::string(zone);
    schedule.fields_ = *parsed;
    schedule.zone_ = *found;
    return schedule;
}

std::optional<time_point> cron_schedule::next_after(time_point t) const {
    auto zone = as_zone(zone_);
    auto after = date::floor<seconds>(t);
    auto from = first_candidate(zone, after);
    auto last_year = static_cast<int>(date::year_month_day{date::floor<date::days>(from)}.year()) +
                     horizon_years;
    // Local times map to instants in order, so the first match normally fires after `after`.
    while (auto local = next_local(fields_, from, last_year)) {
        auto instant = instant_of(zone, *local);
        if (instant > after) {
            if (instant > date::floor<seconds>(time_point::max())) return std::nullopt;
            return time_point{instant};
        }
        from = *local + seconds{1};
    }
    return std::nullopt;
}

std::vector<time_point> cron_schedule::ticks_between(time_point from, time_point to,
                                                     std::size_t limit) const {
    std::vector<time_point> ticks;
    for (auto at = from; ticks.size() < limit;) {
        auto next = next_after(at);
        if (!next || *next > to) break;
        ticks.push_back(*next);
        at = *next;
    }
    return ticks;
}

}  // namespace keel::process
