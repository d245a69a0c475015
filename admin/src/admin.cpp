#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <functional>
#include <keel/admin/admin.hpp>
#include <keel/framework/log.hpp>
#include <keel/framework/rfc3339.hpp>
#include <keel/http/middleware.hpp>
#include <keel/http/problem.hpp>
#include <keel/http/signal_route.hpp>
#include <keel/process/lineage.hpp>
#include <memory>

#include "console.hpp"
#include "views.hpp"

namespace keel::admin {

namespace {

using http::problem_error;
using http::request;
using http::response;
using http::status;

struct api {
    process::engine& engine;
    process::store& store;
    std::vector<const signals::signal_group*> groups;  // the service's declared signals
};
using api_ptr = std::shared_ptr<const api>;

// Refuses a query parameter the route does not take: `?stauts=failed` answered with every
// instance would look like an answer.
void take_only(const request& req, std::initializer_list<std::string_view> known) {
    for (const auto& [name, value] : req.query_params()) {
        if (std::find(known.begin(), known.end(), name) != known.end()) continue;
        auto taken = known.size() == 0 ? std::string("none")
                                       : fmt::format("only {}", fmt::join(known, ", "));
        throw problem_error(
            status::bad_request,
            fmt::format("unknown query parameter '{}': this route takes {}", name, taken), name);
    }
}

std::string instance_id(const request& req) {
    std::string id(req.param("id"));
    if (id.empty()) throw problem_error(status::bad_request, "no instance id in the path");
    return id;
}

// A count from the query: absent gives `fallback`; out of [low, high] is a 400.
std::uint64_t count_param(const request& req, std::string_view name, std::uint64_t fallback,
                          std::uint64_t low, std::uint64_t high) {
    auto text = req.query(name);
    if (!text) return fallback;
    std::uint64_t n = 0;
    auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), n);
    if (ec != std::errc() || end != text->data() + text->size() || n < low || n > high)
        throw problem_error(status::bad_request,
                            fmt::format("{} must be a whole number from {} to {}", name, low, high),
                            std::string(name));
    return n;
}

process::list_query list_query_of(const request& req, time_point now) {
    take_only(req,
              {"definition", "status", "prefix", "since", "until", "limit", "cursor", "parent"});
    process::list_query q;
    if (auto d = req.query("definition")) q.definition = std::string(*d);
    if (auto s = req.query("status")) {
        q.status = process::parse_index_status(*s);
        if (!q.status)
            throw problem_error(status::bad_request,
                                "status must be one of running, suspended, queued, parked, "
                                "failed, completed, cancelled",
                                "status");
    }
    if (auto p = req.query("prefix")) q.prefix = std::string(*p);
    for (auto [name, slot] : {std::pair{"since", &q.since}, std::pair{"until", &q.until}}) {
        auto text = req.query(name);
        if (!text) continue;
        *slot = detail::parse_time(*text, now);
        if (!*slot)
            throw problem_error(status::bad_request,
                                std::string(name) +
                                    " must be an RFC 3339 time (2026-11-23T10:00:00Z, "
                                    "2026-11-23T11:00:00+01:00) or a duration back from now "
                                    "(15m, 3d)",
                                name);
    }
    q.limit = count_param(req, "limit", 50, 1, 1000);
    if (auto c = req.query("cursor")) q.cursor = std::string(*c);
    return q;
}

// The instance view shows this many children; the listing (?parent=) up to its limit.
constexpr std::size_t shown_children = 100;

// The children an instance started, as the journal names them, each as the store has it now
// (one that expired after its retention is left out).
process::instance_summary summary_of(const process::instance_snapshot& s) {
    return {s.id, s.definition, process::index_status_of(s), s.created, s.changed};
}

// The first `limit` children of `parent` that `wanted` keeps, in the order it started them.
asio::awaitable<std::vector<process::instance_snapshot>> children_of(
    const api& a, const process::instance_snapshot& parent, std::size_t limit,
    const std::function<bool(const process::instance_summary&)>& wanted = {}) {
    std::vector<process::instance_snapshot> out;
    for (const auto& c : process::children_started(parent.journal)) {
        if (out.size() == limit) break;
        auto child = co_await a.store.load(c.id, false);
        if (child && child->status == process::instance_status::suspended) {
            // One waiting for its queue has one entry, its queue's marker: read it to say so.
            auto first = co_await a.store.read_journal(c.id, 0, 0, 1);
            if (first && first->total == 1) child->journal = std::move(first->entries);
        }
        if (child && (!wanted || wanted(summary_of(*child)))) out.push_back(std::move(*child));
    }
    co_return out;
}

