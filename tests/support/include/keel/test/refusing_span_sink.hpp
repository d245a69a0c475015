#pragma once

// A span sink that admits nothing, as an exporter whose collector is down: it counts how often
// a span's maker asked (span_sink::admit) and what it was given anyway, which must be nothing.

#include <atomic>
#include <keel/framework/trace.hpp>

namespace keel::test {

struct refusing_span_sink final : trace::span_sink {
    void record(trace::span) noexcept override { ++recorded; }
    bool admit() noexcept override {
        ++asked;
        return false;
    }
    std::atomic<int> asked{0};
    std::atomic<int> recorded{0};
};

}  // namespace keel::test
