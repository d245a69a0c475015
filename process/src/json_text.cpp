#include "json_text.hpp"

#include <charconv>
#include <chrono>
#include <optional>

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

journal_entry parse_journal_text(std::string_view text) {
    journal_entry e;
    from_json(nlohmann::json::parse(text), e);
    return e;
}

namespace {

// Reads waits_text's own form, [{"path":"<verbatim>","seq":<digits>},...]; nullopt for
// anything else (spaces, other key orders, escapes), which nlohmann then reads.
std::optional<std::vector<signal_wait>> read_own_waits(std::string_view text) {
    auto skip = [&](std::string_view expected) {
        if (!text.starts_with(expected)) return false;
        text.remove_prefix(expected.size());
        return true;
    };
    std::vector<signal_wait> out;
    if (!skip("[")) return std::nullopt;
    if (skip("]")) return text.empty() ? std::optional(std::move(out)) : std::nullopt;
    for (;;) {
        if (!skip("{\"path\":\"")) return std::nullopt;
        auto quote = text.find('"');
        if (quote == std::string_view::npos) return std::nullopt;
        auto path = text.substr(0, quote);
        if (!verbatim(path)) return std::nullopt;
        text.remove_prefix(quote);
        if (!skip("\",\"seq\":")) return std::nullopt;
        std::uint64_t seq = 0;
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), seq);
        if (ec != std::errc() || end == text.data()) return std::nullopt;
        text.remove_prefix(static_cast<std::size_t>(end - text.data()));
        if (!skip("}")) return std::nullopt;
        out.push_back(signal_wait{seq, std::string(path)});
        if (skip("]")) return text.empty() ? std::optional(std::move(out)) : std::nullopt;
        if (!skip(",")) return std::nullopt;
    }
}

}  // namespace

std::vector<signal_wait> parse_waits_text(std::string_view text) {
    if (auto own = read_own_waits(text)) return std::move(*own);
    std::vector<signal_wait> out;
    for (const auto& j : nlohmann::json::parse(text))
        out.push_back(
            signal_wait{j.at("seq").get<std::uint64_t>(), j.at("path").get<std::string>()});
    return out;
}

inbox_entry parse_signal_text(std::uint64_t id, std::string_view text) {
    auto j = nlohmann::json::parse(text);
    inbox_entry e;
    e.id = id;
    e.key = j.value("key", "");
    e.path = j.at("path").get<std::string>();
    if (auto payload = j.find("payload"); payload != j.end()) e.payload = std::move(*payload);
    e.at = time_point(std::chrono::milliseconds(j.at("at").get<std::int64_t>()));
    return e;
}

}  // namespace keel::process::detail