// ?parent=<id>: that instance's children, one page, filtered like the listing.
asio::awaitable<response> list_children(api_ptr a, request& req, process::list_query q) {
    for (auto refused : {"since", "until", "cursor"})
        if (req.query(refused))
            throw problem_error(status::bad_request,
                                std::string(refused) + " cannot be combined with parent", refused);
    auto parent = std::string(*req.query("parent"));
    auto snap = co_await a->store.load(parent, true);
    if (!snap) throw problem_error(status::not_found, "no process instance " + parent, "parent");
    // Filtered before the limit: a page of `limit` children that match, not a filtered page.
    auto wanted = [&q](const process::instance_summary& s) {
        return (!q.definition || s.definition == *q.definition) &&
               (!q.status || s.status == *q.status) && s.id.starts_with(q.prefix);
    };
    auto items = nlohmann::json::array();
    for (const auto& c : co_await children_of(*a, *snap, q.limit, wanted))
        items.push_back(detail::summary_json(summary_of(c)));
    co_return response::json({{"instances", std::move(items)}, {"next", nullptr}});
}

asio::awaitable<response> list(api_ptr a, request& req) {
    auto q = list_query_of(req, a->engine.clock().now());
    if (req.query("parent")) co_return co_await list_children(a, req, std::move(q));
    process::list_page page;
    try {
        page = co_await a->store.list(std::move(q));
    } catch (const std::invalid_argument& e) {
        throw problem_error(status::bad_request, e.what(), "cursor");
    }
    auto items = nlohmann::json::array();
    for (const auto& s : page.instances) items.push_back(detail::summary_json(s));
    co_return response::json(
        {{"instances", std::move(items)},
         {"next", page.next.empty() ? nlohmann::json(nullptr) : nlohmann::json(page.next)}});
}

asio::awaitable<response> stats(api_ptr a, request& req) {
    take_only(req, {});
    auto counts = co_await a->store.counts();
    co_return response::json(detail::counts_json(counts));
}

asio::awaitable<response> workers(api_ptr a, request& req) {
    take_only(req, {});
    auto live = co_await a->engine.workers();
    co_return response::json({{"workers", detail::workers_json(live)}});
}

asio::awaitable<response> show(api_ptr a, request& req) {
    take_only(req, {});
    auto id = instance_id(req);
    auto snap = co_await a->store.load(id, true);
    if (!snap) throw problem_error(status::not_found, "no process instance " + id);
    auto out = detail::snapshot_json(*snap, snap->journal.size());
    auto started = process::children_started(snap->journal);
    auto children = co_await children_of(*a, *snap, shown_children);
    auto& shown = out["children"] = nlohmann::json::array();
    for (const auto& c : children) {
        auto it = std::ranges::find(started, c.id, &process::started_child::id);
        shown.push_back(detail::child_json(summary_of(c), it->on_close));
    }
    out["children_total"] = started.size();
    out["steps"] = detail::steps_json(snap->attempts, co_await a->engine.steps_in_flight(id),
                                      a->engine.worker());
    co_return response::json(std::move(out));
}

asio::awaitable<response> journal(api_ptr a, request& req) {
    take_only(req, {"retry", "offset", "limit"});
    auto id = instance_id(req);
    auto retry = count_param(req, "retry", 0, 0, 1'000'000);
    auto offset = count_param(req, "offset", 0, 0, std::uint64_t{1} << 62);
    auto limit = count_param(req, "limit", 100, 1, 1000);
    auto page = co_await a->store.read_journal(id, retry, offset, limit);
    if (!page)
        throw problem_error(status::not_found,
                            retry ? fmt::format("process instance {} has no retry {}", id, retry)
                                  : "no process instance " + id);
    auto entries = nlohmann::json::array();
    for (std::size_t i = 0; i < page->entries.size(); ++i)
        entries.push_back(detail::entry_json(page->entries[i], offset + i));
    auto next = offset + page->entries.size();
    co_return response::json({{"entries", std::move(entries)},
                              {"total", page->total},
                              {"next", next < page->total ? nlohmann::json(next) : nullptr}});
}

// The request header in which the token check tells the handlers the token's name: set on
// every request it lets through, over anything a client sent under that name.
constexpr std::string_view token_name_header = "Keel-Admin-Token-Name";

