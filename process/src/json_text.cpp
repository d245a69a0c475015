#include "json_text.hpp"

#include <charconv>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>

namespace keel::process::detail {

namespace {

std::int64_t ms(time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

void append_key(std::string& out, std::string_view key) {
    out += '"';
    out += key;
    out += "\":";
}

}  // namespace

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
    append_json(out, e.value);
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
    append_json(out, signal.payload);
    if (!signal.trace.empty()) {
        out += ",\"trace\":";
        append_json_string(out, signal.trace);
    }
    out += '}';
    return out;
}

journal_entry parse_journal_text(std::string_view text) {
    journal_entry e;
    from_json(nlohmann::json::parse(text), e);
    return e;
}

namespace {

// A signal's arrival, stored in milliseconds since the epoch: one that the clock's
// nanoseconds cannot hold (past the year 2262 either way) is not a time this store wrote.
time_point arrival_at(std::int64_t ms) {
    constexpr auto limit =
        std::chrono::duration_cast<std::chrono::milliseconds>(time_point::duration::max()).count();
    if (ms > limit || ms < -limit)
        throw std::invalid_argument("a signal's arrival time out of range: " + std::to_string(ms));
    return time_point(std::chrono::milliseconds(ms));
}

// Reads a text in one of the forms this file writes: exact pieces, strings without escapes,
// integers. Each read moves past what it read, or fails (false, nullopt).
class own_form {
  public:
    explicit own_form(std::string_view text) : text_(text) {}

    bool skip(std::string_view expected) {
        if (!text_.starts_with(expected)) return false;
        text_.remove_prefix(expected.size());
        return true;
    }
    // The rest of a string whose opening quote was read, through its closing quote.
    std::optional<std::string_view> verbatim_string() {
        auto quote = text_.find('"');
        if (quote == std::string_view::npos || !json_verbatim(text_.substr(0, quote)))
            return std::nullopt;
        auto s = text_.substr(0, quote);
        text_.remove_prefix(quote + 1);
        return s;
    }
    template <class Integer>
    std::optional<Integer> integer() {
        Integer n{};
        auto [end, ec] = std::from_chars(text_.data(), text_.data() + text_.size(), n);
        if (ec != std::errc() || end == text_.data()) return std::nullopt;
        text_.remove_prefix(static_cast<std::size_t>(end - text_.data()));
        return n;
    }
    std::string_view rest() const { return text_; }

  private:
    std::string_view text_;
};

// waits_text's form, [{"path":"<verbatim>","seq":<digits>},...]; nullopt for any other
// (spaces, other key orders, escapes), which nlohmann then reads.
std::optional<std::vector<signal_wait>> read_own_waits(std::string_view text) {
    own_form in(text);
    std::vector<signal_wait> out;
    if (!in.skip("[")) return std::nullopt;
    bool more = !in.skip("]");
    while (more) {
        if (!in.skip("{\"path\":\"")) return std::nullopt;
        auto path = in.verbatim_string();
        if (!path || !in.skip(",\"seq\":")) return std::nullopt;
        auto seq = in.integer<std::uint64_t>();
        if (!seq || !in.skip("}")) return std::nullopt;
        out.push_back(signal_wait{*seq, std::string(*path)});
        more = !in.skip("]");
        if (more && !in.skip(",")) return std::nullopt;
    }
    if (!in.rest().empty()) return std::nullopt;
    return out;
}

// signal_text's form, {"at":<ms>[,"key":"<verbatim>"],"path":"<verbatim>","payload":<json>
// [,"trace":"<verbatim>"]}, with only the payload given to nlohmann; nullopt for any other
// form.
std::optional<inbox_entry> read_own_signal(std::uint64_t id, std::string_view text) {
    own_form in(text);
    inbox_entry e;
    e.id = id;
    if (!in.skip("{\"at\":")) return std::nullopt;
    auto at = in.integer<std::int64_t>();
    if (!at) return std::nullopt;
    e.at = arrival_at(*at);
    if (in.skip(",\"key\":\"")) {
        auto key = in.verbatim_string();
        if (!key) return std::nullopt;
        e.key = *key;
    }
    if (!in.skip(",\"path\":\"")) return std::nullopt;
    auto path = in.verbatim_string();
    if (!path || !in.skip(",\"payload\":") || !in.rest().ends_with('}')) return std::nullopt;
    e.path = *path;
    auto payload = in.rest().substr(0, in.rest().size() - 1);
    // A trace is last, and verbatim (a traceparent is hex and dashes).
    constexpr std::string_view trace_field = ",\"trace\":\"";
    if (payload.ends_with('"')) {
        auto at = payload.rfind(trace_field);
        if (at == std::string_view::npos) return std::nullopt;
        auto trace = payload.substr(at + trace_field.size());
        if (trace.empty()) return std::nullopt;  // the field's opening quote, not a closing one
        trace.remove_suffix(1);
        if (!json_verbatim(trace) || trace.find('"') != std::string_view::npos) return std::nullopt;
        e.trace = trace;
        payload = payload.substr(0, at);
    }
    // What is left is the payload when the text is in this form; when it is not, it does not
    // parse (the rest of another field follows it).
    try {
        e.payload = nlohmann::json::parse(payload);
    } catch (const nlohmann::json::parse_error&) {
        return std::nullopt;
    }
    return e;
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
    if (auto own = read_own_signal(id, text)) return std::move(*own);
    auto j = nlohmann::json::parse(text);
    inbox_entry e;
    e.id = id;
    e.key = j.value("key", "");
    e.path = j.at("path").get<std::string>();
    if (auto payload = j.find("payload"); payload != j.end()) e.payload = std::move(*payload);
    const auto& at = j.at("at");
    if (!at.is_number_integer())  // nlohmann would cast a float to an integer that cannot hold it
        throw std::invalid_argument("a signal's arrival time that is not a whole number: " +
                                    at.dump());
    e.at = arrival_at(at.get<std::int64_t>());
    e.trace = j.value("trace", "");
    return e;
}

}  // namespace keel::process::detail
