#pragma once

// Pure text formatting for keel's human output: display widths of UTF-8 text, truncation
// with an ellipsis, tables fitted into 100 columns, and times shown relative to now
// ("3m ago", "in 2h"). No I/O and no clock: `now` is always a parameter, so every
// function here is unit-tested as is.

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace keel::cli {

// Terminal columns keel's tables fit into.
inline constexpr std::size_t line_width = 100;

// Columns taken by `text`: one per UTF-8 code point (wide characters are not special).
std::size_t display_width(std::string_view text);
// `text` cut to `width` columns, ending in "…" when anything was cut.
std::string truncate_end(std::string_view text, std::size_t width);
// `text` cut to `width` columns by replacing its middle with "…": keeps both the start
// and the end of ids and paths ("fulfil/o-17…/received").
std::string truncate_middle(std::string_view text, std::size_t width);
// `text` with every control character (newline, tab, escape, ...) replaced by a space.
std::string one_line(std::string_view text);

enum class align { left, right };
// How a column gives way when the table is too wide: not at all, or by truncating its
// cells at the end or in the middle.
enum class elide { none, end, middle };

struct column {
    std::string header;
    elide shrink = elide::end;
    align alignment = align::left;
    std::size_t min_width = 6;  // never shrunk below this (or its widest cell, if narrower)
};

using row = std::vector<std::string>;

// The width of each column: its widest cell or header, then, while the table (columns
// two spaces apart) is wider than `max_width`, the widest shrinkable column loses one.
std::vector<std::size_t> fit_columns(const std::vector<column>& columns,
                                     const std::vector<row>& rows, std::size_t max_width);
// A header row and the rows, columns fitted into `max_width` and aligned; every line
// starts with `indent` (counted in the width) and ends in '\n' without trailing spaces.
std::string render_table(const std::vector<column>& columns, const std::vector<row>& rows,
                         std::size_t max_width = line_width, std::string_view indent = {});

using time_point = std::chrono::sys_time<std::chrono::milliseconds>;

// An RFC 3339 time ("2026-11-23T10:00:00.123Z", "2026-11-23T12:00:00+02:00"); empty when
// `text` is not one.
std::optional<time_point> parse_time(std::string_view text);
// "now", "42s ago", "3m ago", "5h ago", "2d ago", "in 2h": the largest whole unit, up to
// days.
std::string relative_time(time_point at, time_point now);
// The relative form of an RFC 3339 time, or `text` as is when it does not parse.
std::string relative_time(std::string_view text, time_point now);
// "2026-11-23T10:00:00.123Z (3m ago)", or `text` as is when it does not parse.
std::string absolute_and_relative(std::string_view text, time_point now);

}  // namespace keel::cli
