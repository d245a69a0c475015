#pragma once

// What the fuzz targets share: KEEL_FUZZ_CHECK, an invariant check that holds in every build
// type (NDEBUG does not remove it) and aborts with the condition's text, so libFuzzer saves
// the input as a crash artifact; and the input as text.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace keel::fuzz {

[[noreturn]] inline void invariant_broken(const char* condition, const char* file, int line) {
    std::fprintf(stderr, "%s:%d: invariant broken: %s\n", file, line, condition);
    std::fflush(stderr);
    std::abort();
}

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
    return {reinterpret_cast<const char*>(data), size};
}

}  // namespace keel::fuzz

#define KEEL_FUZZ_CHECK(condition) \
    ((condition) ? void() : ::keel::fuzz::invariant_broken(#condition, __FILE__, __LINE__))
