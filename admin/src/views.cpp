#include "views.hpp"

#include <keel/framework/config.hpp>
#include <keel/framework/rfc3339.hpp>
#include <keel/framework/trace.hpp>
#include <map>

namespace keel::admin::detail {

using process::index_status;

nlohmann::json time_json(time_point t) {
    if (t == time_point{}) return nullptr;
    return format_rfc3339(t);
}

std::optional<time_point> parse_time(std::string_view text, time_point now) {
    if (auto back = config::parse_duration(text)) return now - *back;
    return parse_rfc3339(text);
}

nlohmann::json summary_json(const process::instance_summary& s) {
    return {{"id", s.id},
            {"definition", s.definition},
            {"status", to_string(s.status)},
            {"created", time_json(s.created)},
            {"changed", time_json(s.changed)}};
}

nlohmann::json schedule_json(const process::instance_snapshot& s) {
    nlohmann::json out = nlohmann::json::object();
    if (auto it = s.published.find("schedule"); it != s.published.end() && it->second.is_object())
        out = it->second;
    out["name"] = s.params.is_array() && !s.params.empty() && s.params[0].is_string()
                      ? s.params[0]
                      : nlohmann::json(s.id);
    out["deleted"] = process::is_final(s.status);
    out["instance"] = s.id;  // the schedule's own process
    return out;
}

nlohmann::json child_json(const process::instance_summary& s, process::parent_close on_close) {
    auto out = summary_json(s);
    out["on_parent_close"] = on_close == process::parent_close::cancel ? "cancel" : "abandon";
    return out;
}

nlohmann::json snapshot_json(const process::instance_snapshot& s, std::uint64_t journal_length) {
    auto status = process::index_status_of(s);
    nlohmann::json out{
        {"id", s.id},
        {"definition", s.definition},
        {"version", s.version.empty() ? nlohmann::json() : nlohmann::json(s.version)},
        {"params", s.params},
        {"parent", s.parent.empty() ? nlohmann::json() : nlohmann::json(s.parent)},
        {"trace", nullptr},
        {"status", to_string(status)},
        {"reason", status == index_status::parked && s.error ? *s.error : ""},
        {"result", s.result.value_or(nullptr)},
        {"error", status != index_status::parked && s.error ? *s.error : ""},
        {"created", time_json(s.created)},
        {"changed", time_json(s.changed)},
        {"journal_length", journal_length}};
    if (auto started = trace::parse_traceparent(s.trace)) out["trace"] = started->trace.hex();
    if (out["reason"] == "") out["reason"] = nullptr;
    if (out["error"] == "") out["error"] = nullptr;
    out["lease"] = s.lease ? nlohmann::json{{"worker", s.lease->worker},
                                            {"epoch", s.lease->epoch},
                                            {"expires", time_json(s.lease_expires)}}
                           : nlohmann::json(nullptr);
    auto& waits = out["waits"] = nlohmann::json::array();
    for (const auto& w : s.waits) waits.push_back({{"seq", w.seq}, {"path", w.path}});
    auto& timers = out["timers"] = nlohmann::json::array();
    for (const auto& t : s.timers)
        timers.push_back({{"seq", t.seq}, {"name", t.name}, {"due", time_json(t.due)}});
    auto& inbox = out["inbox"] = nlohmann::json::array();
    for (const auto& e : s.inbox) inbox.push_back(inbox_entry_json(e));
    auto& retries = out["retries"] = nlohmann::json::array();
    for (const auto& r : s.retries)
        retries.push_back({{"from", r.from},
                           {"at", time_json(r.at)},
                           {"journal_length", r.journal_length},
                           {"without", r.left_out}});
    auto& removed = out["removed"] = nlohmann::json::array();
    for (const auto& r : s.removed) {
        auto entry = inbox_entry_json(r.signal);
        entry["removed"] = time_json(r.removed);
        removed.push_back(std::move(entry));
    }
    out["left"] = s.left ? nlohmann::json{{"worker", s.left->worker},
                                          {"version", s.left->version},
                                          {"reason", s.left->reason},
                                          {"at", time_json(s.left->at)}}
                         : nlohmann::json(nullptr);
    auto& published = out["published"] = nlohmann::json::object();
    for (const auto& [name, value] : s.published) published[name] = value;
    auto queue = process::queue_of(s.journal);
    out["queue"] = queue ? nlohmann::json(*queue) : nlohmann::json(nullptr);
    return out;
}

nlohmann::json queue_json(const process::queue& q, const process::queue_state& s) {
    auto limit = [](std::uint32_t n) {
        return n == 0 ? nlohmann::json(nullptr) : nlohmann::json(n);
    };
    return {{"name", q.name},
            {"concurrency", limit(q.concurrency)},
            {"partition_concurrency", limit(q.partition_concurrency)},
            {"worker_concurrency", limit(q.worker_concurrency)},
            {"rate", limit(q.rate)},
            {"per_ms", std::chrono::ceil<std::chrono::milliseconds>(q.per).count()},
            {"waiting", s.waiting},
            {"admitted", s.admitted}};
}

nlohmann::json partitions_json(const process::queue_state& s) {
    auto out = nlohmann::json::array();
    for (const auto& p : s.partitions)
        out.push_back({{"partition", p.name}, {"waiting", p.waiting}, {"admitted", p.admitted}});
    return out;
}

nlohmann::json inbox_entry_json(const process::inbox_entry& e) {
    return {{"id", e.id},
            {"path", e.path},
            {"key", e.key},
            {"payload", e.payload},
            {"at", time_json(e.at)}};
}

nlohmann::json workers_json(const std::vector<process::worker_record>& workers) {
    auto out = nlohmann::json::array();
    for (const auto& w : workers)
        out.push_back({{"worker", w.worker},
                       {"versions", w.versions},
                       {"seen", time_json(w.seen)},
                       {"expires", time_json(w.expires)}});
    return out;
}

nlohmann::json entry_json(const process::journal_entry& e, std::uint64_t position) {
    nlohmann::json j = {{"position", position}, {"seq", e.seq},     {"kind", to_string(e.kind)},
                        {"name", e.name},       {"value", e.value}, {"failed", e.failed},
                        {"at", time_json(e.at)}};
    if (e.kind == process::op_kind::run) {
        j["started"] = time_json(e.started == time_point{} ? e.at : e.started);
        j["attempts"] = e.attempts;
    }
    return j;
}

nlohmann::json counts_json(const process::instance_counts& counts) {
    auto row_json = [](const process::status_counts& row) {
        nlohmann::json j = nlohmann::json::object();
        for (std::size_t i = 0; i < row.size(); ++i)
            j[std::string(to_string(static_cast<index_status>(i)))] = row[i];
        return j;
    };
    process::status_counts total{};
    auto definitions = nlohmann::json::object();
    for (const auto& [name, row] : counts) {
        definitions[name] = row_json(row);
        for (std::size_t i = 0; i < row.size(); ++i) total[i] += row[i];
    }
    return {{"definitions", definitions}, {"total", row_json(total)}};
}

nlohmann::json steps_json(const std::vector<process::step_attempt>& stored,
                          const std::vector<process::step_progress>& here,
                          const std::string& this_worker) {
    auto text_or_null = [](const std::string& t) {
        return t.empty() ? nlohmann::json(nullptr) : nlohmann::json(t);
    };
    std::map<std::uint64_t, nlohmann::json> by_seq;
    for (const auto& a : stored)
        by_seq[a.seq] = {{"seq", a.seq},
                         {"name", a.name},
                         {"attempt", a.attempt},
                         {"last_error", a.error},
                         {"failed_at", time_json(a.at)},
                         {"worker", a.worker}};
    for (const auto& p : here) {
        auto& step = by_seq[p.seq];
        if (step.is_null()) step = {{"failed_at", nullptr}};
        step["seq"] = p.seq;
        step["name"] = p.name;
        step["attempt"] = p.attempt;
        step["last_error"] = text_or_null(p.last_error);
        step["waiting_for"] = text_or_null(p.waiting_for);
        step["worker"] = this_worker;
    }
    auto out = nlohmann::json::array();
    for (auto& [_, step] : by_seq) out.push_back(std::move(step));
    return out;
}

}  // namespace keel::admin::detail