// One line per operator action, through the "audit" component at info: who (the name of the
// token, and the client's address), what, on which instance, and how it ended.
void audit(const request& req, std::string_view action, std::string_view target,
           std::string_view outcome) {
    static const log::logger audit_log("audit");
    audit_log.info("{} {} by {} ({}, {}): {}", action, target,
                   req.header(token_name_header).value_or("an unnamed token"),
                   req.client_address().empty() ? "in-process" : req.client_address(),
                   req.request_id().empty() ? "no request id" : req.request_id(), outcome);
}

// A refusal as a problem: 404 unknown, 400 a bad position or signal (naming `field`), else 409.
[[noreturn]] void refuse(const process::refusal& r, std::string_view field) {
    using why = process::refusal::reason;
    switch (r.why) {
        case why::not_found:
            throw problem_error(status::not_found, r.message);
        case why::out_of_range:
            throw problem_error(status::bad_request, r.message, "from");
        case why::unknown_signal:
            throw problem_error(status::bad_request, r.message, std::string(field));
        default:
            throw problem_error(status::conflict, r.message);
    }
}

// An action's outcome as HTTP: done, or the refusal as a problem; audited either way.
response answer(const request& req, std::string_view action, std::string_view id,
                const process::action_result& r, nlohmann::json done) {
    audit(req, action, id, r ? std::string_view("done") : std::string_view(r.error().message));
    if (!r) refuse(r.error(), "without");
    return response::json(std::move(done));
}

// Says which children the cancel goes on to cancel: those not final whose parent-close
// policy is cancel and whose outcome the parent had not received (the engine cancels them
// right after the parent, recursively).
asio::awaitable<response> cancel(api_ptr a, request& req) {
    take_only(req, {});
    auto id = instance_id(req);
    // Looked at before the cancel: the children it cancels may be cancelled by the time it
    // answers.
    auto cancelling = nlohmann::json::array();
    if (auto before = co_await a->store.load(id, true)) {
        auto started = process::children_started(before->journal);
        auto children = co_await children_of(*a, *before, started.size());
        for (const auto& c : children) {
            auto it = std::ranges::find(started, c.id, &process::started_child::id);
            if (it->on_close == process::parent_close::cancel && !it->joined &&
                !process::is_final(c.status))
                cancelling.push_back(c.id);
        }
    }
    auto r = co_await a->engine.cancel(id);
    co_return answer(req, "cancel", id, r,
                     {{"id", id}, {"status", "cancelled"}, {"cancelling", std::move(cancelling)}});
}

asio::awaitable<response> resume(api_ptr a, request& req) {
    take_only(req, {});
    auto id = instance_id(req);
    auto r = co_await a->engine.resume(id);
    co_return answer(req, "resume", id, r, {{"id", id}, {"status", "running"}});
}

asio::awaitable<response> resume_parked(api_ptr a, request& req) {
    take_only(req, {});
    auto body = req.json_document();
    if (!body) throw problem_error(std::move(body).error());
    const auto& doc = **body;
    if (!doc.is_object() || !doc.contains("definition") || !doc["definition"].is_string() ||
        doc["definition"].get<std::string>().empty())
        throw problem_error(status::bad_request, "the body must name a definition", "definition");
    process::list_query q;
    q.definition = doc["definition"].get<std::string>();
    q.status = process::index_status::parked;
    q.limit = 1000;
    auto resumed = nlohmann::json::array();
    auto refused = nlohmann::json::array();
    for (;;) {
        auto page = co_await a->store.list(q);
        for (const auto& s : page.instances) {
            auto r = co_await a->engine.resume(s.id);
            audit(req, "resume (parked)", s.id, r ? std::string_view("done") : r.error().message);
            if (r)
                resumed.push_back(s.id);
            else
                refused.push_back({{"id", s.id}, {"reason", r.error().message}});
        }
        if (page.next.empty()) break;
        q.cursor = page.next;
    }
    co_return response::json({{"resumed", resumed}, {"refused", refused}});
}

// The retry body's "without": inbox ids of consumed signals not to give back (absent: none).
std::vector<std::uint64_t> without_of(const nlohmann::json& doc) {
    std::vector<std::uint64_t> out;
    auto it = doc.find("without");
    if (it == doc.end()) return out;
    bool ok = it->is_array();
    for (const auto& n : ok ? *it : nlohmann::json::array()) {
        if (!n.is_number_unsigned()) ok = false;
        if (ok) out.push_back(n.get<std::uint64_t>());
    }
    if (!ok)
        throw problem_error(status::bad_request,
                            "without must list the inbox ids of consumed signals not to give "
                            "back, as [N, ...]",
                            "without");
    return out;
}

