#include "format.hpp"

#include <algorithm>
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

// Reads the fixed-width fields of an RFC 3339 time from left to right.
class time_reader {
  public:
    explicit time_reader(std::string_view text) : text_(text) {}

    bool number(std::size_t digits, int& out) {
        if (pos_ + digits > text_.size()) return false;
        out = 0;
        for (std::size_t i = 0; i < digits; ++i) {
            char c = text_[pos_ + i];
            if (c < '0' || c > '9') return false;
            out = out * 10 + (c - '0');
        }
        pos_ += digits;
        return true;
    }
    bool literal(std::string_view choices) {
        if (pos_ >= text_.size() || choices.find(text_[pos_]) == std::string_view::npos)
            return false;
        ++pos_;
        return true;
    }
    char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
    // Fractional seconds after the '.', as milliseconds (further digits are dropped).
    bool milliseconds(int& out) {
        out = 0;
        std::size_t digits = 0;
        while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
            if (digits < 3) out = out * 10 + (text_[pos_] - '0');
            ++digits;
            ++pos_;
        }
        for (auto d = digits; d < 3; ++d) out *= 10;
        return digits > 0;
    }
    bool done() const { return pos_ == text_.size(); }

  private:
    std::string_view text_;
    std::size_t pos_ = 0;
};

// The offset from UTC at the end of an RFC 3339 time ("Z", "+02:00"), in minutes.
std::optional<int> read_offset(time_reader& in) {
    if (in.literal("Zz")) return 0;
    bool negative = in.peek() == '-';
    int hours = 0, minutes = 0;
    if (!in.literal("+-") || !in.number(2, hours) || !in.literal(":") || !in.number(2, minutes))
        return std::nullopt;
    if (hours > 23 || minutes > 59) return std::nullopt;
    return (negative ? -1 : 1) * (hours * 60 + minutes);
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
    using namespace std::chrono;
    time_reader in(text);
    int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0, ms = 0;
    if (!in.number(4, y) || !in.literal("-") || !in.number(2, mo) || !in.literal("-") ||
        !in.number(2, d) || !in.literal("Tt ") || !in.number(2, h) || !in.literal(":") ||
        !in.number(2, mi) || !in.literal(":") || !in.number(2, s))
        return std::nullopt;
    if (in.literal(".") && !in.milliseconds(ms)) return std::nullopt;
    auto offset = read_offset(in);
    year_month_day date{year{y}, month{static_cast<unsigned>(mo)}, day{static_cast<unsigned>(d)}};
    if (!offset || !in.done() || !date.ok() || h > 23 || mi > 59 || s > 60) return std::nullopt;
    return time_point(sys_days(date)) + hours(h) + minutes(mi) + seconds(std::min(s, 59)) +
           milliseconds(ms) - minutes(*offset);
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
