#include "views.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "encoding.hpp"
#include "json_fields.hpp"

namespace keel::cli {

namespace {

using json = nlohmann::json;

constexpr std::size_t key_width = 12;
constexpr std::string_view section_indent = "  ";

bool present(const json& object, std::string_view key) {
    return !text_field(object, key).empty();
}

std::string field_line(std::string_view key, std::string_view value) {
    std::string label = std::string(key) + ":";
    label.resize(std::max(label.size(), key_width), ' ');
    return label + std::string(value) + "\n";
}

std::string truncated_field(std::string_view key, std::string_view value) {
    return field_line(key, truncate_end(one_line(value), line_width - key_width));
}

std::string lease_text(const json& lease, time_point now) {
    if (!lease.is_object()) return "none";
    auto expires = text_field(lease, "expires");
    return "worker " + text_field(lease, "worker") + ", epoch " + text_field(lease, "epoch") +
           ", expires " + relative_time(expires, now);
}

std::string section(std::string_view title, const std::vector<column>& columns,
                    const std::vector<row>& rows) {
    auto head = std::string(title);
    if (rows.empty()) return head + ": none\n";
    return head + " (" + std::to_string(rows.size()) + "):\n" +
           render_table(columns, rows, line_width, section_indent);
}

std::string waits_section(const json& instance) {
    std::vector<row> rows;
    for (const auto& w : array_field(instance, "waits"))
        rows.push_back({text_field(w, "seq"), text_field(w, "path")});
    return section("waits", {{"SEQ", elide::none, align::right}, {"PATH", elide::middle}}, rows);
}

std::string timers_section(const json& instance, time_point now) {
    std::vector<row> rows;
    for (const auto& t : array_field(instance, "timers"))
        rows.push_back({text_field(t, "seq"), text_field(t, "name"),
                        absolute_and_relative(text_field(t, "due"), now)});
    return section("timers", {{"SEQ", elide::none, align::right}, {"NAME"}, {"DUE", elide::none}},
                   rows);
}

std::string inbox_section(const json& instance, time_point now) {
    std::vector<row> rows;
    for (const auto& s : array_field(instance, "inbox"))
        rows.push_back({text_field(s, "id"), text_field(s, "path"), text_field(s, "key"),
                        relative_time(text_field(s, "at"), now), text_field(s, "payload")});
    return section("inbox",
                   {{"ID", elide::none, align::right},
                    {"PATH", elide::middle, align::left, 16},
                    {"KEY", elide::middle, align::left, 8},
                    {"AT", elide::none},
                    {"PAYLOAD"}},
                   rows);
}

// Signals operators took out of the inbox (keel remove-signal); nothing when none was.
std::string removed_section(const json& instance, time_point now) {
    std::vector<row> rows;
    for (const auto& s : array_field(instance, "removed"))
        rows.push_back({text_field(s, "id"), text_field(s, "path"), text_field(s, "key"),
                        relative_time(text_field(s, "removed"), now), text_field(s, "payload")});
    if (rows.empty()) return {};
    return section("removed signals",
                   {{"ID", elide::none, align::right},
                    {"PATH", elide::middle, align::left, 16},
                    {"KEY", elide::middle, align::left, 8},
                    {"REMOVED", elide::none},
                    {"PAYLOAD"}},
                   rows);
}

// The children it started (the admin view shows the first 100); nothing when none.
std::string children_section(const json& instance, time_point now) {
    std::vector<row> rows;
    for (const auto& c : array_field(instance, "children"))
        rows.push_back({text_field(c, "id"), text_field(c, "definition"), text_field(c, "status"),
                        text_field(c, "on_parent_close"),
                        relative_time(text_field(c, "changed"), now)});
    if (rows.empty()) return {};
    auto total = text_field(instance, "children_total");
    auto title =
        rows.size() < std::stoull(total.empty() ? "0" : total)
            ? fmt::format("children ({} of {}: keel ps --parent for all)", rows.size(), total)
            : std::string("children");
    return section(title,
                   {{"ID", elide::middle, align::left, 12},
                    {"DEFINITION", elide::end, align::left, 10},
                    {"STATUS", elide::none},
                    {"ON PARENT CLOSE", elide::none},
                    {"CHANGED", elide::none}},
                   rows);
}

// What the handler published (ctx.publish); nothing when it published none.
std::string published_section(const json& instance) {
    std::vector<row> rows;
    auto published = instance.is_object() ? instance.value("published", json()) : json();
    if (!published.is_object()) return {};
    for (const auto& [name, value] : published.items()) rows.push_back({name, value.dump()});
    if (rows.empty()) return {};
    return section("published", {{"NAME", elide::end, align::left, 12}, {"VALUE"}}, rows);
}

std::string steps_section(const json& instance) {
    std::vector<row> rows;
    for (const auto& p : array_field(instance, "steps"))
        rows.push_back({text_field(p, "seq"), text_field(p, "name"), text_field(p, "attempt"),
                        text_field(p, "last_error")});
    if (rows.empty()) return {};  // only running instances have some
    return section("steps in flight",
                   {{"SEQ", elide::none, align::right},
                    {"NAME", elide::end, align::left, 12},
                    {"ATTEMPT", elide::none, align::right},
                    {"LAST ERROR"}},
                   rows);
}

// The inbox ids a retry left out, "4, 7"; empty for none.
std::string without_text(const json& retry) {
    std::string out;
    for (const auto& id : array_field(retry, "without"))
        out += (out.empty() ? "" : ", ") + id.dump();
    return out;
}

std::string retries_section(const json& instance, time_point now) {
    std::vector<row> rows;
    bool left_out = false;  // the WITHOUT column shows only when some retry left signals out
    for (const auto& r : array_field(instance, "retries"))
        left_out = left_out || !without_text(r).empty();
    for (const auto& r : array_field(instance, "retries")) {
        rows.push_back({std::to_string(rows.size() + 1), text_field(r, "from"),
                        absolute_and_relative(text_field(r, "at"), now),
                        text_field(r, "journal_length")});
        if (left_out) rows.back().push_back(without_text(r));
    }
    std::vector<column> columns{{"RETRY", elide::none, align::right},
                                {"FROM", elide::none, align::right},
                                {"AT", elide::none},
                                {"OLD JOURNAL", elide::none, align::right}};
    if (left_out) columns.push_back({"WITHOUT INBOX IDS"});
    auto out = section("retries", columns, rows);
    if (rows.empty()) return out;
    auto id = shell_quote(text_field(instance, "id"));
    return out + fmt::format("{}(keel journal {} --retry N: the journal before retry N)\n",
                             section_indent, id);
}

std::string summary_block(const json& instance, time_point now) {
    std::string out = field_line("id", text_field(instance, "id"));
    out += field_line("definition", text_field(instance, "definition"));
    if (present(instance, "version")) out += field_line("version", text_field(instance, "version"));
    if (present(instance, "parent")) out += field_line("parent", text_field(instance, "parent"));
    out += field_line("status", text_field(instance, "status"));
    out += truncated_field("params", text_field(instance, "params"));
    if (present(instance, "reason"))
        out += field_line("reason", one_line(text_field(instance, "reason")));
    if (present(instance, "error"))
        out += field_line("error", one_line(text_field(instance, "error")));
    if (present(instance, "result"))
        out += truncated_field("result", text_field(instance, "result"));
    out += field_line("created", absolute_and_relative(text_field(instance, "created"), now));
    out += field_line("changed", absolute_and_relative(text_field(instance, "changed"), now));
    auto lease = instance.is_object() ? instance.value("lease", json()) : json();
    out += field_line("lease", lease_text(lease, now));
    out += field_line("journal", text_field(instance, "journal_length", "?") + " entries");
    auto left = instance.is_object() ? instance.value("left", json()) : json();
    if (left.is_object())
        out += field_line("left", "by worker " + text_field(left, "worker") + " (version \"" +
                                      text_field(left, "version") + "\") " +
                                      relative_time(text_field(left, "at"), now) + ": " +
                                      one_line(text_field(left, "reason")));
    return out;
}

std::string count_text(const json& counts, std::string_view status) {
    auto value = text_field(counts, status);
    return value.empty() ? "0" : value;
}

row stats_row(std::string name, const json& counts) {
    row r{std::move(name)};
    for (auto status : statuses) r.push_back(count_text(counts, status));
    return r;
}

}  // namespace

std::string render_instances(const json& instances, time_point now) {
    if (!instances.is_array() || instances.empty()) return "no instances\n";
    std::vector<row> rows;
    for (const auto& i : instances)
        rows.push_back({text_field(i, "id"), text_field(i, "definition"), text_field(i, "status"),
                        relative_time(text_field(i, "created"), now),
                        relative_time(text_field(i, "changed"), now)});
    return render_table({{"ID", elide::middle, align::left, 12},
                         {"DEFINITION", elide::end, align::left, 10},
                         {"STATUS", elide::none},
                         {"CREATED", elide::none},
                         {"CHANGED", elide::none}},
                        rows);
}

std::string render_more_hint(std::string_view cursor) {
    return "more: add --cursor " + shell_quote(cursor) + " for the next page, or --all\n";
}

std::string render_instance(const json& instance, time_point now) {
    return summary_block(instance, now) + "\n" + published_section(instance) +
           children_section(instance, now) + waits_section(instance) +
           timers_section(instance, now) + inbox_section(instance, now) +
           removed_section(instance, now) + steps_section(instance) +
           retries_section(instance, now);
}

std::string render_schedules(const json& schedules, time_point now) {
    if (!schedules.is_array() || schedules.empty()) return "no schedules\n";
    std::vector<row> rows;
    for (const auto& s : schedules) {
        auto state = flag_field(s, "deleted")  ? "deleted"
                     : flag_field(s, "paused") ? "paused"
                                               : "active";
        auto next = text_field(s, "next");
        auto last = text_field(s, "last_tick");
        rows.push_back({text_field(s, "name"), text_field(s, "cron"), text_field(s, "zone"), state,
                        next.empty() ? "-" : relative_time(next, now),
                        last.empty() ? "-" : relative_time(last, now),
                        text_field(s, "started", "0"), text_field(s, "skipped", "0"),
                        text_field(s, "missed", "0")});
    }
    return render_table({{"NAME", elide::middle, align::left, 12},
                         {"CRON", elide::end, align::left, 9},
                         {"ZONE", elide::end, align::left, 8},
                         {"STATE", elide::none},
                         {"NEXT", elide::none},
                         {"LAST", elide::none},
                         {"STARTED", elide::none, align::right},
                         {"SKIPPED", elide::none, align::right},
                         {"MISSED", elide::none, align::right}},
                        rows);
}

namespace {

// A limit as the admin API gives it: null is none.
std::string limit_text(const json& q, std::string_view key) {
    auto it = q.find(key);
    return it == q.end() || it->is_null() ? "-" : text_field(q, key);
}

row queue_row(const json& q) {
    auto rate = limit_text(q, "rate");
    if (rate != "-") rate += "/" + text_field(q, "per_ms", "1000") + "ms";
    return {text_field(q, "name"),
            limit_text(q, "concurrency"),
            limit_text(q, "partition_concurrency"),
            limit_text(q, "worker_concurrency"),
            rate,
            text_field(q, "waiting", "0"),
            text_field(q, "admitted", "0")};
}

std::vector<column> queue_columns() {
    return {
        {"NAME", elide::middle, align::left, 16},     {"CONCURRENCY", elide::none, align::right},
        {"PER PARTITION", elide::none, align::right}, {"PER WORKER", elide::none, align::right},
        {"RATE", elide::none, align::right},          {"WAITING", elide::none, align::right},
        {"ADMITTED", elide::none, align::right}};
}

}  // namespace

std::string render_queues(const json& queues) {
    if (!queues.is_array() || queues.empty()) return "no queues\n";
    std::vector<row> rows;
    for (const auto& q : queues) rows.push_back(queue_row(q));
    return render_table(queue_columns(), rows);
}

std::string render_queue(const json& queue) {
    auto out = render_table(queue_columns(), {queue_row(queue)});
    const auto& partitions = array_field(queue, "partitions");
    if (partitions.empty()) return out + "\nno partitions waiting or admitted\n";
    std::vector<row> rows;
    for (const auto& p : partitions) {
        auto name = text_field(p, "partition");
        rows.push_back({name.empty() ? "(default)" : name, text_field(p, "waiting", "0"),
                        text_field(p, "admitted", "0")});
    }
    out += "\n" + render_table({{"PARTITION", elide::middle, align::left, 24},
                                {"WAITING", elide::none, align::right},
                                {"ADMITTED", elide::none, align::right}},
                               rows);
    if (flag_field(queue, "more_partitions"))
        out += "(more partitions: --json with ?top= shows them)\n";
    return out;
}

std::string render_journal(const json& entries, time_point now) {
    if (!entries.is_array() || entries.empty()) return "no journal entries\n";
    std::vector<row> rows;
    for (const auto& e : entries)
        rows.push_back({text_field(e, "position"), text_field(e, "seq"), text_field(e, "kind"),
                        text_field(e, "name"), flag_field(e, "failed") ? "yes" : "",
                        relative_time(text_field(e, "at"), now), text_field(e, "value")});
    return render_table({{"POS", elide::none, align::right},
                         {"SEQ", elide::none, align::right},
                         {"KIND", elide::end, align::left, 6},
                         {"NAME", elide::end, align::left, 12},
                         {"FAILED", elide::none},
                         {"AT", elide::none},
                         {"VALUE", elide::end, align::left, 12}},
                        rows);
}

std::string render_stats(const json& stats) {
    std::vector<column> columns{{"DEFINITION", elide::end, align::left, 12}};
    for (auto status : statuses) {
        std::string header(status);
        for (auto& c : header) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        columns.push_back({header, elide::none, align::right});
    }
    std::vector<row> rows;
    auto definitions = stats.is_object() ? stats.value("definitions", json::object()) : json();
    if (definitions.is_object())
        for (const auto& [name, counts] : definitions.items())
            rows.push_back(stats_row(name, counts));
    rows.push_back(stats_row("total", stats.is_object() ? stats.value("total", json()) : json()));
    return render_table(columns, rows);
}

std::string render_workers(const json& workers, time_point now) {
    if (!workers.is_array() || workers.empty()) return "no live workers\n";
    std::vector<row> rows;
    for (const auto& w : workers) {
        auto versions = w.is_object() ? w.value("versions", json::object()) : json();
        auto seen = relative_time(text_field(w, "seen"), now);
        if (!versions.is_object() || versions.empty())
            rows.push_back({text_field(w, "worker"), "", "", seen});
        else
            for (const auto& [definition, version] : versions.items())
                rows.push_back({text_field(w, "worker"), definition,
                                version.is_string() ? version.get<std::string>() : "", seen});
    }
    return render_table({{"WORKER", elide::middle, align::left, 12},
                         {"DEFINITION", elide::end, align::left, 12},
                         {"VERSION", elide::end, align::left, 8},
                         {"SEEN", elide::none}},
                        rows);
}

}  // namespace keel::cli
