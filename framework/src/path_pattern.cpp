#include <keel/framework/path_pattern.hpp>
#include <stdexcept>

namespace keel {

namespace detail {
void fail_pattern_check(const char* why) {
    throw std::logic_error(why);
}
}  // namespace detail

namespace {

// Calls fn(segment) for each segment of a path or pattern, as pattern_segments lists them,
// until fn returns false; returns whether every call returned true. No allocation: filling and
// matching run on every emit and every wait.
template <class Fn>
bool each_segment(std::string_view path, Fn&& fn) {
    std::size_t i = path.starts_with('/') ? 1 : 0;
    while (i <= path.size()) {
        auto end = path.find('/', i);
        if (end == std::string_view::npos) end = path.size();
        if (!fn(path.substr(i, end - i))) return false;
        i = end + 1;
    }
    return true;
}

std::size_t count_segments(std::string_view path) {
    std::size_t n = 0;
    each_segment(path, [&](std::string_view) {
        ++n;
        return true;
    });
    return n;
}

}  // namespace

std::vector<std::string_view> pattern_segments(std::string_view pattern) {
    std::vector<std::string_view> out;
    out.reserve(count_segments(pattern));
    each_segment(pattern, [&](std::string_view seg) {
        out.push_back(seg);
        return true;
    });
    return out;
}

std::string fill_pattern(std::string_view pattern, const std::vector<std::string>& values,
                         std::string_view what) {
    std::size_t size = pattern.size() + 1;
    for (const auto& value : values) size += value.size();
    std::string out;
    out.reserve(size);
    std::size_t next = 0;
    each_segment(pattern, [&](std::string_view seg) {
        out += '/';
        if (!seg.starts_with(':')) {
            out += seg;
            return true;
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
        return true;
    });
    return out;
}

bool match_pattern(std::string_view pattern, std::string_view path,
                   std::vector<std::string>& values) {
    if (!path.starts_with('/') || count_segments(pattern) != count_segments(path)) return false;
    // Walks the path's segments beside the pattern's; `rest` is the path still to match.
    auto next_of = [](std::string_view& rest) {
        auto end = rest.find('/');
        auto seg = rest.substr(0, end);
        rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 1);
        return seg;
    };
    std::size_t parameters = 0;
    std::string_view rest = path.substr(1);
    bool matches = each_segment(pattern, [&](std::string_view want) {
        auto got = next_of(rest);
        if (!want.starts_with(':')) return want == got;
        ++parameters;
        return !got.empty();
    });
    if (!matches) return false;
    values.clear();
    values.reserve(parameters);
    rest = path.substr(1);
    each_segment(pattern, [&](std::string_view want) {
        auto got = next_of(rest);
        if (want.starts_with(':')) values.emplace_back(got);
        return true;
    });
    return true;
}

}  // namespace keel
