#pragma once

// Digests as lower-case hex: names for Lua scripts (SHA-1, what Redis calls them) and
// fixed-size stand-ins for long keys (SHA-256). Not for secrets: HMAC lives with the
// webhook signature check.

#include <span>
#include <string>
#include <string_view>

namespace keel {

std::string to_hex(std::span<const unsigned char> bytes);
std::string sha1_hex(std::string_view data);
std::string sha256_hex(std::string_view data);

}  // namespace keel