std::string retry_action(std::uint64_t from, const std::vector<std::uint64_t>& without) {
    if (without.empty()) return fmt::format("retry from {}", from);
    return fmt::format("retry from {} without inbox entries {}", from, fmt::join(without, ", "));
}

asio::awaitable<response> retry(api_ptr a, request& req) {
    take_only(req, {});
    auto id = instance_id(req);
    auto body = req.json_document();
    if (!body) throw problem_error(std::move(body).error());
    const auto& doc = **body;
    if (!doc.is_object() || !doc.contains("from") || !doc["from"].is_number_unsigned())
        throw problem_error(status::bad_request,
                            "the body must give the journal position to retry from as "
                            "{\"from\": N}",
                            "from");
    auto from = doc["from"].get<std::uint64_t>();
    auto without = without_of(doc);
    auto r = co_await a->engine.retry(id, from, without);
    nlohmann::json done{{"id", id}, {"status", "running"}, {"from", from}, {"without", without}};
    co_return answer(req, retry_action(from, without), id, r, std::move(done));
}

// Takes one signal out of the inbox of an instance no worker runs: {"inbox": N}.
asio::awaitable<response> remove_signal(api_ptr a, request& req) {
    take_only(req, {});
    auto id = instance_id(req);
    auto body = req.json_document();
    if (!body) throw problem_error(std::move(body).error());
    const auto& doc = **body;
    if (!doc.is_object() || !doc.contains("inbox") || !doc["inbox"].is_number_unsigned())
        throw problem_error(status::bad_request,
                            "the body must give the inbox id of the signal to remove as "
                            "{\"inbox\": N}",
                            "inbox");
    auto inbox_id = doc["inbox"].get<std::uint64_t>();
    auto r = co_await a->engine.remove_signal(id, inbox_id);
    auto action = fmt::format("remove signal (inbox entry {})", inbox_id);
    if (!r) {
        audit(req, action, id, r.error().message);
        if (r.error().why == process::refusal::reason::unknown_signal)
            throw problem_error(status::not_found, r.error().message, "inbox");
        refuse(r.error(), "inbox");
    }
    audit(req, action + " " + r->path, id, "done");
    nlohmann::json done{{"id", id}, {"removed", detail::inbox_entry_json(*r)}};
    co_return response::json(std::move(done));
}

// A signal for one instance is checked as an emit would be: a declared signal's payload must
// decode as its type (else the instance would fail on it, and no action could take it back
// out of the inbox). A path no signal declares is taken only by an instance that waits for
// it, unchecked (true: checked). 400 otherwise, audited.
asio::awaitable<bool> check_signal(const api& a, const request& req, const std::string& id,
                                   const std::string& path, const nlohmann::json& payload) {
    std::vector<std::string> values;
    const signals::signal_base* declared = nullptr;
    for (const auto* g : a.groups)
        if ((declared = g->find(path, values))) break;
    std::string refusal;
    if (declared) {
        auto why = declared->check_payload(payload);
        if (!why) co_return true;
        refusal =
            fmt::format("the payload is not what signal {} carries: {}", declared->pattern(), *why);
    } else {
        auto snap = co_await a.store.load(id, false);
        if (!snap) throw problem_error(status::not_found, "no process instance " + id);
        for (const auto& w : snap->waits)
            if (w.path == path) co_return false;
        refusal = fmt::format(
            "no declared signal has the path {}, and {} does not wait for it: nothing would ever "
            "take it out of the inbox",
            path, id);
    }
    audit(req, "signal " + path, id, "refused: " + refusal);
    throw problem_error(status::bad_request, refusal, declared ? "payload" : "path");
}

// The JSON object body of an action that names a path ("path", from '/'), cached by the
// request; 400 naming the field otherwise. `what` ("signal", "request") is for the message.
const nlohmann::json& body_with_path(const request& req, std::string_view what) {
    auto body = req.json_document();
    if (!body) throw problem_error(std::move(body).error());
    const auto& doc = **body;
    if (!doc.is_object() || !doc.contains("path") || !doc["path"].is_string() ||
        !doc["path"].get<std::string>().starts_with("/"))
        throw problem_error(status::bad_request,
                            fmt::format("the body must give the {}'s path", what), "path");
    return doc;
}

