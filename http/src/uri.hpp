#pragma once

// URI helpers shared by the request and the router (internal).

#include <optional>
#include <string>
#include <string_view>

namespace keel::http::detail {

// Decodes %XX escapes (and '+' as a space when `plus_is_space`, for query strings).
// Empty optional on a malformed escape.
std::optional<std::string> percent_decode(std::string_view in, bool plus_is_space);

}  // namespace keel::http::detail
