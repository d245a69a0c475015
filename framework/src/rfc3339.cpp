#include <fmt/format.h>

#include <chrono>
#include <keel/framework/rfc3339.hpp>

namespace keel {
namespace {

// Reads an RFC 3339 time left to right.
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
    // One character out of `choices`.
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

// The offset from UTC at the end ("Z", "+02:00"), in minutes.
std::optional<int> read_offset(time_reader& in) {
    if (in.literal("Zz")) return 0;
    bool negative = in.peek() == '-';
    int hours = 0, minutes = 0;
    if (!in.literal("+- ") || !in.number(2, hours) || !in.literal(":") || !in.number(2, minutes))
        return std::nullopt;
    if (hours > 23 || minutes > 59) return std::nullopt;
    return (negative ? -1 : 1) * (hours * 60 + minutes);
}

}  // namespace

std::optional<time_point> parse_rfc3339(std::string_view text) {
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
    auto at = sys_days(date) + hours(h) + minutes(mi) + seconds(std::min(s, 59)) +
              milliseconds(ms) - minutes(*offset);
    // time_point counts nanoseconds: about 1678 to 2262.
    constexpr auto earliest = ceil<milliseconds>(time_point::min());
    constexpr auto latest = floor<milliseconds>(time_point::max());
    if (at < earliest || at > latest) return std::nullopt;
    return time_point(at);
}

std::string format_rfc3339(time_point t) {
    using namespace std::chrono;
    auto ms = floor<milliseconds>(t);
    auto day = floor<days>(ms);
    year_month_day date(day);
    hh_mm_ss clock(ms - day);
    return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", static_cast<int>(date.year()),
                       static_cast<unsigned>(date.month()), static_cast<unsigned>(date.day()),
                       clock.hours().count(), clock.minutes().count(), clock.seconds().count(),
                       clock.subseconds().count());
}

}  // namespace keel
