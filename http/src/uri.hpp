#pragma once

// Text helpers shared by the request, the router and the signature check (internal).

#include <optional>
#include <string>
#include <string_view>

namespace keel::http::detail {

// Decodes %XX escapes (and '+' as a space when `plus_is_space`, for query strings).
// Empty optional on a malformed escape.
std::optional<std::string> percent_decode(std::string_view in, bool plus_is_space);

// An ASCII control character (C0 or DEL): never valid in a decoded path or a key.
constexpr bool is_control(char c) {
    auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7f;
}

// The value of one hexadecimal digit (either case), or -1.
constexpr int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

}  // namespace keel::http::detail
