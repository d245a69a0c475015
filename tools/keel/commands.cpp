#include "commands.hpp"

#include <algorithm>
#include <chrono>

#include "encoding.hpp"
#include "json_fields.hpp"
#include "views.hpp"

namespace keel::cli {

namespace {

using json = nlohmann::json;

time_point now() {
    return std::chrono::time_point_cast<std::chrono::milliseconds>(
        std::chrono::system_clock::now());
}

void print_json(std::ostream& out, const json& doc) {
    out << doc.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
}

// "/admin/<verb>/<id>", the id percent-encoded but for its '/'.
std::string instance_target(std::string_view verb, std::string_view id) {
    if (id.empty()) throw usage_error("the instance id is empty");
    return "/admin/" + std::string(verb) + "/" + percent_encode(id);
}

std::string plural(std::size_t n, std::string_view word) {
    return std::to_string(n) + " " + std::string(word) + (n == 1 ? "" : "s");
}

json instances_page(admin_client& client, const ps_options& o, std::string_view cursor) {
    return client.get("/admin/instances" + query_string({{"definition", o.definition},
                                                         {"status", o.status},
                                                         {"prefix", o.prefix},
                                                         {"parent", o.parent},
                                                         {"since", o.since},
                                                         {"until", o.until},
                                                         {"limit", std::to_string(o.limit)},
                                                         {"cursor", std::string(cursor)}}));
}

json all_instances(admin_client& client, const ps_options& o) {
    auto instances = json::array();
    std::string cursor = o.cursor;
    for (;;) {
        auto page = instances_page(client, o, cursor);
        for (const auto& i : array_field(page, "instances")) instances.push_back(i);
        auto next = text_field(page, "next");
        if (next.empty()) return instances;
        if (next == cursor) throw transport_error("the service answered the same cursor twice");
        cursor = std::move(next);
    }
}

json journal_page(admin_client& client, const journal_options& o, std::int64_t offset) {
    auto retry = o.retry > 0 ? std::to_string(o.retry) : std::string();
    return client.get(instance_target("journal", o.id) +
                      query_string({{"offset", std::to_string(offset)},
                                    {"limit", std::to_string(journal_page_size)},
                                    {"retry", retry}}));
}

std::optional<std::int64_t> next_offset(const json& page, std::int64_t offset) {
    if (text_field(page, "next").empty()) return std::nullopt;
    auto next = integer_field(page, "next", -1);
    if (next <= offset)
        throw transport_error("the service answered a journal page with a bad next");
    return next;
}

json whole_journal(admin_client& client, const journal_options& o) {
    auto entries = json::array();
    json total;
    for (std::optional<std::int64_t> offset = 0; offset;) {
        auto page = journal_page(client, o, *offset);
        for (const auto& e : array_field(page, "entries")) entries.push_back(e);
        total = integer_field(page, "total", static_cast<std::int64_t>(entries.size()));
        offset = next_offset(page, *offset);
    }
    return {{"entries", std::move(entries)}, {"total", std::move(total)}};
}

void check_resume(const resume_options& o) {
    if (o.parked && !o.id.empty())
        throw usage_error("give either an instance ID or --parked, not both");
    if (o.parked && o.definition.empty()) throw usage_error("--parked needs --definition");
    if (!o.parked && o.id.empty())
        throw usage_error("give an instance ID, or --parked --definition D");
    if (!o.parked && !o.definition.empty()) throw usage_error("--definition goes with --parked");
}

exit_code resume_parked(admin_client& client, const resume_options& o, std::ostream& out,
                        std::ostream& err) {
    auto answer = client.post("/admin/resume-parked", json{{"definition", o.definition}});
    const auto& resumed = array_field(answer, "resumed");
    const auto& refused = array_field(answer, "refused");
    if (resumed.empty() && refused.empty())
        out << "no parked instances of " << o.definition << "\n";
    if (!resumed.empty()) out << "resumed " << plural(resumed.size(), "instance") << ":\n";
    for (const auto& id : resumed)
        out << "  " << (id.is_string() ? id.get<std::string>() : compact(id)) << "\n";
    for (const auto& r : refused)
        err << "refused " << text_field(r, "id") << ": " << text_field(r, "reason") << "\n";
    return refused.empty() ? exit_code::ok : exit_code::failed;
}

json parse_payload(const std::optional<std::string>& payload) {
    if (!payload) return nullptr;
    try {
        return json::parse(*payload);
    } catch (const json::parse_error& e) {
        throw usage_error("--payload is not valid JSON: " + std::string(e.what()));
    }
}

void print_emitted(const json& answer, std::ostream& out) {
    auto count =
        static_cast<std::size_t>(std::max<std::int64_t>(0, integer_field(answer, "delivered")));
    out << "delivered to " << plural(count, "instance");
    if (flag_field(answer, "duplicate")) out << " (duplicate: the key was seen before)";
    out << "\n";
}

void print_stored(const std::string& id, const json& answer, std::ostream& out) {
    auto outcome = text_field(answer, "outcome", "stored");
    bool waiting = flag_field(answer, "waiting");
    out << id << ": " << outcome;
    if (outcome == "duplicate")
        out << " (the key was delivered before)";
    else
        out << (waiting ? " (the instance was waiting for it)"
                        : " (in the inbox, not waited for yet)");
    out << "\n";
    if (auto note = text_field(answer, "note"); !note.empty()) out << "note: " << note << "\n";
}

}  // namespace

exit_code run_ps(admin_client& client, const ps_options& options, std::ostream& out) {
    if (options.all) {
        auto instances = all_instances(client, options);
        if (options.json)
            print_json(out, {{"instances", instances}});
        else
            out << render_instances(instances, now());
        return exit_code::ok;
    }
    auto page = instances_page(client, options, options.cursor);
    if (options.json) {
        print_json(out, page);
        return exit_code::ok;
    }
    out << render_instances(array_field(page, "instances"), now());
    auto next = text_field(page, "next");
    if (!next.empty()) out << render_more_hint(next);
    return exit_code::ok;
}

exit_code run_show(admin_client& client, const show_options& options, std::ostream& out) {
    auto instance = client.get(instance_target("instances", options.id));
    if (options.json)
        print_json(out, instance);
    else
        out << render_instance(instance, now());
    return exit_code::ok;
}

exit_code run_journal(admin_client& client, const journal_options& options, std::ostream& out) {
    auto journal = whole_journal(client, options);
    if (options.json)
        print_json(out, journal);
    else
        out << render_journal(journal["entries"], now());
    return exit_code::ok;
}

exit_code run_cancel(admin_client& client, const cancel_options& options, std::ostream& out) {
    auto answer = client.post(instance_target("cancel", options.id));
    out << text_field(answer, "id", options.id) << ": " << text_field(answer, "status", "cancelled")
        << "\n";
    return exit_code::ok;
}

exit_code run_resume(admin_client& client, const resume_options& options, std::ostream& out,
                     std::ostream& err) {
    check_resume(options);
    if (options.parked) return resume_parked(client, options, out, err);
    auto answer = client.post(instance_target("resume", options.id));
    out << text_field(answer, "id", options.id) << ": " << text_field(answer, "status", "running")
        << "\n";
    return exit_code::ok;
}

exit_code run_retry(admin_client& client, const retry_options& options, std::ostream& out) {
    json body{{"from", options.from}};
    if (!options.without.empty()) body["without"] = options.without;
    auto answer = client.post(instance_target("retry", options.id), body);
    out << text_field(answer, "id", options.id) << ": " << text_field(answer, "status", "running")
        << " again from journal entry " << text_field(answer, "from", std::to_string(options.from));
    if (!options.without.empty()) {
        out << ", without inbox entr" << (options.without.size() == 1 ? "y" : "ies");
        for (std::size_t i = 0; i < options.without.size(); ++i)
            out << (i ? ", " : " ") << options.without[i];
    }
    out << "\n";
    return exit_code::ok;
}

exit_code run_remove_signal(admin_client& client, const remove_signal_options& options,
                            std::ostream& out) {
    auto answer =
        client.post(instance_target("remove-signal", options.id), json{{"inbox", options.inbox}});
    auto removed = answer.is_object() ? answer.value("removed", json()) : json();
    out << text_field(answer, "id", options.id) << ": removed inbox entry "
        << text_field(removed, "id", std::to_string(options.inbox)) << " "
        << text_field(removed, "path") << "\n";
    return exit_code::ok;
}

exit_code run_signal(admin_client& client, const signal_options& options, std::ostream& out) {
    if (!options.path.starts_with('/'))
        throw usage_error("the signal path must start with '/' (got '" + options.path + "')");
    auto payload = parse_payload(options.payload);
    if (options.instance.empty()) {
        header_list headers;
        if (!options.key.empty()) headers.emplace_back("Idempotency-Key", options.key);
        auto body = options.payload ? std::optional<json>(payload) : std::nullopt;
        print_emitted(client.post("/admin/signals" + percent_encode(options.path), body, headers),
                      out);
        return exit_code::ok;
    }
    json body{{"path", options.path}, {"payload", payload}};
    if (!options.key.empty()) body["key"] = options.key;
    print_stored(options.instance, client.post(instance_target("signal", options.instance), body),
                 out);
    return exit_code::ok;
}

exit_code run_stats(admin_client& client, const stats_options& options, std::ostream& out) {
    auto stats = client.get("/admin/stats");
    if (options.json)
        print_json(out, stats);
    else
        out << render_stats(stats);
    return exit_code::ok;
}

exit_code run_store(admin_client& client, const store_options& options, std::ostream& out) {
    if (options.confirm) {
        auto done = client.post("/admin/store/confirm");
        if (options.json)
            print_json(out, done);
        else
            out << "store " << done.value("store", std::string()) << " confirmed: workers start "
                << "flows and claim work again\n";
        return exit_code::ok;
    }
    auto state = client.get("/admin/store");
    if (options.json) {
        print_json(out, state);
    } else if (state.value("trusted", false)) {
        out << "trusted\n";
    } else {
        out << "in question: " << state.value("reason", std::string()) << "\n";
    }
    return state.value("trusted", false) ? exit_code::ok : exit_code::failed;
}

exit_code run_queues(admin_client& client, const queues_options& options, std::ostream& out) {
    if (options.name.empty()) {
        auto queues = client.get("/admin/queues");
        if (options.json)
            print_json(out, queues);
        else
            out << render_queues(queues.is_object() ? queues.value("queues", json()) : json());
        return exit_code::ok;
    }
    auto queue = client.get("/admin/queues/" + percent_encode(options.name));
    if (options.json)
        print_json(out, queue);
    else
        out << render_queue(queue);
    return exit_code::ok;
}

exit_code run_schedules(admin_client& client, const schedules_options& options, std::ostream& out) {
    auto schedules = client.get("/admin/schedules");
    if (options.json)
        print_json(out, schedules);
    else
        out << render_schedules(
            schedules.is_object() ? schedules.value("schedules", json()) : json(), now());
    return exit_code::ok;
}

exit_code run_schedule(admin_client& client, const schedule_options& options, std::ostream& out) {
    if (options.name.empty()) throw usage_error("the schedule's name is empty");
    auto target = "/admin/schedules/" + percent_encode(options.name) + "/" + options.action;
    if (options.action == "backfill") {
        if (options.from.empty() || options.to.empty())
            throw usage_error("backfill needs --from and --to (RFC 3339 times)");
        client.post(target, json{{"from", options.from}, {"to", options.to}});
        out << options.name << ": backfilled from " << options.from << " to " << options.to << "\n";
        return exit_code::ok;
    }
    if (!options.from.empty() || !options.to.empty())
        throw usage_error("--from and --to are for backfill");
    client.post(target);
    out << options.name << ": " << options.action
        << (options.action == "delete"    ? "d"
            : options.action == "trigger" ? "ed"
                                          : "d")
        << "\n";
    return exit_code::ok;
}

exit_code run_workers(admin_client& client, const workers_options& options, std::ostream& out) {
    auto workers = client.get("/admin/workers");
    if (options.json)
        print_json(out, workers);
    else
        out << render_workers(workers.is_object() ? workers.value("workers", json()) : json(),
                              now());
    return exit_code::ok;
}

}  // namespace keel::cli
