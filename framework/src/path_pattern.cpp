#include <keel/framework/path_pattern.hpp>
#include <stdexcept>

namespace keel {

namespace detail {
void fail_pattern_check(const char* why) {
    throw std::logic_error(why);
}
}  // namespace detail

std::vector<std::string_view> pattern_segments(std::string_view pattern) {
    std::vector<std::string_view> out;
    std::size_t i = pattern.starts_with('/') ? 1 : 0;
    while (i <= pattern.size()) {
        auto end = pattern.find('/', i);
        if (end == std::string_view::npos) end = pattern.size();
        out.push_back(pattern.substr(i, end - i));
        i = end + 1;
    }
    return out;
}

std::string fill_pattern(std::string_view pattern, const std::vector<std::string>& values,
                         std::string_view what) {
    std::string out;
    std::size_t next = 0;
    for (auto seg : pattern_segments(pattern)) {
        out += '/';
        if (!seg.starts_with(':')) {
            out += seg;
            continue;
        }
        if (next >= values.size())
            throw std::invalid_argument(std::string(what) + " " + std::string(pattern) +
                                        ": no value for parameter " + std::string(seg));
        const std::string& value = values[next++];
        if (value.empty() || value.find('/') != std::string::npos)
            throw std::invalid_argument(std::string(what) + " " + std::string(pattern) +
                                        ": parameter " + std::string(seg) +
                                        " must be a non-empty path segment, got \"" + value + "\"");
        out += value;
    }
    return out;
}

bool match_pattern(std::string_view pattern, std::string_view path,
                   std::vector<std::string>& values) {
    auto want = pattern_segments(pattern);
    auto got = pattern_segments(path);
    if (want.size() != got.size() || !path.starts_with('/')) return false;
    std::vector<std::string> found;
    for (std::size_t i = 0; i < want.size(); ++i) {
        if (want[i].starts_with(':')) {
            if (got[i].empty()) return false;
            found.emplace_back(got[i]);
        } else if (want[i] != got[i]) {
            return false;
        }
    }
    values = std::move(found);
    return true;
}

}  // namespace keel
