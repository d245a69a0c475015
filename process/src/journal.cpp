#include <algorithm>
#include <array>
#include <keel/process/definition.hpp>
#include <keel/process/journal.hpp>
#include <keel/process/retry.hpp>
#include <keel/process/store.hpp>
#include <stdexcept>
#include <vector>

namespace keel::process {

namespace {
constexpr std::array<std::string_view, 11> op_names = {
    "run", "timer", "signal", "race", "any", "now", "random", "uuid", "lock", "relock", "patch"};
constexpr std::array<std::string_view, 5> status_names = {"running", "suspended", "completed",
                                                          "failed", "cancelled"};
}  // namespace

std::string_view to_string(op_kind kind) noexcept {
    return op_names[static_cast<std::size_t>(kind)];
}

std::optional<op_kind> parse_op_kind(std::string_view text) noexcept {
    for (std::size_t i = 0; i < op_names.size(); ++i)
        if (op_names[i] == text) return static_cast<op_kind>(i);
    return std::nullopt;
}

std::string_view to_string(instance_status s) noexcept {
    return status_names[static_cast<std::size_t>(s)];
}

std::optional<instance_status> parse_instance_status(std::string_view text) noexcept {
    for (std::size_t i = 0; i < status_names.size(); ++i)
        if (status_names[i] == text) return static_cast<instance_status>(i);
    return std::nullopt;
}

bool is_final(instance_status s) noexcept {
    return s == instance_status::completed || s == instance_status::failed ||
           s == instance_status::cancelled;
}

std::string describe(op_kind kind, std::string_view name) {
    std::string out(to_string(kind));
    if (!name.empty()) {
        out += " \"";
        out += name;
        out += '"';
    }
    return out;
}

void to_json(nlohmann::json& j, const journal_entry& e) {
    j = nlohmann::json{
        {"seq", e.seq}, {"kind", to_string(e.kind)}, {"name", e.name}, {"value", e.value}};
    if (e.failed) j["failed"] = true;
    auto ms = [](time_point t) {
        return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
    };
    if (e.at != time_point{}) j["at"] = ms(e.at);
    if (e.started != time_point{} && ms(e.started) != ms(e.at)) j["started"] = ms(e.started);
    if (e.attempts > 1) j["attempts"] = e.attempts;
}

namespace {

// from_json's work; the value is moved out of `value` when it is given (j's own "value").
void read_entry(const nlohmann::json& j, journal_entry& e, nlohmann::json* value_to_move) {
    const auto& seq = j.at("seq");
    if (!seq.is_number_unsigned())
        throw std::invalid_argument("journal entry seq " + seq.dump() + " is not a count");
    e.seq = seq.get<std::uint64_t>();
    auto kind = parse_op_kind(j.at("kind").get<std::string>());
    if (!kind) throw std::invalid_argument("unknown journal entry kind " + j.at("kind").dump());
    e.kind = *kind;
    e.name = j.at("name").get<std::string>();
    auto value = j.find("value");
    if (value != j.end() && nesting_depth(*value) > max_value_depth)
        throw std::invalid_argument("journal entry value nested deeper than " +
                                    std::to_string(max_value_depth) + " levels");
    if (value == j.end())
        e.value = nlohmann::json();
    else if (value_to_move)
        e.value = std::move(*value_to_move);
    else
        e.value = *value;
    e.failed = j.value("failed", false);
    auto time_of = [&](const char* field) {
        auto t = j.find(field);
        return t != j.end() && t->is_number_integer()
                   ? time_point(std::chrono::milliseconds(t->get<std::int64_t>()))
                   : time_point{};
    };
    e.at = time_of("at");
    e.started = time_of("started");
    if (e.started == time_point{}) e.started = e.at;
    auto attempts = j.find("attempts");
    e.attempts = attempts != j.end() && attempts->is_number_unsigned()
                     ? static_cast<std::uint32_t>(
                           std::min<std::uint64_t>(attempts->get<std::uint64_t>(), UINT32_MAX))
                     : 1;
}

}  // namespace

void from_json(const nlohmann::json& j, journal_entry& e) {
    read_entry(j, e, nullptr);
}

void from_json(nlohmann::json&& j, journal_entry& e) {
    auto value = j.is_object() ? j.find("value") : j.end();
    read_entry(j, e, value != j.end() ? &*value : nullptr);
}

std::size_t nesting_depth(const nlohmann::json& j, std::size_t limit) {
    std::size_t deepest = 0;
    std::vector<std::pair<const nlohmann::json*, std::size_t>> todo{{&j, 0}};
    while (!todo.empty()) {
        auto [at, depth] = todo.back();
        todo.pop_back();
        if (!at->is_structured()) continue;
        deepest = std::max(deepest, depth + 1);
        if (deepest > limit) return deepest;
        for (const auto& child : *at) todo.emplace_back(&child, depth + 1);
    }
    return deepest;
}

std::string_view to_string(store_error e) noexcept {
    switch (e) {
        case store_error::not_found:
            return "not_found";
        case store_error::fenced:
            return "fenced";
        case store_error::conflict:
            return "conflict";
        case store_error::inbox_missing:
            return "inbox_missing";
        case store_error::finished:
            return "finished";
        case store_error::busy:
            return "busy";
        case store_error::wrong_state:
            return "wrong_state";
        case store_error::out_of_range:
            return "out_of_range";
        case store_error::declined:
            return "declined";
        case store_error::document_changed:
            return "document_changed";
    }
    return "unknown";
}

duration retry_policy::backoff(int attempt) const {
    double factor = 1.0;
    for (int i = 1; i < attempt; ++i) factor *= multiplier;
    auto d = std::chrono::duration<double, duration::period>(initial_backoff) * factor;
    if (d > max_backoff) return max_backoff;
    return std::chrono::duration_cast<duration>(d);
}

namespace {
constexpr std::array<std::string_view, index_status_count> index_status_names = {
    "running", "suspended", "parked", "failed", "completed", "cancelled", "queued"};
}  // namespace

std::string_view to_string(index_status s) noexcept {
    return index_status_names[static_cast<std::size_t>(s)];
}

std::optional<index_status> parse_index_status(std::string_view text) noexcept {
    for (std::size_t i = 0; i < index_status_names.size(); ++i)
        if (index_status_names[i] == text) return static_cast<index_status>(i);
    return std::nullopt;
}

index_status index_status_of(instance_status s, bool parked) noexcept {
    switch (s) {
        case instance_status::running:
            return index_status::running;
        case instance_status::suspended:
            return index_status::suspended;
        case instance_status::completed:
            return index_status::completed;
        case instance_status::cancelled:
            return index_status::cancelled;
        case instance_status::failed:
            break;
    }
    return parked ? index_status::parked : index_status::failed;
}

}  // namespace keel::process
