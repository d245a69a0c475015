#include <array>
#include <charconv>
#include <cmath>
#include <concepts>
#include <keel/framework/json_text.hpp>

namespace keel {

namespace {

template <std::integral Integer>
void append_integer(std::string& out, Integer n) {
    char digits[24];  // 20 digits and a sign at most
    out.append(digits, std::to_chars(digits, digits + sizeof digits, n).ptr);
}

void append_quoted(std::string& out, std::string_view text) {
    out += '"';
    out += text;
    out += '"';
}

void append_value(std::string& out, const nlohmann::json& value, json_utf8_handler on_invalid) {
    using kind = nlohmann::json::value_t;
    switch (value.type()) {
        case kind::object: {
            out += '{';
            bool first = true;
            for (const auto& [key, member] : value.get_ref<const nlohmann::json::object_t&>()) {
                if (!first) out += ',';
                first = false;
                append_json_string(out, key, on_invalid);
                out += ':';
                append_value(out, member, on_invalid);
            }
            out += '}';
            return;
        }
        case kind::array: {
            out += '[';
            bool first = true;
            for (const auto& element : value.get_ref<const nlohmann::json::array_t&>()) {
                if (!first) out += ',';
                first = false;
                append_value(out, element, on_invalid);
            }
            out += ']';
            return;
        }
        case kind::string: {
            const auto& text = value.get_ref<const std::string&>();
            if (json_verbatim(text))
                append_quoted(out, text);
            else
                out += value.dump(-1, ' ', false, on_invalid);
            return;
        }
        case kind::boolean:
            out += value.get<bool>() ? "true" : "false";
            return;
        case kind::number_integer:
            append_json_number(out, value.get<std::int64_t>());
            return;
        case kind::number_unsigned:
            append_json_number(out, value.get<std::uint64_t>());
            return;
        case kind::number_float:
            append_json_number(out, value.get<double>());
            return;
        case kind::null:
            out += "null";
            return;
        case kind::binary:
        case kind::discarded:
            out += value.dump(-1, ' ', false, on_invalid);
            return;
    }
}

}  // namespace

bool json_verbatim(std::string_view text) noexcept {
    static constexpr auto plain = [] {
        std::array<bool, 256> table{};
        for (int c = 0x20; c < 0x7f; ++c) table[c] = c != '"' && c != '\\';
        return table;
    }();
    for (unsigned char c : text)
        if (!plain[c]) return false;
    return true;
}

void append_json_number(std::string& out, std::int64_t n) {
    append_integer(out, n);
}

void append_json_number(std::string& out, std::uint64_t n) {
    append_integer(out, n);
}

// As nlohmann's serializer::dump_float for an IEEE double.
void append_json_number(std::string& out, double x) {
    if (!std::isfinite(x)) {
        out += "null";
        return;
    }
    char digits[64];
    auto end = nlohmann::detail::to_chars(digits, digits + sizeof digits, x);
    out.append(digits, end);
}

void append_json(std::string& out, const nlohmann::json& value, json_utf8_handler on_invalid) {
    append_value(out, value, on_invalid);
}

std::string dump_json(const nlohmann::json& value, json_utf8_handler on_invalid) {
    std::string out;
    out.reserve(256);
    append_value(out, value, on_invalid);
    return out;
}

void append_json_string(std::string& out, std::string_view text, json_utf8_handler on_invalid) {
    if (json_verbatim(text))
        append_quoted(out, text);
    else
        out += nlohmann::json(std::string(text)).dump(-1, ' ', false, on_invalid);
}

}  // namespace keel
