#include "json_text.hpp"

#include <charconv>
#include <chrono>

namespace keel::process::detail {

namespace {

// Text that JSON keeps as it is: printable ASCII but for the quote and the backslash.
bool verbatim(std::string_view text) {
    for (unsigned char c : text)
        if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') return false;
    return true;
}

template <class Integer>
void append_integer(std::string& out, Integer n) {
    char digits[24];
    auto end = std::to_chars(digits, digits + sizeof digits, n).ptr;
    out.append(digits, end);
}

std::int64_t ms(time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

void append_key(std::string& out, std::string_view key) {
    out += '"';
    out += key;
    out += "\":";
}

}  // namespace

void append_json_string(std::string& out, std::string_view text) {
    if (!verbatim(text)) {
        out += nlohmann::json(std::string(text)).dump();
        return;
    }
    out += '"';
    out += text;
    out += '"';
}

void append_json_number(std::string& out, std::int64_t n) {
    append_integer(out, n);
}
void append_json_number(std::string& out, std::uint64_t n) {
    append_integer(out, n);
}

// The fields in nlohmann's order (its objects are sorted by key), each written when
// to_json(json&, const journal_entry&) writes it.
std::string journal_text(const journal_entry& e) {
    std::string out;
    out.reserve(64 + e.name.size());
    out += '{';
    if (e.at != time_point{}) {
        append_key(out, "at");
        append_json_number(out, ms(e.at));
        out += ',';
    }
    if (e.attempts > 1) {
        append_key(out, "attempts");
        append_json_number(out, std::uint64_t{e.attempts});
        out += ',';
    }
    if (e.failed) out += "\"failed\":true,";
    append_key(out, "kind");
    append_json_string(out, to_string(e.kind));
    out += ',';
    append_key(out, "name");
    append_json_string(out, e.name);
    out += ',';
    append_key(out, "seq");
    append_json_number(out, e.seq);
    out += ',';
    if (e.started != time_point{} && ms(e.started) != ms(e.at)) {
        append_key(out, "started");
        append_json_number(out, ms(e.started));
        out += ',';
    }
    append_key(out, "value");
    out += e.value.dump();
    out += '}';
    return out;
}

std::string waits_text(const std::vector<signal_wait>& waits) {
    std::string out = "[";
    for (const auto& w : waits) {
        if (out.size() > 1) out += ',';
        out += "{\"path\":";
        append_json_string(out, w.path);
        out += ",\"seq\":";
        append_json_number(out, w.seq);
        out += '}';
    }
    out += ']';
    return out;
}

std::string signal_text(const inbox_entry& signal) {
    std::string out = "{\"at\":";
    append_json_number(
        out, std::chrono::floor<std::chrono::milliseconds>(signal.at.time_since_epoch()).count());
    if (!signal.key.empty()) {
        out += ",\"key\":";
        append_json_string(out, signal.key);
    }
    out += ",\"path\":";
    append_json_string(out, signal.path);
    out += ",\"payload\":";
    out += signal.payload.dump();
    out += '}';
    return out;
}

}  // namespace keel::process::detail
