#include "cli.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "commands.hpp"
#include "new_project.hpp"
#include "views.hpp"

namespace keel::cli {

namespace {

using action = std::function<exit_code(admin_client&, std::ostream& out, std::ostream& err)>;
// A command that needs no service (keel new).
using local_action = std::function<exit_code(std::ostream& out)>;

struct command {
    CLI::App* app;
    action run;
    local_action run_local = {};
};

struct global_options {
    std::string url = "http://127.0.0.1:8080";
    std::string token;
    double timeout_seconds = 10;

    connection_options connection() const {
        auto ms = std::lround(std::clamp(timeout_seconds, 0.001, max_timeout_seconds) * 1000);
        return {url, token, std::chrono::milliseconds(ms)};
    }
    static constexpr double max_timeout_seconds = 1e7;
};

// Every option value, bound to the parser by reference; lives as long as run_cli.
struct invocation {
    global_options global;
    ps_options ps;
    show_options show;
    journal_options journal;
    cancel_options cancel;
    resume_options resume;
    retry_options retry;
    remove_signal_options remove_signal;
    signal_options signal;
    std::string payload;
    stats_options stats;
    workers_options workers;
    store_options store;
    schedules_options schedules;
    queues_options queues;
    schedule_options schedule;
    new_options project;
};

std::optional<double> parse_number(const std::string& text, bool whole) {
    char* end = nullptr;
    errno = 0;
    double value = whole ? static_cast<double>(std::strtoll(text.c_str(), &end, 10))
                         : std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE) return std::nullopt;
    return value;
}

// Accepts a number (only whole ones when `whole`) of at least `min`, or above `min` when not
// `inclusive`; refuses anything else saying what was `expected`.
CLI::Validator number_check(double min, bool inclusive, bool whole, std::string expected,
                            std::string tag) {
    return CLI::Validator(
        [=](std::string& text) -> std::string {
            auto value = parse_number(text, whole);
            bool ok = value && (inclusive ? *value >= min : *value > min);
            return ok ? std::string() : "must be " + expected + " (got " + text + ")";
        },
        tag);
}

const CLI::Validator positive_seconds =
    number_check(0, false, false, "a positive number of seconds", "POSITIVE");
const CLI::Validator positive_whole =
    number_check(1, true, true, "a whole number from 1", "POSITIVE");
const CLI::Validator non_negative_whole =
    number_check(0, true, true, "a whole number from 0", "NONNEGATIVE");

void add_global_options(CLI::App& app, global_options& g) {
    app.add_option("--url", g.url, "base URL of the admin API (http:// only)")
        ->envname("KEEL_ADMIN_URL")
        ->capture_default_str();
    app.add_option("--token", g.token, "admin token, sent as Authorization: Bearer <token>")
        ->envname("KEEL_ADMIN_TOKEN");
    app.add_option("--timeout", g.timeout_seconds, "seconds to wait for each answer")
        ->check(positive_seconds)
        ->capture_default_str();
}

void add_json_flag(CLI::App* sub, bool& json) {
    sub->add_flag("--json", json, "print the API's JSON, pretty-printed");
}

command add_ps(CLI::App& app, ps_options& o) {
    auto* sub = app.add_subcommand("ps", "list instances, newest first");
    sub->add_option("--definition", o.definition, "only this process definition");
    sub->add_option("--status", o.status, "only this status")
        ->check(CLI::IsMember(std::vector<std::string>(std::begin(statuses), std::end(statuses))));
    sub->add_option("--prefix", o.prefix, "only ids that start with this");
    sub->add_option("--parent", o.parent,
                    "only the children this instance started (one page; not with --since, "
                    "--until or --cursor)");
    sub->add_option("--since", o.since,
                    "created at or after: an RFC 3339 time or a duration back (15m, 2h, 3d)");
    sub->add_option("--until", o.until, "created before: an RFC 3339 time or a duration back");
    sub->add_option("--limit", o.limit, "instances per page, 1 to 1000")
        ->check(CLI::Range(1, 1000))
        ->capture_default_str();
    sub->add_option("--cursor", o.cursor, "start at this page (printed after a page)");
    sub->add_flag("--all", o.all, "every page, not just one");
    add_json_flag(sub, o.json);
    return {sub,
            [&o](admin_client& c, std::ostream& out, std::ostream&) { return run_ps(c, o, out); }};
}

command add_show(CLI::App& app, show_options& o) {
    auto* sub = app.add_subcommand("show", "one instance: status, waits, timers, inbox, retries");
    sub->add_option("id", o.id, "instance id (fulfil/o-17)")->required();
    add_json_flag(sub, o.json);
    return {sub, [&o](admin_client& c, std::ostream& out, std::ostream&) {
                return run_show(c, o, out);
            }};
}

command add_journal(CLI::App& app, journal_options& o) {
    auto* sub = app.add_subcommand("journal", "an instance's whole journal");
    sub->add_option("id", o.id, "instance id")->required();
    sub->add_option("--retry", o.retry, "the journal as it was before the N-th retry (1-based)")
        ->check(positive_whole);
    add_json_flag(sub, o.json);
    return {sub, [&o](admin_client& c, std::ostream& out, std::ostream&) {
                return run_journal(c, o, out);
            }};
}

command add_cancel(CLI::App& app, cancel_options& o) {
    auto* sub = app.add_subcommand("cancel", "cancel an instance that is not final");
    sub->add_option("id", o.id, "instance id")->required();
    return {sub, [&o](admin_client& c, std::ostream& out, std::ostream&) {
                return run_cancel(c, o, out);
            }};
}

command add_resume(CLI::App& app, resume_options& o) {
    auto* sub = app.add_subcommand(
        "resume", "run a parked instance again, or every parked instance of a definition");
    sub->add_option("id", o.id, "instance id");
    sub->add_flag("--parked", o.parked, "every parked instance of --definition");
    sub->add_option("--definition", o.definition, "the process definition (with --parked)");
    return {sub, [&o](admin_client& c, std::ostream& out, std::ostream& err) {
                return run_resume(c, o, out, err);
            }};
}

command add_retry(CLI::App& app, retry_options& o) {
    auto* sub = app.add_subcommand(
        "retry", "keep journal entries 0..N-1 of a failed or parked instance and run on from N");
    sub->add_option("id", o.id, "instance id")->required();
    sub->add_option("--from", o.from, "the first journal entry to run again")
        ->required()
        ->check(non_negative_whole);
    sub->add_option("--without", o.without,
                    "the inbox id of a consumed signal not to give back (repeatable)")
        ->check(non_negative_whole);
    return {sub, [&o](admin_client& c, std::ostream& out, std::ostream&) {
                return run_retry(c, o, out);
            }};
}

command add_remove_signal(CLI::App& app, remove_signal_options& o) {
    auto* sub = app.add_subcommand(
        "remove-signal", "take one signal out of the inbox of a suspended or final instance");
    sub->add_option("id", o.id, "instance id")->required();
    sub->add_option("inbox", o.inbox, "the signal's inbox id (keel show lists the inbox)")
        ->required()
        ->check(non_negative_whole);
    return {sub, [&o](admin_client& c, std::ostream& out, std::ostream&) {
                return run_remove_signal(c, o, out);
            }};
}

command add_signal(CLI::App& app, signal_options& o, std::string& payload) {
    auto* sub = app.add_subcommand(
        "signal", "emit a signal to its subscribers, or deliver it to one instance");
    sub->add_option("path", o.path, "the signal's path (/payment/o-17/received)")->required();
    auto* payload_option = sub->add_option("--payload", payload, "the payload, as JSON");
    sub->add_option("--key", o.key, "idempotency key: the same key is delivered once");
    sub->add_option("--instance", o.instance, "deliver to this instance's inbox only");
    return {sub, [&o, &payload, payload_option](admin_client& c, std::ostream& out, std::ostream&) {
                if (payload_option->count() > 0) o.payload = payload;
                return run_signal(c, o, out);
            }};
}

command add_stats(CLI::App& app, stats_options& o) {
    auto* sub = app.add_subcommand("stats", "instances per definition and status");
    add_json_flag(sub, o.json);
    return {sub, [&o](admin_client& c, std::ostream& out, std::ostream&) {
                return run_stats(c, o, out);
            }};
}

command add_workers(CLI::App& app, workers_options& o) {
    auto* sub = app.add_subcommand("workers", "the live workers and the code versions they run");
    add_json_flag(sub, o.json);
    return {sub, [&o](admin_client& c, std::ostream& out, std::ostream&) {
                return run_workers(c, o, out);
            }};
}

command add_schedules(CLI::App& app, schedules_options& o) {
    auto* sub = app.add_subcommand(
        "schedules", "the schedules: calendar, zone, next and last tick, counts of ticks");
    add_json_flag(sub, o.json);
    return {sub, [&o](admin_client& c, std::ostream& out, std::ostream&) {
                return run_schedules(c, o, out);
            }};
}

command add_queues(CLI::App& app, queues_options& o) {
    auto* sub = app.add_subcommand(
        "queues", "the queues: limits, waiting and admitted; with a name, its partitions");
    sub->add_option("name", o.name, "one queue, shown with its partitions");
    add_json_flag(sub, o.json);
    return {sub, [&o](admin_client& c, std::ostream& out, std::ostream&) {
                return run_queues(c, o, out);
            }};
}

command add_schedule(CLI::App& app, schedule_options& o) {
    auto* sub =
        app.add_subcommand("schedule", "pause, resume, trigger, backfill or delete a schedule");
    sub->add_option("action", o.action,
                    "pause, resume, trigger (a tick now), backfill (--from, --to) or delete")
        ->required()
        ->check(CLI::IsMember({"pause", "resume", "trigger", "backfill", "delete"}));
    sub->add_option("name", o.name, "the schedule's name")->required();
    sub->add_option("--from", o.from, "backfill: the first instant (RFC 3339)");
    sub->add_option("--to", o.to, "backfill: the last instant (RFC 3339)");
    return {sub, [&o](admin_client& c, std::ostream& out, std::ostream&) {
                return run_schedule(c, o, out);
            }};
}

command add_store(CLI::App& app, store_options& o) {
    auto* sub = app.add_subcommand(
        "store", "whether the process store is trusted (after Redis came back empty, it is not)");
    add_json_flag(sub, o.json);
    auto* confirm = sub->add_subcommand(
        "confirm", "accept the process store as it is: every worker starts flows and claims again");
    add_json_flag(confirm, o.json);
    return {sub, [&o, confirm](admin_client& c, std::ostream& out, std::ostream&) {
                o.confirm = confirm->parsed();
                return run_store(c, o, out);
            }};
}

command add_new(CLI::App& app, new_options& o) {
    auto* sub = app.add_subcommand(
        "new", "write a new service project: a controller, a durable process and its test");
    sub->add_option("name", o.name,
                    "the service's name: [a-z][a-z0-9-]*, also its executable and namespace")
        ->required();
    sub->add_option("--dir", o.dir, "where to write it (default: ./<name>); new or empty");
    return {sub, {}, [&o](std::ostream& out) { return run_new(o, out); }};
}

std::vector<command> add_commands(CLI::App& app, invocation& v) {
    return {add_ps(app, v.ps),
            add_show(app, v.show),
            add_journal(app, v.journal),
            add_cancel(app, v.cancel),
            add_resume(app, v.resume),
            add_retry(app, v.retry),
            add_remove_signal(app, v.remove_signal),
            add_signal(app, v.signal, v.payload),
            add_stats(app, v.stats),
            add_workers(app, v.workers),
            add_schedules(app, v.schedules),
            add_queues(app, v.queues),
            add_schedule(app, v.schedule),
            add_store(app, v.store),
            add_new(app, v.project)};
}

const command& chosen(const std::vector<command>& commands) {
    for (const auto& c : commands)
        if (c.app->parsed()) return c;
    throw usage_error("no command given");
}

int report(std::ostream& err, const std::exception& e, exit_code code) {
    err << "keel: " << e.what() << "\n";
    if (code == exit_code::usage) err << "Run with --help for more information.\n";
    return to_int(code);
}

int run(const std::vector<command>& commands, const global_options& global, std::ostream& out,
        std::ostream& err) {
    try {
        const auto& c = chosen(commands);
        if (c.run_local) return to_int(c.run_local(out));
        admin_client client(global.connection());
        return to_int(c.run(client, out, err));
    } catch (const usage_error& e) {
        return report(err, e, exit_code::usage);
    } catch (const std::exception& e) {
        return report(err, e, exit_code::failed);
    }
}

}  // namespace

int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
    CLI::App app{
        "keel: inspect and repair the process instances of a Keel service, or write a new one",
        "keel"};
    app.require_subcommand(1);
    app.fallthrough();
    app.set_version_flag("--version", "keel " KEEL_CLI_VERSION);
    invocation v;
    add_global_options(app, v.global);
    auto commands = add_commands(app, v);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e, out, err) == 0 ? to_int(exit_code::ok) : to_int(exit_code::usage);
    }
    return run(commands, v.global, out, err);
}

}  // namespace keel::cli
