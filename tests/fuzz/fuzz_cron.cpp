// fuzz_cron: keel::process::cron_schedule, the calendar of schedules.
//
// Input: a zone byte ('0' UTC, '1' Europe/Berlin, '2' America/New_York, '3' Australia/Lord_Howe,
// '4' Pacific/Apia, '5' Asia/Kathmandu; any byte, modulo 6), then the expression. A refused
// expression names a known field, in a short printable message that starts with it. An
// accepted one is read again here, independently (`reading`), and from each of a few fixed
// instants t, next_after(t) returns within a second a tick r > t (none only near the end of
// time_point's range) at which, in local time (date/tz, up to 2037, the years the zone files
// list):
// - r's wall-clock time matches, and r is its first occurrence when the clocks went back, or
//   r is the end of a gap (the clocks went forward at r) in which some time matches;
// - no matching wall-clock time fires in (t, r) (checked second by second when r - t is
//   at most two hours);
// and next_after from instants in (t, r) gives r again, as ticks_between(t, r) does.

#include <date/date.h>
#include <date/tz.h>

#include <array>
#include <bitset>
#include <cctype>
#include <chrono>
#include <keel/process/cron.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.hpp"

namespace {

using keel::process::cron_schedule;
using std::chrono::seconds;

constexpr std::array<const char*, 6> zone_names{
    "UTC",          "Europe/Berlin", "America/New_York", "Australia/Lord_Howe",
    "Pacific/Apia", "Asia/Kathmandu"};

// ---- An independent reading of an accepted expression ----

struct field {
    int min;
    int max;  // of `*` and of `a/n`
    std::vector<std::string_view> names;
    int first_named;
};

const std::array<field, 6> fields{{
    {0, 59, {}, 0},
    {0, 59, {}, 0},
    {0, 23, {}, 0},
    {1, 31, {}, 0},
    {1,
     12,
     {"JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"},
     1},
    {0, 6, {"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}, 0},
}};

struct reading {
    std::array<std::bitset<64>, 6> values;  // second, minute, hour, day, month, weekday
    bool any_day = false;
    bool any_weekday = false;

    bool matches(date::local_seconds at) const {
        auto day = date::floor<date::days>(at);
        date::year_month_day ymd{day};
        date::hh_mm_ss time{at - day};
        bool by_day = values[3][static_cast<unsigned>(ymd.day())];
        bool by_weekday = values[5][date::weekday{day}.c_encoding()];
        bool day_ok = (any_day || any_weekday) ? by_day && by_weekday : by_day || by_weekday;
        return day_ok && values[0][time.seconds().count()] && values[1][time.minutes().count()] &&
               values[2][time.hours().count()] && values[4][static_cast<unsigned>(ymd.month())];
    }
};

std::vector<std::string> words(std::string_view text) {
    std::vector<std::string> out;
    std::string word;
    for (char c : std::string(text) + " ") {
        if (c == ' ' || c == '\t') {
            if (!word.empty()) out.push_back(word);
            word.clear();
        } else {
            word += c;
        }
    }
    return out;
}

std::vector<std::string> split(const std::string& text, char by) {
    std::vector<std::string> out;
    std::string part;
    for (char c : text + by) {
        if (c == by) {
            out.push_back(part);
            part.clear();
        } else {
            part += c;
        }
    }
    return out;
}

std::string upper(std::string text) {
    for (auto& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return text;
}

int value_of(const field& f, const std::string& text) {
    if (!text.empty() && std::isdigit(static_cast<unsigned char>(text[0]))) return std::stoi(text);
    for (std::size_t i = 0; i < f.names.size(); ++i)
        if (upper(text) == f.names[i]) return f.first_named + static_cast<int>(i);
    return -1000;
}

std::optional<reading> read(std::string_view expression) {
    auto parts = words(expression);
    if (parts.size() == 1) {
        auto alias = upper(parts[0]);
        if (alias == "@YEARLY" || alias == "@ANNUALLY") parts = words("0 0 1 1 *");
        if (alias == "@MONTHLY") parts = words("0 0 1 * *");
        if (alias == "@WEEKLY") parts = words("0 0 * * 0");
        if (alias == "@DAILY" || alias == "@MIDNIGHT") parts = words("0 0 * * *");
        if (alias == "@HOURLY") parts = words("0 * * * *");
    }
    if (parts.size() == 5) parts.insert(parts.begin(), "0");
    if (parts.size() != 6) return std::nullopt;
    reading r;
    for (std::size_t i = 0; i < 6; ++i) {
        for (const auto& item : split(parts[i], ',')) {
            auto step_at = item.find('/');
            auto base = item.substr(0, step_at);
            int step = step_at == std::string::npos ? 1 : std::stoi(item.substr(step_at + 1));
            int low = fields[i].min;
            int high = fields[i].max;
            if (base != "*" && base != "?") {
                auto dash = base.find('-');
                low = value_of(fields[i], base.substr(0, dash));
                high = dash != std::string::npos      ? value_of(fields[i], base.substr(dash + 1))
                       : step_at != std::string::npos ? std::max(fields[i].max, low)
                                                      : low;
            }
            if (low < 0 || step < 1) return std::nullopt;
            for (int v = low; v <= high; v += step) r.values[i][i == 5 ? v % 7 : v] = true;
        }
    }
    r.any_day = parts[3] == "*" || parts[3] == "?";
    r.any_weekday = parts[5] == "*" || parts[5] == "?";
    return r;
}

// ---- Checks ----

// The instant a tick at wall-clock time `at` fires, by the documented rule.
date::sys_seconds fires_at(const date::time_zone& zone, date::local_seconds at) {
    auto info = zone.get_info(at);
    if (info.result == date::local_info::nonexistent) return info.first.end;
    return date::sys_seconds{at.time_since_epoch()} - info.first.offset;
}

date::local_seconds local_of(const date::time_zone& zone, date::sys_seconds at) {
    return date::local_seconds{(at + zone.get_info(at).offset).time_since_epoch()};
}

void check_tick(const reading& r, const date::time_zone& zone, date::sys_seconds tick) {
    auto local = local_of(zone, tick);
    if (r.matches(local)) {
        KEEL_FUZZ_CHECK(fires_at(zone, local) == tick);
        return;
    }
    auto now = zone.get_info(tick);
    KEEL_FUZZ_CHECK(now.begin == tick);
    auto before = zone.get_info(tick - seconds{1});
    KEEL_FUZZ_CHECK(before.offset < now.offset);
    auto gap_start = date::local_seconds{(tick + before.offset).time_since_epoch()};
    bool some = false;
    for (auto at = gap_start; at < local && at < gap_start + date::days{2} && !some;
         at += seconds{1})
        some = r.matches(at);
    KEEL_FUZZ_CHECK(some);
}

void check_none_between(const reading& r, const date::time_zone& zone, date::sys_seconds after,
                        date::sys_seconds tick) {
    if (tick - after > std::chrono::hours{2}) return;
    auto last = local_of(zone, tick);
    for (auto at = local_of(zone, after) + seconds{1}; at < last; at += seconds{1}) {
        if (!r.matches(at)) continue;
        auto fires = fires_at(zone, at);
        KEEL_FUZZ_CHECK(fires <= after || fires >= tick);
    }
}

void check_from(const cron_schedule& schedule, const reading& r, const date::time_zone& zone,
                keel::time_point t) {
    auto started = std::chrono::steady_clock::now();
    auto next = schedule.next_after(t);
    KEEL_FUZZ_CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds{1});
    if (!next) {
        KEEL_FUZZ_CHECK(t > keel::time_point::max() - date::years{100});
        return;
    }
    KEEL_FUZZ_CHECK(*next > t);
    auto gap = *next - t;
    KEEL_FUZZ_CHECK(schedule.next_after(t + gap / 2) == next);
    KEEL_FUZZ_CHECK(schedule.next_after(*next - std::chrono::nanoseconds{1}) == next);
    KEEL_FUZZ_CHECK(schedule.ticks_between(t, *next, 3) == std::vector{*next});
    auto listed_end = keel::time_point{date::sys_days{date::year{2037} / 12 / 1}};
    if (*next >= listed_end) return;
    auto tick = date::floor<seconds>(*next);
    KEEL_FUZZ_CHECK(tick == *next);
    check_tick(r, zone, tick);
    check_none_between(r, zone, date::floor<seconds>(t), tick);
}

keel::time_point utc(int y, unsigned mo, unsigned d, int h, int mi, int s = 0) {
    auto day = date::sys_days{date::year{y} / date::month{mo} / date::day{d}};
    return keel::time_point{day + std::chrono::hours{h} + std::chrono::minutes{mi} + seconds{s}};
}

// Around the clock changes of the zones above, a leap day, the epoch, the ends of time_point.
const std::array<keel::time_point, 12> instants{
    utc(2025, 3, 30, 0, 59, 59),  // Berlin: 01:59:59 CET, then 03:00 CEST
    utc(2025, 10, 26, 0, 30),     // Berlin: 02:30 CEST, the first pass
    utc(2025, 3, 9, 6, 30),       // New York: 01:30 EST, before the gap
    utc(2025, 11, 2, 6, 10),      // New York: 01:10 EST, the second pass
    utc(2025, 4, 5, 15, 10),      // Lord Howe: 01:40 +10:30, the second pass
    utc(2025, 10, 4, 15, 20),     // Lord Howe: 01:50 +10:30, before the gap
    utc(2011, 12, 29, 9, 0),      // Apia: the day before 30 December 2011, which it skipped
    utc(2024, 2, 28, 23, 0),
    keel::time_point{std::chrono::milliseconds{500}},
    utc(2037, 11, 30, 23, 59, 59),
    keel::time_point::min(),
    keel::time_point::max() - std::chrono::hours{1},
};

bool printable(const std::string& text) {
    for (unsigned char c : text)
        if (c < 0x20 || c >= 0x7f) return false;
    return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    const char* zone_name = zone_names[data[0] % zone_names.size()];
    auto expression = keel::fuzz::as_text(data + 1, size - 1);
    auto schedule = cron_schedule::parse(expression, zone_name);
    if (!schedule) {
        const auto& e = schedule.error();
        KEEL_FUZZ_CHECK(e.field == "second" || e.field == "minute" || e.field == "hour" ||
                        e.field == "day of month" || e.field == "month" ||
                        e.field == "day of week" || e.field == "expression");
        KEEL_FUZZ_CHECK(e.message.starts_with(e.field + ": "));
        KEEL_FUZZ_CHECK(e.message.size() <= 300 && printable(e.message));
        return 0;
    }
    KEEL_FUZZ_CHECK(schedule->expression() == expression && schedule->zone() == zone_name);
    auto r = read(expression);
    KEEL_FUZZ_CHECK(r.has_value());
    const auto& zone = *date::locate_zone(zone_name);
    for (auto t : instants) check_from(*schedule, *r, zone, t);
    return 0;
}
