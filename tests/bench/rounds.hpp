#pragma once

// How the benchmarks that run several rounds report them: a percentile of the rounds'
// figures, and a ratio's median with its range over the rounds.

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace keel::bench {

inline double percentile(std::vector<double> v, double p) {
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<std::size_t>(p * double(v.size())))];
}

// "0.60 (0.51 to 0.78)": the median and the range of the per-round ratios.
inline std::string median_and_range(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    char text[64];
    std::snprintf(text, sizeof text, "%.2f (%.2f to %.2f)", percentile(v, 0.5), v.front(),
                  v.back());
    return text;
}

}  // namespace keel::bench
