#pragma once

/// @file
/// Path patterns shared by process definitions and signals: "/order/:order/fulfillment".
/// A pattern starts with '/', has no empty segments, and names its parameters with `:name`
/// segments. path_pattern<N> checks all of that, and that there are exactly N parameters, at
/// compile time: a wrong pattern in a process or signal declaration does not compile.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace keel {

namespace detail {

consteval std::size_t count_pattern_parameters(std::string_view pattern) {
    std::size_t n = 0;
    for (std::size_t i = 0; i < pattern.size(); ++i)
        if (pattern[i] == ':' && (i == 0 || pattern[i - 1] == '/')) ++n;
    return n;
}

consteval bool valid_path_pattern(std::string_view pattern) {
    if (pattern.empty() || pattern.front() != '/' || pattern.size() < 2) return false;
    for (std::size_t i = 0; i < pattern.size(); ++i) {
        if (pattern[i] == '/' && i + 1 < pattern.size() && pattern[i + 1] == '/') return false;
        if (pattern[i] == ':' && (i + 1 == pattern.size() || pattern[i + 1] == '/')) return false;
    }
    return pattern.back() != '/';
}

void fail_pattern_check(const char* why);  // not constexpr: a call is a compile error

}  // namespace detail

/// A path pattern with exactly N `:parameters`, checked at compile time.
template <std::size_t N>
struct path_pattern {
    std::string_view text;  ///< the pattern as written
    /// From a string literal; an invalid pattern, or one with another number of parameters,
    /// does not compile.
    consteval path_pattern(const char* s) : text(s) {
        if (!detail::valid_path_pattern(text))
            detail::fail_pattern_check(
                "a path pattern must start with '/' and have no empty "
                "segments");
        if (detail::count_pattern_parameters(text) != N)
            detail::fail_pattern_check(
                "the pattern's :parameters do not match the declared parameter types");
    }
};

/// The pattern's segments, in order ("/order/:order/x" -> "order", ":order", "x").
std::vector<std::string_view> pattern_segments(std::string_view pattern);

/// Fills the pattern's parameters in order; throws std::invalid_argument naming `what` and
/// the parameter when a value is empty or contains '/'.
std::string fill_pattern(std::string_view pattern, const std::vector<std::string>& values,
                         std::string_view what);

/// The parameter values of `path` if it matches `pattern` segment for segment.
bool match_pattern(std::string_view pattern, std::string_view path,
                   std::vector<std::string>& values);

}  // namespace keel