asio::awaitable<response> signal(api_ptr a, request& req) {
    take_only(req, {});
    auto id = instance_id(req);
    const auto& doc = body_with_path(req, "signal");
    std::string key;
    if (doc.contains("key")) {
        if (!doc["key"].is_string())
            throw problem_error(status::bad_request, "key must be a string", "key");
        key = doc["key"].get<std::string>();
    }
    auto payload = doc.value("payload", nlohmann::json());
    auto path = doc["path"].get<std::string>();
    // Keel's own signals (a child's end, a queue's admission, a schedule's control) carry
    // state the engine wrote; a forged one would bypass a queue's limits or end a wait early.
    if (path.starts_with("/keel/"))
        throw problem_error(status::bad_request,
                            "paths under /keel/ are Keel's own signals and cannot be sent: " + path,
                            "path");
    auto checked = co_await check_signal(*a, req, id, path, payload);
    process::delivery d;
    try {
        d = co_await a->engine.deliver(id, path, std::move(payload), std::move(key));
    } catch (const signals::emit_error& e) {
        audit(req, "signal " + path, id, e.what());
        throw problem_error(status::bad_request, e.what(), "key");
    }
    using outcome = process::delivery::outcome;
    audit(req, "signal " + path, id,
          d.result == outcome::stored      ? "stored"
          : d.result == outcome::duplicate ? "duplicate"
          : d.result == outcome::finished  ? "refused: the instance is final"
                                           : "refused: no such instance");
    if (d.result == outcome::no_instance)
        throw problem_error(status::not_found, "no process instance " + id);
    if (d.result == outcome::finished)
        throw problem_error(status::conflict, "process instance " + id + " is final");
    auto out = nlohmann::json{{"outcome", d.result == outcome::stored ? "stored" : "duplicate"},
                              {"waiting", d.waiting},
                              {"checked", checked}};
    if (!checked)
        out["note"] =
            "no declared signal has this path: the payload was not checked against a type";
    co_return response::json(std::move(out));
}

