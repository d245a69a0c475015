#include "encoding.hpp"

#include <algorithm>

namespace keel::cli {

namespace {

bool unreserved_or_slash(char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_' || c == '~' || c == '/';
}

bool shell_plain(char c) {
    return unreserved_or_slash(c) || c == ':' || c == '=' || c == '+' || c == ',' || c == '@' ||
           c == '%';
}

}  // namespace

std::string percent_encode(std::string_view text) {
    static constexpr char hex[] = "0123456789ABCDEF";
    std::string out;
    out.reserve(text.size());
    for (char c : text) {
        if (unreserved_or_slash(c)) {
            out += c;
            continue;
        }
        auto byte = static_cast<unsigned char>(c);
        out += '%';
        out += hex[byte >> 4];
        out += hex[byte & 0x0F];
    }
    return out;
}

std::string query_string(const query_params& params) {
    std::string out;
    for (const auto& [name, value] : params) {
        if (value.empty()) continue;
        out += out.empty() ? '?' : '&';
        out += percent_encode(name) + "=" + percent_encode(value);
    }
    return out;
}

std::string shell_quote(std::string_view text) {
    if (!text.empty() && std::all_of(text.begin(), text.end(), shell_plain))
        return std::string(text);
    std::string out = "'";
    for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

}  // namespace keel::cli
