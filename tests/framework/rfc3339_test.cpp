// keel::parse_rfc3339 and keel::format_rfc3339 (framework/include/keel/framework/rfc3339.hpp).

#include <gtest/gtest.h>

#include <keel/framework/rfc3339.hpp>

namespace {

using namespace std::chrono;

keel::time_point at(int y, unsigned mo, unsigned d, int h, int mi, int s, int ms = 0) {
    return keel::time_point(sys_days(year{y} / month{mo} / day{d})) + hours(h) + minutes(mi) +
           seconds(s) + milliseconds(ms);
}

TEST(rfc3339, reads_utc_and_every_offset) {
    EXPECT_EQ(keel::parse_rfc3339("2026-11-23T10:00:00.123Z"), at(2026, 11, 23, 10, 0, 0, 123));
    EXPECT_EQ(keel::parse_rfc3339("2026-11-23T10:00:00Z"), at(2026, 11, 23, 10, 0, 0));
    EXPECT_EQ(keel::parse_rfc3339("2026-11-23t10:00:00.5z"), at(2026, 11, 23, 10, 0, 0, 500));
    EXPECT_EQ(keel::parse_rfc3339("2026-11-23 10:00:00Z"), at(2026, 11, 23, 10, 0, 0));
    EXPECT_EQ(keel::parse_rfc3339("2026-11-23T12:00:00.123456+02:00"),
              at(2026, 11, 23, 10, 0, 0, 123));
    EXPECT_EQ(keel::parse_rfc3339("2026-11-23T08:30:00-01:30"), at(2026, 11, 23, 10, 0, 0));
    EXPECT_EQ(keel::parse_rfc3339("2026-11-24T00:30:00+14:30"), at(2026, 11, 23, 10, 0, 0));
    EXPECT_EQ(keel::parse_rfc3339("2016-12-31T23:59:60Z"), at(2016, 12, 31, 23, 59, 59));
}

// "?since=2026-11-23T11:00:00+01:00" sent unencoded reaches the handler with a space.
TEST(rfc3339, reads_a_plus_that_a_query_string_made_a_space) {
    EXPECT_EQ(keel::parse_rfc3339("2026-11-23T11:00:00 01:00"), at(2026, 11, 23, 10, 0, 0));
}

TEST(rfc3339, refuses_anything_else) {
    for (auto text : {"", "yesterday", "2026-11-23", "2026-11-23T10:00:00", "2026-13-01T10:00:00Z",
                      "2026-02-30T10:00:00Z", "2026-11-23T24:00:00Z", "2026-11-23T10:60:00Z",
                      "2026-11-23T10:00:00.Z", "2026-11-23T10:00:00Zjunk", "2026-11-23T10:00Z",
                      "2026-11-23T10:00:00+2:00", "2026-11-23T10:00:00+24:00",
                      "2026-11-23T10:00:00+01:60", "2026-11-23T10:00:00+0100",
                      "0000-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "２026-11-23T10:00:00Z"})
        EXPECT_FALSE(keel::parse_rfc3339(text).has_value()) << text;
}

TEST(rfc3339, writes_utc_with_milliseconds_and_reads_it_back) {
    auto t = at(2026, 2, 3, 4, 5, 6, 7);
    EXPECT_EQ(keel::format_rfc3339(t), "2026-02-03T04:05:06.007Z");
    EXPECT_EQ(keel::parse_rfc3339(keel::format_rfc3339(t)), t);
    EXPECT_EQ(keel::format_rfc3339(t + microseconds(999)), "2026-02-03T04:05:06.007Z");
    EXPECT_EQ(keel::format_rfc3339(keel::time_point{}), "1970-01-01T00:00:00.000Z");
    EXPECT_EQ(keel::format_rfc3339(at(1969, 12, 31, 23, 59, 59, 999)), "1969-12-31T23:59:59.999Z");
}

}  // namespace
