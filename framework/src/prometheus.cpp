#include <fmt/format.h>

#include <algorithm>
#include <keel/framework/prometheus.hpp>

namespace keel::prometheus {

void duration_histogram::observe(std::chrono::nanoseconds d) noexcept {
    auto seconds = std::chrono::duration<double>(d).count();
    std::size_t i = 0;
    while (i < buckets.size() && seconds > buckets[i]) ++i;
    counts_[i].fetch_add(1, std::memory_order_relaxed);
    sum_ns_.fetch_add(static_cast<std::uint64_t>(std::max<std::int64_t>(0, d.count())),
                      std::memory_order_relaxed);
}

std::uint64_t duration_histogram::count() const noexcept {
    std::uint64_t n = 0;
    for (const auto& c : counts_) n += c.load(std::memory_order_relaxed);
    return n;
}

void duration_histogram::render(std::string& out, std::string_view name,
                                std::string_view labels) const {
    std::uint64_t cumulative = 0;
    auto with = [&](std::string_view more) {
        if (labels.empty()) return std::string(more);
        return more.empty() ? std::string(labels) : fmt::format("{},{}", labels, more);
    };
    for (std::size_t i = 0; i < counts_.size(); ++i) {
        cumulative += counts_[i].load(std::memory_order_relaxed);
        auto le = i < buckets.size() ? fmt::format("{}", buckets[i]) : std::string("+Inf");
        out += fmt::format("{}_bucket{{{}}} {}\n", name, with(fmt::format("le=\"{}\"", le)),
                           cumulative);
    }
    auto sum = static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) / 1e9;
    auto plain = with("");
    auto braces = plain.empty() ? std::string() : "{" + plain + "}";
    out += fmt::format("{}_sum{} {}\n", name, braces, sum);
    out += fmt::format("{}_count{} {}\n", name, braces, cumulative);
}

std::string escape(std::string_view label_value) {
    std::string out;
    for (char c : label_value) {
        if (c == '\\' || c == '"') out += '\\';
        if (c == '\n') {
            out += "\\n";
            continue;
        }
        out += c;
    }
    return out;
}

void header(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

}  // namespace keel::prometheus
