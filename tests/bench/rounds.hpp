#pragma once

// How the benchmarks that run several rounds report them: a percentile of the rounds'
// figures, a ratio's median with its range over the rounds, and the per-round tables.

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

// A column of the per-round tables: one figure per round, then the median (a ratio's with
// its range over the rounds).
struct column {
    const char* title;
    const char* format;  // printf format of one cell, e.g. " %.2f |"
    std::vector<double> values;
    bool ratio = false;
};

// `figure` of each round's sample of one side.
template <class Side, class F>
std::vector<double> by_round(Side&& side, F figure) {
    std::vector<double> v;
    for (auto& s : side) v.push_back(figure(s));
    return v;
}

// `figure` of side a over side b, round by round.
template <class Side, class F>
std::vector<double> ratios(Side&& a, Side&& b, F figure) {
    std::vector<double> v;
    for (std::size_t i = 0; i < a.size(); ++i) v.push_back(figure(a[i]) / figure(b[i]));
    return v;
}

// A markdown table: a row per round, then the medians.
inline void print_table(const std::vector<column>& columns) {
    std::printf("| round |");
    for (const auto& c : columns) std::printf(" %s |", c.title);
    std::printf("\n|---:|");
    for (std::size_t c = 0; c < columns.size(); ++c) std::printf("---:|");
    std::printf("\n");
    for (std::size_t i = 0; i < columns.front().values.size(); ++i) {
        std::printf("| %zu |", i + 1);
        for (const auto& c : columns) std::printf(c.format, c.values[i]);
        std::printf("\n");
    }
    std::printf("| median |");
    for (const auto& c : columns)
        if (c.ratio)
            std::printf(" %s |", median_and_range(c.values).c_str());
        else
            std::printf(c.format, percentile(c.values, 0.5));
    std::printf("\n");
}

}  // namespace keel::bench
