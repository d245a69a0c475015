// The pure functions behind keel's output and requests: widths and truncation of UTF-8
// text, tables fitted into 100 columns, RFC 3339 and relative times, percent-encoding of
// ids and query parameters, URLs, problem messages and the exit code of a status.

#include "format.hpp"

#include <gtest/gtest.h>

#include <sstream>

#include "encoding.hpp"
#include "errors.hpp"
#include "http_client.hpp"

namespace keel::cli {
namespace {

using namespace std::chrono;

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
}

time_point at(int y, unsigned mo, unsigned d, int h, int mi, int s, int ms = 0) {
    return time_point(sys_days(year{y} / month{mo} / day{d})) + hours(h) + minutes(mi) +
           seconds(s) + milliseconds(ms);
}

TEST(display_width, counts_code_points_not_bytes) {
    EXPECT_EQ(display_width(""), 0u);
    EXPECT_EQ(display_width("fulfil/o-17"), 11u);
    EXPECT_EQ(display_width("héllo"), 5u);
    EXPECT_EQ(display_width("…"), 1u);
}

TEST(truncate_end, keeps_text_that_fits_and_ends_cut_text_in_an_ellipsis) {
    EXPECT_EQ(truncate_end("abcdef", 6), "abcdef");
    EXPECT_EQ(truncate_end("abcdef", 10), "abcdef");
    EXPECT_EQ(truncate_end("abcdef", 4), "abc…");
    EXPECT_EQ(truncate_end("abcdef", 1), "…");
    EXPECT_EQ(truncate_end("abcdef", 0), "");
}

TEST(truncate_end, never_splits_a_multibyte_character) {
    auto cut = truncate_end("ééééé", 3);
    EXPECT_EQ(cut, "éé…");
    EXPECT_EQ(display_width(cut), 3u);
}

TEST(truncate_middle, keeps_the_start_and_the_end_of_an_id) {
    auto cut = truncate_middle("fulfil/order-123456789/received", 15);
    EXPECT_EQ(display_width(cut), 15u);
    EXPECT_EQ(cut, "fulfil/…eceived");
    EXPECT_EQ(truncate_middle("fulfil/o-17", 11), "fulfil/o-17");
    EXPECT_EQ(truncate_middle("abcdef", 1), "…");
    EXPECT_EQ(truncate_middle("abcdef", 0), "");
}

TEST(truncate_middle, never_splits_a_multibyte_character) {
    auto cut = truncate_middle("ü-ü-ü-ü-ü-ü", 5);
    EXPECT_EQ(cut, "ü-…-ü");
    EXPECT_EQ(display_width(cut), 5u);
}

TEST(one_line, replaces_control_characters_with_spaces) {
    EXPECT_EQ(one_line("a\nb\tc\x1b[0m\x7f"), "a b c [0m ");
}

TEST(fit_columns, leaves_a_table_that_fits_as_it_is) {
    std::vector<column> columns{{"ID"}, {"STATUS", elide::none}};
    std::vector<row> rows{{"fulfil/o-17", "suspended"}};
    EXPECT_EQ(fit_columns(columns, rows, 100), (std::vector<std::size_t>{11, 9}));
}

TEST(fit_columns, shrinks_the_widest_shrinkable_columns_until_the_table_fits) {
    std::vector<column> columns{{"ID", elide::middle}, {"STATUS", elide::none}, {"VALUE"}};
    std::vector<row> rows{{std::string(80, 'i'), "suspended", std::string(300, 'v')}};
    auto widths = fit_columns(columns, rows, 100);
    EXPECT_EQ(widths[1], 9u) << "a column that may not shrink keeps its width";
    EXPECT_EQ(widths[0] + widths[1] + widths[2] + 2 * 2, 100u);
    EXPECT_LE(widths[0] > widths[2] ? widths[0] - widths[2] : widths[2] - widths[0], 1u)
        << "the widest column gives way first, so both end up about equal";
}

TEST(fit_columns, never_shrinks_below_the_minimum_width) {
    std::vector<column> columns{{"A", elide::end, align::left, 10}, {"B", elide::none}};
    std::vector<row> rows{{std::string(50, 'a'), std::string(95, 'b')}};
    auto widths = fit_columns(columns, rows, 100);
    EXPECT_EQ(widths[0], 10u);
    EXPECT_EQ(widths[1], 95u);
}

TEST(render_table, fits_every_line_into_100_columns_and_elides_long_cells) {
    std::vector<column> columns{{"ID", elide::middle, align::left, 12},
                                {"DEFINITION", elide::end, align::left, 10},
                                {"STATUS", elide::none},
                                {"VALUE"}};
    std::vector<row> rows{{"fulfil/" + std::string(120, 'x') + "/end", "order_fulfillment",
                           "suspended", std::string(200, 'v')},
                          {"fulfil/o-17", "order_fulfillment", "running", "{}"}};
    auto lines = lines_of(render_table(columns, rows));
    ASSERT_EQ(lines.size(), 3u);
    for (const auto& line : lines) EXPECT_LE(display_width(line), 100u) << line;
    EXPECT_EQ(lines[0].rfind("ID", 0), 0u);
    EXPECT_NE(lines[0].find("DEFINITION"), std::string::npos);
    EXPECT_NE(lines[1].find("fulfil/"), std::string::npos);
    EXPECT_NE(lines[1].find("…"), std::string::npos);
    EXPECT_NE(lines[1].find("/end"), std::string::npos) << "an id keeps its end";
    EXPECT_NE(lines[1].find("suspended"), std::string::npos);
}

TEST(render_table, aligns_columns_and_trims_trailing_spaces) {
    std::vector<column> columns{{"NAME"}, {"N", elide::none, align::right}};
    auto text = render_table(columns, {{"a", "7"}, {"longer", "123"}});
    EXPECT_EQ(text, "NAME      N\na         7\nlonger  123\n");
}

TEST(render_table, puts_the_indent_in_front_of_every_line_within_the_width) {
    std::vector<column> columns{{"PATH", elide::middle}};
    auto lines = lines_of(render_table(columns, {{std::string(150, 'p')}}, 100, "  "));
    ASSERT_EQ(lines.size(), 2u);
    for (const auto& line : lines) {
        EXPECT_EQ(line.rfind("  ", 0), 0u);
        EXPECT_LE(display_width(line), 100u);
    }
    EXPECT_EQ(display_width(lines[1]), 100u);
}

TEST(render_table, keeps_cells_on_one_line) {
    auto lines = lines_of(render_table({{"V"}}, {{"two\nlines"}}));
    ASSERT_EQ(lines.size(), 2u);
    EXPECT_EQ(lines[1], "two lines");
}

TEST(parse_time, reads_rfc3339_in_utc_and_with_offsets) {
    EXPECT_EQ(parse_time("2026-11-23T10:00:00.123Z"), at(2026, 11, 23, 10, 0, 0, 123));
    EXPECT_EQ(parse_time("2026-11-23T10:00:00Z"), at(2026, 11, 23, 10, 0, 0));
    EXPECT_EQ(parse_time("2026-11-23t10:00:00.5z"), at(2026, 11, 23, 10, 0, 0, 500));
    EXPECT_EQ(parse_time("2026-11-23T12:00:00.123456+02:00"), at(2026, 11, 23, 10, 0, 0, 123));
    EXPECT_EQ(parse_time("2026-11-23T08:30:00-01:30"), at(2026, 11, 23, 10, 0, 0));
}

TEST(parse_time, refuses_anything_else) {
    for (auto text : {"", "yesterday", "2026-11-23", "2026-11-23T10:00:00", "2026-13-01T10:00:00Z",
                      "2026-02-30T10:00:00Z", "2026-11-23T24:00:00Z", "2026-11-23T10:00:00.Z",
                      "2026-11-23T10:00:00Zjunk", "2026-11-23T10:00Z"})
        EXPECT_FALSE(parse_time(text).has_value()) << text;
}

TEST(relative_time, uses_the_largest_whole_unit_in_the_past_and_the_future) {
    auto now = at(2026, 11, 23, 10, 0, 0);
    EXPECT_EQ(relative_time(now, now), "now");
    EXPECT_EQ(relative_time(now - milliseconds(999), now), "now");
    EXPECT_EQ(relative_time(now - seconds(42), now), "42s ago");
    EXPECT_EQ(relative_time(now - seconds(59), now), "59s ago");
    EXPECT_EQ(relative_time(now - seconds(60), now), "1m ago");
    EXPECT_EQ(relative_time(now - minutes(3) - seconds(50), now), "3m ago");
    EXPECT_EQ(relative_time(now - hours(5), now), "5h ago");
    EXPECT_EQ(relative_time(now - hours(23) - minutes(59), now), "23h ago");
    EXPECT_EQ(relative_time(now - hours(50), now), "2d ago");
    EXPECT_EQ(relative_time(now + hours(2), now), "in 2h");
    EXPECT_EQ(relative_time(now + seconds(5), now), "in 5s");
    EXPECT_EQ(relative_time(now + days(3), now), "in 3d");
}

TEST(relative_time, shows_text_that_is_not_a_time_as_it_is) {
    auto now = at(2026, 11, 23, 10, 0, 0);
    EXPECT_EQ(relative_time("2026-11-23T09:57:00.000Z", now), "3m ago");
    EXPECT_EQ(relative_time("soon", now), "soon");
    EXPECT_EQ(relative_time("", now), "");
    EXPECT_EQ(absolute_and_relative("2026-11-23T12:00:00.000Z", now),
              "2026-11-23T12:00:00.000Z (in 2h)");
    EXPECT_EQ(absolute_and_relative("?", now), "?");
}

TEST(percent_encode, keeps_unreserved_characters_and_slashes) {
    EXPECT_EQ(percent_encode("fulfil/o-17"), "fulfil/o-17");
    EXPECT_EQ(percent_encode("AZaz09-._~/"), "AZaz09-._~/");
}

TEST(percent_encode, encodes_every_other_byte) {
    EXPECT_EQ(percent_encode("o 17?x#y%z&a=b+c"), "o%2017%3Fx%23y%25z%26a%3Db%2Bc");
    EXPECT_EQ(percent_encode("ü"), "%C3%BC");
    EXPECT_EQ(percent_encode(std::string("\n\0:", 3)), "%0A%00%3A");
}

TEST(query_string, encodes_values_and_leaves_out_empty_ones) {
    EXPECT_EQ(query_string({}), "");
    EXPECT_EQ(query_string({{"status", ""}}), "");
    EXPECT_EQ(query_string({{"definition", "order_fulfillment"},
                            {"status", ""},
                            {"since", "2026-11-23T10:00:00+01:00"},
                            {"prefix", "fulfil/o 1"}}),
              "?definition=order_fulfillment&since=2026-11-23T10%3A00%3A00%2B01%3A00"
              "&prefix=fulfil/o%201");
}

TEST(shell_quote, quotes_only_what_the_shell_would_change) {
    EXPECT_EQ(shell_quote("abc-123_=="), "abc-123_==");
    EXPECT_EQ(shell_quote("a b"), "'a b'");
    EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
    EXPECT_EQ(shell_quote(""), "''");
}

TEST(exit_code_for_status, is_ok_for_2xx_only) {
    for (int status : {200, 201, 202, 204, 299})
        EXPECT_EQ(exit_code_for_status(status), exit_code::ok) << status;
    for (int status : {100, 199, 301, 400, 401, 404, 409, 500, 503})
        EXPECT_EQ(exit_code_for_status(status), exit_code::failed) << status;
    EXPECT_EQ(to_int(exit_code::ok), 0);
    EXPECT_EQ(to_int(exit_code::failed), 1);
    EXPECT_EQ(to_int(exit_code::usage), 2);
}

TEST(problem_message, shows_the_status_title_and_detail_of_a_problem) {
    EXPECT_EQ(problem_message(409, R"({"title": "Conflict", "status": 409,
                                       "detail": "instance fulfil/o-17 is completed"})"),
              "409 Conflict: instance fulfil/o-17 is completed");
    EXPECT_EQ(problem_message(400, R"({"detail": "bad limit"})"), "400 Bad Request: bad limit");
    EXPECT_EQ(problem_message(404, R"({"title": "No such instance"})"), "404 No such instance");
}

