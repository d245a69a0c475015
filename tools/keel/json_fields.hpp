#pragma once

// Reading fields of the admin API's answers without trusting their shape: a missing
// field, a null or a value of another type gives the fallback instead of an exception,
// so a newer or older service still gets its answers shown.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace keel::cli {

// `value` as compact JSON (invalid UTF-8 replaced).
std::string compact(const nlohmann::json& value);
// The field as text: a string as it is, any other value as compact JSON, `fallback` when
// the field is missing or null.
std::string text_field(const nlohmann::json& object, std::string_view key,
                       std::string_view fallback = {});
// The field when it is an array, else an empty array.
const nlohmann::json& array_field(const nlohmann::json& object, std::string_view key);
// True only for a field that is the boolean true.
bool flag_field(const nlohmann::json& object, std::string_view key);
// The field when it is an integer, else `fallback`.
std::int64_t integer_field(const nlohmann::json& object, std::string_view key,
                           std::int64_t fallback = 0);

}  // namespace keel::cli
