#pragma once

/// @file
/// Digests as lower-case hex: names for Lua scripts (SHA-1, what Redis calls them) and
/// fixed-size stand-ins for long keys (SHA-256). Not for secrets: HMAC lives with the
/// webhook signature check.

#include <span>
#include <string>
#include <string_view>

namespace keel {

/// `bytes` as lower-case hex, two digits a byte.
std::string to_hex(std::span<const unsigned char> bytes);
/// The SHA-1 of `data`, lower-case hex (40 digits).
std::string sha1_hex(std::string_view data);
/// The SHA-256 of `data`, lower-case hex (64 digits).
std::string sha256_hex(std::string_view data);

}  // namespace keel