TEST(problem_message, shows_the_start_of_a_body_that_is_not_a_problem) {
    EXPECT_EQ(problem_message(502, ""), "502 Bad Gateway");
    EXPECT_EQ(problem_message(502, "upstream down\nmore"), "502 Bad Gateway: upstream down");
    auto long_body = problem_message(500, std::string(1000, 'x'));
    EXPECT_LT(long_body.size(), 300u);
    EXPECT_EQ(problem_message(599, "odd"), "599: odd");
}

TEST(parse_url, reads_host_port_and_base_path) {
    auto u = parse_url("http://127.0.0.1:8080");
    EXPECT_EQ(u.host, "127.0.0.1");
    EXPECT_EQ(u.port, "8080");
    EXPECT_EQ(u.base_path, "");
    u = parse_url("HTTP://admin.example/keel/");
    EXPECT_EQ(u.host, "admin.example");
    EXPECT_EQ(u.port, "80");
    EXPECT_EQ(u.base_path, "/keel");
    u = parse_url("http://[::1]:9090/");
    EXPECT_EQ(u.host, "::1");
    EXPECT_EQ(u.port, "9090");
}

TEST(parse_url, refuses_https_with_a_clear_message) {
    try {
        parse_url("https://admin.example");
        FAIL() << "https was accepted";
    } catch (const usage_error& e) {
        EXPECT_NE(std::string(e.what()).find("https:// is not supported"), std::string::npos);
    }
}

TEST(parse_url, refuses_what_it_cannot_use) {
    for (auto text :
         {"", "127.0.0.1:8080", "ftp://x", "http://", "http://:80", "http://x:0", "http://x:99999",
          "http://x:8o", "http://u:p@x", "http://x/?q=1", "http://[::1"})
        EXPECT_THROW(parse_url(text), usage_error) << text;
}

}  // namespace
}  // namespace keel::cli
