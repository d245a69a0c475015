#include "format.hpp"

#include <algorithm>
#include <keel/framework/rfc3339.hpp>
#include <numeric>

namespace keel::cli {

namespace {

constexpr std::string_view ellipsis = "…";
constexpr std::size_t column_gap = 2;

bool starts_code_point(char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
}

// The byte offset just past the first `points` code points of `text`.
std::size_t byte_offset(std::string_view text, std::size_t points) {
    std::size_t seen = 0;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (!starts_code_point(text[i])) continue;
        if (seen == points) return i;
        ++seen;
    }
    return text.size();
}

std::string fit_cell(std::string_view text, std::size_t width, elide shrink) {
    if (shrink == elide::middle) return truncate_middle(text, width);
    return truncate_end(text, width);
}

std::string pad(std::string_view text, std::size_t width, align alignment) {
    std::string spaces(width - std::min(width, display_width(text)), ' ');
    return alignment == align::left ? std::string(text) + spaces : spaces + std::string(text);
}

std::string render_line(const std::vector<column>& columns, const row& cells,
                        const std::vector<std::size_t>& widths, std::string_view indent) {
    std::string line(indent);
    for (std::size_t i = 0; i < columns.size(); ++i) {
        if (i > 0) line.append(column_gap, ' ');
        auto cell = i < cells.size() ? one_line(cells[i]) : std::string();
        line += pad(fit_cell(cell, widths[i], columns[i].shrink), widths[i], columns[i].alignment);
    }
    line.erase(line.find_last_not_of(' ') + 1);
    return line + "\n";
}

std::size_t table_width(const std::vector<std::size_t>& widths) {
    auto cells = std::accumulate(widths.begin(), widths.end(), std::size_t{0});
    return widths.empty() ? 0 : cells + column_gap * (widths.size() - 1);
}

// Index of the widest column that may still shrink, or columns.size() when none may.
std::size_t widest_shrinkable(const std::vector<column>& columns,
                              const std::vector<std::size_t>& widths,
                              const std::vector<std::size_t>& floors) {
    auto best = columns.size();
    for (std::size_t i = 0; i < columns.size(); ++i) {
        if (columns[i].shrink == elide::none || widths[i] <= floors[i]) continue;
        if (best == columns.size() || widths[i] >= widths[best]) best = i;
    }
    return best;
}

std::string unit_amount(std::chrono::milliseconds span) {
    using namespace std::chrono;
    auto s = duration_cast<seconds>(span).count();
    if (s < 60) return std::to_string(s) + "s";
    if (s < 3600) return std::to_string(s / 60) + "m";
    if (s < 86400) return std::to_string(s / 3600) + "h";
    return std::to_string(s / 86400) + "d";
}

}  // namespace

std::size_t display_width(std::string_view text) {
    return static_cast<std::size_t>(std::count_if(text.begin(), text.end(), starts_code_point));
}

std::string truncate_end(std::string_view text, std::size_t width) {
    if (display_width(text) <= width) return std::string(text);
    if (width == 0) return {};
    return std::string(text.substr(0, byte_offset(text, width - 1))) + std::string(ellipsis);
}

std::string truncate_middle(std::string_view text, std::size_t width) {
    auto total = display_width(text);
    if (total <= width) return std::string(text);
    if (width == 0) return {};
    auto head = width / 2;
    auto tail = width - 1 - head;
    return std::string(text.substr(0, byte_offset(text, head))) + std::string(ellipsis) +
           std::string(text.substr(byte_offset(text, total - tail)));
}

std::string one_line(std::string_view text) {
    std::string out(text);
    for (auto& c : out)
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) c = ' ';
    return out;
}

std::vector<std::size_t> fit_columns(const std::vector<column>& columns,
                                     const std::vector<row>& rows, std::size_t max_width) {
    std::vector<std::size_t> widths, floors;
    for (std::size_t i = 0; i < columns.size(); ++i) {
        auto natural = display_width(columns[i].header);
        for (const auto& r : rows)
            if (i < r.size()) natural = std::max(natural, display_width(one_line(r[i])));
        auto floor = std::min(natural, columns[i].min_width);
        if (columns[i].shrink != elide::none)
            natural = std::min(natural, std::max(max_width, floor));
        widths.push_back(natural);
        floors.push_back(floor);
    }
    while (table_width(widths) > max_width) {
        auto i = widest_shrinkable(columns, widths, floors);
        if (i == columns.size()) break;
        --widths[i];
    }
    return widths;
}

std::string render_table(const std::vector<column>& columns, const std::vector<row>& rows,
                         std::size_t max_width, std::string_view indent) {
    auto room = max_width - std::min(max_width, display_width(indent));
    auto widths = fit_columns(columns, rows, room);
    row headers;
    for (const auto& c : columns) headers.push_back(c.header);
    auto out = render_line(columns, headers, widths, indent);
    for (const auto& r : rows) out += render_line(columns, r, widths, indent);
    return out;
}

std::optional<time_point> parse_time(std::string_view text) {
    auto at = parse_rfc3339(text);
    if (!at) return std::nullopt;
    return std::chrono::floor<std::chrono::milliseconds>(*at);
}

std::string relative_time(time_point at, time_point now) {
    auto span = now - at;
    bool future = span < span.zero();
    if (future) span = -span;
    if (span < std::chrono::seconds(1)) return "now";
    auto amount = unit_amount(span);
    return future ? "in " + amount : amount + " ago";
}

std::string relative_time(std::string_view text, time_point now) {
    auto at = parse_time(text);
    return at ? relative_time(*at, now) : std::string(text);
}

std::string absolute_and_relative(std::string_view text, time_point now) {
    auto at = parse_time(text);
    return at ? std::string(text) + " (" + relative_time(*at, now) + ")" : std::string(text);
}

}  // namespace keel::cli
