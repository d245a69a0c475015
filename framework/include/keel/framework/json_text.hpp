#pragma once

/// @file
/// JSON text of a nlohmann::json value, byte for byte what its dump() (no indentation) writes,
/// written straight into a string: dump() constructs a serializer per call (a shared output
/// adapter, a locale query) and writes a character at a time, several times the work for the
/// small objects a service writes on every entity change and response. Strings that need no
/// escaping are copied whole; any other string, and the rare kinds (binary, discarded), are
/// handed to nlohmann's own serializer, so escapes, UTF-8 errors and their exceptions are
/// exactly nlohmann's.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace keel {

/// What to do with a string that is not UTF-8: nlohmann's handler (strict throws its
/// type_error 316; replace writes U+FFFD; ignore drops the bytes).
using json_utf8_handler = nlohmann::json::error_handler_t;

/// value.dump(-1, ' ', false, on_invalid), appended to `out`.
void append_json(std::string& out, const nlohmann::json& value,
                 json_utf8_handler on_invalid = json_utf8_handler::strict);

/// value.dump(-1, ' ', false, on_invalid).
std::string dump_json(const nlohmann::json& value,
                      json_utf8_handler on_invalid = json_utf8_handler::strict);

/// Whether JSON writes `text` as it is between its quotes: printable ASCII but for the quote
/// and the backslash.
bool json_verbatim(std::string_view text) noexcept;

///@{
/// A number as JSON writes it, appended to `out`: an integer in decimal, a double as its
/// shortest round trip (nlohmann's Grisu2; "null" when not finite, as nlohmann writes it).
void append_json_number(std::string& out, std::int64_t n);
void append_json_number(std::string& out, std::uint64_t n);
void append_json_number(std::string& out, double x);
///@}

/// A JSON string for `text` (quoted, escaped as nlohmann escapes it), appended to `out`.
void append_json_string(std::string& out, std::string_view text,
                        json_utf8_handler on_invalid = json_utf8_handler::strict);

}  // namespace keel