// A request to the instance, answered by its handler (engine::ask): {"path", "body",
// "timeout_ms" (default 10000, at most 300000), "id" (optional: a retry's)}. 200 with the
// answer; 404, 409, 504 or 422 (refused) as ask_error says.
asio::awaitable<response> ask(api_ptr a, request& req) {
    take_only(req, {});
    auto id = instance_id(req);
    const auto& doc = body_with_path(req, "request");
    process::ask_options options;
    if (doc.contains("timeout_ms")) {
        const auto& t = doc["timeout_ms"];
        if (!t.is_number_unsigned() || t.get<std::uint64_t>() == 0 ||
            t.get<std::uint64_t>() > 300'000)
            throw problem_error(status::bad_request,
                                "timeout_ms must be a whole number of milliseconds, 1 to 300000",
                                "timeout_ms");
        options.timeout = std::chrono::milliseconds(t.get<std::uint64_t>());
    }
    if (doc.contains("id")) {
        if (!doc["id"].is_string() || doc["id"].get<std::string>().empty())
            throw problem_error(status::bad_request, "id must be a non-empty string", "id");
        options.id = doc["id"].get<std::string>();
    }
    auto path = doc["path"].get<std::string>();
    auto answer =
        co_await a->engine.ask(id, path, doc.value("body", nlohmann::json()), std::move(options));
    if (!answer) {
        audit(req, "ask " + path, id, answer.error().message);
        throw problem_error(static_cast<status>(process::http_status(answer.error())),
                            answer.error().message);
    }
    audit(req, "ask " + path, id, "answered");
    co_return response::json({{"answer", std::move(*answer)}});
}

// Every schedule (its process's instance) with what it published of itself: one page of up to
// 1000; a deleted one shows as cancelled until its retention ends.
asio::awaitable<response> schedules(api_ptr a, request& req) {
    take_only(req, {});
    process::list_query q;
    q.definition = std::string(process::schedule_definition);
    q.limit = 1000;
    auto out = nlohmann::json::array();
    for (;;) {
        auto page = co_await a->store.list(q);
        for (const auto& s : page.instances) {
            auto snap = co_await a->store.load(s.id, false);
            if (snap) out.push_back(detail::schedule_json(*snap));
        }
        if (page.next.empty()) break;
        q.cursor = page.next;
    }
    std::sort(out.begin(), out.end(), [](const nlohmann::json& x, const nlohmann::json& y) {
        return x.value("name", "") < y.value("name", "");
    });
    co_return response::json({{"schedules", std::move(out)}});
}

// The queues this worker registered, each with its depth and admitted instances.
asio::awaitable<response> queues(api_ptr a, request& req) {
    take_only(req, {});
    auto out = nlohmann::json::array();
    for (const auto& q : a->engine.queues()) {
        auto state = co_await a->engine.describe_queue(q.name, 0);
        if (state) out.push_back(detail::queue_json(q, *state));
    }
    co_return response::json({{"queues", std::move(out)}});
}

// One queue, with its partitions (the first `top` by name, 100 by default, at most 1000).
asio::awaitable<response> queue_view(api_ptr a, request& req) {
    take_only(req, {"top"});
    auto name = std::string(req.param("name"));
    auto top = count_param(req, "top", 100, 0, 1000);
    auto all = a->engine.queues();
    auto q = std::ranges::find(all, name, &process::queue::name);
    if (q == all.end()) throw problem_error(status::not_found, "no queue " + name);
    auto state = co_await a->engine.describe_queue(name, top);
    if (!state) throw problem_error(status::not_found, "no queue " + name);
    auto out = detail::queue_json(*q, *state);
    out["partitions"] = detail::partitions_json(*state);
    out["more_partitions"] = state->more_partitions;
    co_return response::json(out);
}

// Ends the schedule (its process is cancelled); the instances its ticks started run on.
asio::awaitable<response> delete_schedule(api_ptr a, request& req, std::string name);

// The instant in field `field` of a JSON body: 400 naming the field when it is missing or
// not RFC 3339.
keel::time_point instant_in(const nlohmann::json& body, std::string_view field) {
    auto it = body.find(field);
    std::optional<keel::time_point> at;
    if (it != body.end() && it->is_string()) at = parse_rfc3339(it->get<std::string>());
    if (!at)
        throw problem_error(
            status::bad_request,
            std::string(field) + " must be an RFC 3339 time (\"2026-11-01T00:00:00Z\")",
            std::string(field));
    return *at;
}

// POST /admin/schedules/<name>/backfill {"from", "to"}: the ticks in [from, to] that did not run.
asio::awaitable<process::delivery> backfill(api_ptr a, request& req, const std::string& name) {
    auto body = req.json_document();
    if (!body) throw problem_error(std::move(body).error());
    const auto& doc = **body;
    if (!doc.is_object())
        throw problem_error(status::bad_request, "the body must be an object with from and to");
    auto from = instant_in(doc, "from");
    auto to = instant_in(doc, "to");
    try {
        co_return co_await a->engine.backfill_schedule(name, from, to);
    } catch (const std::invalid_argument& e) {
        throw problem_error(status::bad_request, e.what());
    }
}

// Whether a pause or resume would change nothing: the schedule's published state says it is
// paused (or running) already. Read before the action is sent, so two that cross may both
// be sent; the schedule's instance takes the second as a no-op.
asio::awaitable<bool> already(api_ptr a, const std::string& id, const std::string& action) {
    if (action != "pause" && action != "resume") co_return false;
    auto state = co_await a->engine.published(id, "schedule");
    if (!state || state->value("deleted", false)) co_return false;
    co_return state->value("paused", false) == (action == "pause");
}

// POST /admin/schedules/<name>/<pause|resume|trigger|backfill|delete>.
asio::awaitable<response> schedule_action(api_ptr a, request& req) {
    take_only(req, {});
    auto name = std::string(req.param("name"));
    auto action = std::string(req.param("action"));
    auto id = process::schedule_instance_id(name);
    if (co_await already(a, id, action)) {
        audit(req, action + " schedule " + name, id, "nothing to do: it is so already");
        co_return response::json({{"schedule", name},
                                  {"action", action},
                                  {"changed", false},
                                  {"note", action == "pause" ? "the schedule is paused already"
                                                             : "the schedule is not paused"}});
    }
    process::delivery d;
    if (action == "backfill")
        d = co_await backfill(a, req, name);
    else if (action == "pause")
        d = co_await a->engine.pause_schedule(name);
    else if (action == "resume")
        d = co_await a->engine.resume_schedule(name);
    else if (action == "trigger")
        d = co_await a->engine.trigger_schedule(name);
    else if (action == "delete")
        co_return co_await delete_schedule(a, req, name);
    else
        throw problem_error(status::not_found, "no schedule action " + action +
                                                   " (pause, resume, trigger, backfill or delete)");
    using outcome = process::delivery::outcome;
    audit(req, action + " schedule " + name, id,
          d.result == outcome::no_instance ? "refused: no such schedule"
          : d.result == outcome::finished  ? "refused: the schedule was deleted"
                                           : "done");
    if (d.result == outcome::no_instance)
        throw problem_error(status::not_found, "no schedule " + name);
    if (d.result == outcome::finished)
        throw problem_error(status::conflict, "schedule " + name + " was deleted");
    co_return response::json({{"schedule", name}, {"action", action}, {"changed", true}});
}

asio::awaitable<response> delete_schedule(api_ptr a, request& req, std::string name) {
    auto r = co_await a->engine.delete_schedule(name);
    co_return answer(req, "delete schedule " + name, process::schedule_instance_id(name), r,
                     {{"schedule", name}, {"deleted", true}});
}

// The store's identity as this worker sees it (docs/architecture.md, "A store that comes back
// empty"): trusted, or in question and why.
asio::awaitable<response> store_state(api_ptr a, request& req) {
    take_only(req, {});
    auto doubt = a->engine.store_in_question();
    nlohmann::json out{{"trusted", !doubt}};
    if (doubt) out["reason"] = *doubt;
    co_return response::json(std::move(out));
}

// An operator accepts the store as it is: every worker starts and claims again.
asio::awaitable<response> confirm_store(api_ptr a, request& req) {
    take_only(req, {});
    auto doubt = a->engine.store_in_question();
    auto id = co_await a->engine.confirm_store();
    audit(req, "confirm store", id, doubt ? "confirmed (it was in question)" : "confirmed");
    co_return response::json({{"store", id}, {"confirmed", true}});
}

using route_fn = asio::awaitable<response> (*)(api_ptr, request&);

// The token check of every /admin route: the Authorization header is compared with every
// token (all of them, whichever matches, so the time taken tells nothing); 401 when none
// matches, 403 when a read-only token asks for anything but a read. The token's name goes to
// the handlers in token_name_header.
struct token_check {
    std::string name;
    role access = role::full;
    http::bearer_check check;
};

bool reads_only(http::method m) {
    return m == http::method::get || m == http::method::head || m == http::method::options;
}

http::middleware authorize(std::vector<token> tokens) {
    auto checks = std::make_shared<std::vector<token_check>>();
    for (auto& t : tokens) checks->push_back({t.name, t.role, http::bearer_check(t.secret)});
    return [checks](request& req, http::next next) -> asio::awaitable<response> {
        const token_check* matched = nullptr;
        auto given = req.header("Authorization").value_or("");
        for (const auto& c : *checks)
            if (c.check(given) && !matched) matched = &c;
        if (!matched) {
            auto res =
                response::problem(http::problem{status::unauthorized,
                                                "missing or wrong bearer token in Authorization"},
                                  req.request_id());
            res.header("WWW-Authenticate", "Bearer");
            co_return res;
        }
        req.headers().set(token_name_header, matched->name);
        if (matched->access == role::read && !reads_only(req.method())) {
            auto message =
                fmt::format("the token '{}' is read-only: it may read (GET) but not act ({} {})",
                            matched->name, req.method_name(), req.path());
            audit(req, req.method_name(), req.path(), "refused: the token is read-only");
            co_return response::problem(http::problem{status::forbidden, message},
                                        req.request_id());
        }
        co_return co_await next(req);
    };
}

http::handler bind(api_ptr a, route_fn f) {
    return [a = std::move(a), f](request& req) { return f(a, req); };
}

}  // namespace

