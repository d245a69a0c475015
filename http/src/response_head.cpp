#include "response_head.hpp"

#include <algorithm>
#include <array>
#include <charconv>

#include "uri.hpp"

namespace keel::http::detail {

namespace {

bool has_no_body(int code) {
    return code < 200 || code == 204 || code == 304;
}

constexpr auto token_chars = [] {
    std::array<bool, 256> t{};
    for (int c = '0'; c <= '9'; ++c) t[c] = true;
    for (int c = 'a'; c <= 'z'; ++c) t[c] = true;
    for (int c = 'A'; c <= 'Z'; ++c) t[c] = true;
    for (char c : std::string_view("!#$%&'*+-.^_`|~")) t[static_cast<unsigned char>(c)] = true;
    return t;
}();

bool is_token(std::string_view name) {
    if (name.empty()) return false;
    for (char c : name)
        if (!token_chars[static_cast<unsigned char>(c)]) return false;
    return true;
}

bool owned_by_server(std::string_view name) {
    switch (name.size()) {  // most names are ruled out by their length alone
        case 4:
            return iequals(name, "date");
        case 6:
            return iequals(name, "server");
        case 10:
            return iequals(name, "connection");
        case 14:
            return iequals(name, "content-length");
        case 16:
            return iequals(name, "proxy-connection");
        case 17:
            return iequals(name, "transfer-encoding");
        default:
            return false;
    }
}

void append_field(std::string& out, std::string_view name, std::string_view value) {
    out += name;
    out += ": ";
    out += value;
    out += "\r\n";
}

// A control character a field value may not hold (RFC 9110 5.5: HTAB is allowed).
bool is_forbidden_in_value(char c) {
    return is_control(c) && c != '\t';
}

// Appends `value`, with its forbidden control characters as spaces; true when one was there.
bool append_mended(std::string& out, std::string_view value) {
    auto at = out.size();
    out += value;
    bool mended = false;
    for (auto i = at; i < out.size(); ++i)
        if (is_forbidden_in_value(out[i])) {
            out[i] = ' ';
            mended = true;
        }
    return mended;
}

}  // namespace

std::size_t append_response_head(std::string& out, const response& res,
                                 const response_framing& framing) {
    auto code = to_int(res.status());
    out += framing.version == 10 ? "HTTP/1.0 " : "HTTP/1.1 ";
    char digits[24];
    auto end = std::to_chars(digits, digits + sizeof digits, code).ptr;
    out.append(digits, end);
    out += ' ';
    out += reason(res.status());
    out += "\r\n";

    std::size_t repaired = 0;
    for (const auto& [name, value] : res.headers()) {
        if (!is_token(name)) {
            ++repaired;
            continue;
        }
        if (owned_by_server(name)) continue;
        out += name;
        out += ": ";
        if (append_mended(out, value)) ++repaired;
        out += "\r\n";
    }
    if (!framing.server.empty()) append_field(out, "Server", framing.server);
    append_field(out, "Date", framing.date);
    if (!has_no_body(code)) {
        end = std::to_chars(digits, digits + sizeof digits, res.body().size()).ptr;
        append_field(out, "Content-Length", std::string_view(digits, end));
    }
    if (framing.version == 10 && framing.keep_alive)
        append_field(out, "Connection", "keep-alive");
    else if (framing.version != 10 && !framing.keep_alive)
        append_field(out, "Connection", "close");
    out += "\r\n";
    return repaired;
}

bool is_clean_field_value(std::string_view value) {
    return std::none_of(value.begin(), value.end(), is_forbidden_in_value);
}

bool sends_body(const response& res, bool is_head) {
    return !is_head && !has_no_body(to_int(res.status()));
}

}  // namespace keel::http::detail
