#include "json_fields.hpp"

namespace keel::cli {

namespace {

using json = nlohmann::json;

const json* find(const json& object, std::string_view key) {
    if (!object.is_object()) return nullptr;
    auto it = object.find(std::string(key));
    return it == object.end() || it->is_null() ? nullptr : &*it;
}

}  // namespace

std::string compact(const json& value) {
    return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string text_field(const json& object, std::string_view key, std::string_view fallback) {
    auto value = find(object, key);
    if (!value) return std::string(fallback);
    return value->is_string() ? value->get<std::string>() : compact(*value);
}

const json& array_field(const json& object, std::string_view key) {
    static const json empty = json::array();
    auto value = find(object, key);
    return value && value->is_array() ? *value : empty;
}

bool flag_field(const json& object, std::string_view key) {
    auto value = find(object, key);
    return value && value->is_boolean() && value->get<bool>();
}

std::int64_t integer_field(const json& object, std::string_view key, std::int64_t fallback) {
    auto value = find(object, key);
    return value && value->is_number_integer() ? value->get<std::int64_t>() : fallback;
}

}  // namespace keel::cli
