#pragma once

// How both stores page the operators' index: newest first by (created ms, id), and a cursor
// "<created ms>:<id>" naming the last entry returned, so the next page starts strictly below
// it. Internal to keel::process.

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace keel::process::detail {

struct list_position {
    std::int64_t created_ms = 0;
    std::string id;
};

// Whether a lists before b (newer, or as new with a greater id).
inline bool lists_before(std::int64_t a_ms, std::string_view a_id, std::int64_t b_ms,
                         std::string_view b_id) {
    return a_ms > b_ms || (a_ms == b_ms && a_id > b_id);
}

inline std::string format_cursor(std::int64_t created_ms, std::string_view id) {
    return std::to_string(created_ms) + ":" + std::string(id);
}

inline std::optional<list_position> parse_cursor(std::string_view text) {
    auto colon = text.find(':');
    if (colon == std::string_view::npos || colon == 0) return std::nullopt;
    std::int64_t ms = 0;
    auto digits = text.substr(0, colon);
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), ms);
    if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
    return list_position{ms, std::string(text.substr(colon + 1))};
}

}  // namespace keel::process::detail