std::vector<token> parse_tokens(std::string_view setting) {
    std::vector<token> out;
    for (std::size_t at = 0; at <= setting.size();) {
        auto comma = std::min(setting.find(',', at), setting.size());
        auto spec = setting.substr(at, comma - at);
        at = comma + 1;
        if (spec.empty()) {
            if (setting.empty()) break;
            throw std::invalid_argument("admin_token: an empty token in the list");
        }
        auto colon = spec.find(':');
        token t{"admin", std::string(spec), role::full};
        if (colon != std::string_view::npos) {
            t.name = std::string(spec.substr(0, colon));
            auto rest = spec.substr(colon + 1);
            auto last = rest.rfind(':');
            if (last != std::string_view::npos) {
                auto r = rest.substr(last + 1);
                if (r != "read" && r != "full")
                    throw std::invalid_argument(fmt::format(
                        "admin_token: the token named '{}' has the role '{}'; a role is read or "
                        "full (name:secret[:read|:full])",
                        t.name, r));
                t.role = r == "read" ? role::read : role::full;
                rest = rest.substr(0, last);
            }
            t.secret = std::string(rest);
            if (t.name.empty() || t.secret.empty())
                throw std::invalid_argument(
                    "admin_token: a token is name:secret[:read|:full] or a bare secret; one has "
                    "an empty name or secret");
        }
        for (const auto& other : out)
            if (other.name == t.name)
                throw std::invalid_argument(
                    fmt::format("admin_token: the name '{}' is given to two tokens", t.name));
        out.push_back(std::move(t));
    }
    return out;
}

