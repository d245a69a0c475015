#include <keel/framework/path_pattern.hpp>
#include <optional>
#include <stdexcept>

namespace keel {

namespace detail {
void fail_pattern_check(const char* why) {
    throw std::logic_error(why);
}
}  // namespace detail

namespace {

// The segments of a path or pattern one at a time, as pattern_segments lists them, without
// allocating: filling and matching run on every emit and every wait.
class segment_reader {
  public:
    explicit segment_reader(std::string_view path)
        : path_(path), at_(path.starts_with('/') ? 1 : 0) {}

    std::optional<std::string_view> next() {
        if (at_ > path_.size()) return std::nullopt;
        auto end = path_.find('/', at_);
        if (end == std::string_view::npos) end = path_.size();
        auto segment = path_.substr(at_, end - at_);
        at_ = end + 1;
        return segment;
    }

  private:
    std::string_view path_;
    std::size_t at_;
};

// Calls fn(pattern segment, path segment) for each pair while it returns true; true when it
// always did and both have the same number of segments.
template <class Fn>
bool each_pair(std::string_view pattern, std::string_view path, Fn&& fn) {
    segment_reader want(pattern), got(path);
    for (;;) {
        auto w = want.next();
        auto g = got.next();
        if (!w || !g) return !w && !g;
        if (!fn(*w, *g)) return false;
    }
}

}  // namespace

std::vector<std::string_view> pattern_segments(std::string_view pattern) {
    std::vector<std::string_view> out;
    segment_reader segments(pattern);
    while (auto seg = segments.next()) out.push_back(*seg);
    return out;
}

std::string fill_pattern(std::string_view pattern, const std::vector<std::string>& values,
                         std::string_view what) {
    std::size_t size = pattern.size() + 1;
    for (const auto& value : values) size += value.size();
    std::string out;
    out.reserve(size);
    std::size_t next = 0;
    segment_reader segments(pattern);
    while (auto seg = segments.next()) {
        out += '/';
        if (!seg->starts_with(':')) {
            out += *seg;
            continue;
        }
        if (next >= values.size())
            throw std::invalid_argument(std::string(what) + " " + std::string(pattern) +
                                        ": no value for parameter " + std::string(*seg));
        const std::string& value = values[next++];
        if (value.empty() || value.find('/') != std::string::npos)
            throw std::invalid_argument(std::string(what) + " " + std::string(pattern) +
                                        ": parameter " + std::string(*seg) +
                                        " must be a non-empty path segment, got \"" + value + "\"");
        out += value;
    }
    return out;
}

bool match_pattern(std::string_view pattern, std::string_view path,
                   std::vector<std::string>& values) {
    if (!path.starts_with('/')) return false;
    // Whether it matches first, so that `values` stays as it was when it does not.
    std::size_t parameters = 0;
    bool matches = each_pair(pattern, path, [&](std::string_view want, std::string_view got) {
        if (!want.starts_with(':')) return want == got;
        ++parameters;
        return !got.empty();
    });
    if (!matches) return false;
    values.clear();
    values.reserve(parameters);
    each_pair(pattern, path, [&](std::string_view want, std::string_view got) {
        if (want.starts_with(':')) values.emplace_back(got);
        return true;
    });
    return true;
}

}  // namespace keel
