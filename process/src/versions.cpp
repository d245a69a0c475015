#include <algorithm>
#include <cctype>
#include <keel/process/store.hpp>

namespace keel::process {

namespace {

bool is_digit(char c) noexcept {
    return std::isdigit(static_cast<unsigned char>(c)) != 0;
}

// The run of digits (or of other characters) that starts at `at`.
std::string_view run_at(std::string_view s, std::size_t at) noexcept {
    bool digits = is_digit(s[at]);
    std::size_t end = at;
    while (end < s.size() && is_digit(s[end]) == digits) ++end;
    return s.substr(at, end - at);
}

int compare_numbers(std::string_view a, std::string_view b) noexcept {
    a.remove_prefix(std::min(a.find_first_not_of('0'), a.size()));
    b.remove_prefix(std::min(b.find_first_not_of('0'), b.size()));
    if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
    return a.compare(b);
}

}  // namespace

int compare_versions(std::string_view a, std::string_view b) noexcept {
    std::size_t i = 0;
    std::size_t j = 0;
    while (i < a.size() && j < b.size()) {
        auto x = run_at(a, i);
        auto y = run_at(b, j);
        int c = 0;
        if (is_digit(x.front()) && is_digit(y.front()))
            c = compare_numbers(x, y);
        else
            c = x.compare(y);
        if (c != 0) return c < 0 ? -1 : 1;
        i += x.size();
        j += y.size();
    }
    if (i < a.size()) return 1;
    if (j < b.size()) return -1;
    int c = a.compare(b);  // "09" after "9": equal as numbers, still different versions
    return c < 0 ? -1 : c > 0 ? 1 : 0;
}

bool refuses(const version_refusals& refused, std::string_view definition,
             std::string_view version) noexcept {
    return std::ranges::any_of(
        refused, [&](const auto& r) { return r.first == definition && r.second == version; });
}

}  // namespace keel::process