namespace {

std::vector<token> tokens_of(options& opts) {
    auto all = parse_tokens(opts.token);
    for (auto& t : opts.tokens) {
        if (t.name.empty() || t.secret.empty())
            throw std::invalid_argument("admin: every token needs a name and a secret");
        for (const auto& other : all)
            if (other.name == t.name)
                throw std::invalid_argument(
                    fmt::format("admin: the name '{}' is given to two tokens", t.name));
        all.push_back(std::move(t));
    }
    if (all.empty()) throw std::invalid_argument("admin: the admin API needs a token");
    return all;
}

}  // namespace

void mount(http::router& router, process::engine& engine, process::store& store, options opts) {
    auto admin = router.group("/admin");
    admin.use(detail::except_console(authorize(tokens_of(opts))));
    auto a = std::make_shared<const api>(api{engine, store, opts.groups});
    admin.get("/instances", bind(a, list))
        .get("/stats", bind(a, stats))
        .get("/workers", bind(a, workers))
        .get("/store", bind(a, store_state))
        .post("/store/confirm", bind(a, confirm_store))
        .get("/instances/*id", bind(a, show))
        .get("/journal/*id", bind(a, journal))
        .post("/cancel/*id", bind(a, cancel))
        .post("/resume/*id", bind(a, resume))
        .post("/resume-parked", bind(a, resume_parked))
        .post("/retry/*id", bind(a, retry))
        .post("/remove-signal/*id", bind(a, remove_signal))
        .post("/signal/*id", bind(a, signal))
        .post("/ask/*id", bind(a, ask))
        .get("/queues", bind(a, queues))
        .get("/queues/:name", bind(a, queue_view))
        .get("/schedules", bind(a, schedules))
        .post("/schedules/:name/:action", bind(a, schedule_action));
    detail::mount_console(admin);
    http::add_signal_route(router, std::move(opts.groups), {.prefix = "/admin/signals"});
}

void add_options(config::schema& schema) {
    config::option token{"admin_token", config::kind::string, std::string(),
                         "turns the admin API on (/admin/...): every request must carry "
                         "Authorization: Bearer <token>; name:secret[:read] names a token "
                         "(read: GET only); several, comma-separated or the flag repeated"};
    token.repeatable = true;
    schema.add(std::move(token));
    schema.add("admin_host", config::kind::string, std::string(),
               "address of the admin API's own listener (empty: the service's --host)");
    schema.add({"admin_port", config::kind::integer, std::int64_t{0},
                "port of the admin API's own listener (0: the service's port)", 0, 65535});
    schema.add("admin_tls_cert", config::kind::string, std::string(),
               "TLS certificate (PEM) of the admin API's own port; empty: plain HTTP there");
    schema.add("admin_tls_key", config::kind::string, std::string(),
               "private key (PEM, unencrypted) of --admin-tls-cert");
    schema.add("admin_tls_client_ca", config::kind::string, std::string(),
               "CA certificates (PEM) that issue the operators' client certificates: set, the "
               "admin port requires one (mutual TLS)");
}

settings settings_from(const config::values& values) {
    settings s{values.get_string("admin_token"), values.get_string("admin_host"),
               static_cast<std::uint16_t>(values.get_int("admin_port"))};
    s.tls.certificate_file = values.get_string("admin_tls_cert");
    s.tls.private_key_file = values.get_string("admin_tls_key");
    s.tls.client_ca_file = values.get_string("admin_tls_client_ca");
    return s;
}

}  // namespace keel::admin
