#include "fake_admin.hpp"

#include <algorithm>
#include <functional>

namespace keel::cli::testing {

namespace {

using http::request;
using http::response;
using http::status;
using json = nlohmann::json;

// A handler from a plain function: the stand-in never needs to wait for anything.
http::handler answer(std::function<response(request&)> f) {
    return [f = std::move(f)](request& req) -> asio::awaitable<response> { co_return f(req); };
}

json list_item(int n) {
    return {{"id", "fulfil/o-" + std::to_string(n)},
            {"definition", "order_fulfillment"},
            {"status", n % 2 ? "suspended" : "completed"},
            {"created", "2026-11-23T10:0" + std::to_string(n) + ":00.000Z"},
            {"changed", "2026-11-23T10:0" + std::to_string(n) + ":30.000Z"}};
}

json detail(const std::string& id) {
    return {{"id", id},
            {"definition", "order_fulfillment"},
            {"params", {"o-17"}},
            {"status", "suspended"},
            {"reason", nullptr},
            {"result", nullptr},
            {"error", nullptr},
            {"created", "2026-11-23T10:00:00.000Z"},
            {"changed", "2026-11-23T10:01:00.000Z"},
            {"lease", nullptr},
            {"waits", {{{"seq", 2}, {"path", "/payment/o-17/received"}}}},
            {"timers", json::array()},
            {"inbox", json::array()},
            {"journal_length", 5},
            {"retries", json::array()},
            {"parent", "billing/s-1"},
            {"published", {{"progress", {{"invoice", 3}, {"of", 12}}}}},
            {"children",
             {{{"id", "invoice/s-1/3"},
               {"definition", "/invoice/:sub/:n"},
               {"status", "completed"},
               {"created", "2026-11-23T10:00:00.000Z"},
               {"changed", "2026-11-23T10:00:30.000Z"},
               {"on_parent_close", "cancel"}}}},
            {"children_total", 1}};
}

json journal_entry(int position) {
    return {{"position", position},
            {"seq", position + 1},
            {"kind", "run"},
            {"name", "step " + std::to_string(position)},
            {"value", {{"n", position}}},
            {"failed", false},
            {"at", "2026-11-23T10:00:00.000Z"}};
}

int int_query(const request& req, std::string_view name, int fallback) {
    auto value = req.query(name);
    return value ? std::stoi(std::string(*value)) : fallback;
}

std::string body_string(const request& req, const char* key) {
    auto doc = json::parse(req.body(), nullptr, false);
    return doc.is_object() && doc.contains(key) && doc[key].is_string()
               ? doc[key].get<std::string>()
               : std::string();
}

response show(request& req) {
    std::string id(req.param("id"));
    if (id == "missing") return response::problem(status::not_found, "no instance " + id);
    return response::json(detail(id));
}

response cancel(request& req) {
    std::string id(req.param("id"));
    if (id.starts_with("done/"))
        return response::problem(status::conflict, "instance " + id + " is completed");
    return response::json({{"id", id}, {"status", "cancelled"}});
}

response resume(request& req) {
    return response::json({{"id", std::string(req.param("id"))}, {"status", "running"}});
}

response resume_parked(request& req) {
    auto definition = body_string(req, "definition");
    if (definition == "mixed")
        return response::json({{"resumed", {"m/1"}},
                               {"refused", {{{"id", "m/2"}, {"reason", "owned by worker w-2"}}}}});
    return response::json(
        {{"resumed", {definition + "/1", definition + "/2"}}, {"refused", json::array()}});
}

response retry(request& req) {
    auto from = json::parse(req.body()).value("from", -1);
    if (from > 5)
        return response::problem(status::bad_request,
                                 "from " + std::to_string(from) + " is past the journal");
    return response::json(
        {{"id", std::string(req.param("id"))}, {"status", "running"}, {"from", from}});
}

// Inbox entry 5 is there; any other is not.
response remove_signal(request& req) {
    auto inbox = json::parse(req.body()).value("inbox", -1);
    if (inbox != 5)
        return response::problem(status::not_found,
                                 "process instance " + std::string(req.param("id")) +
                                     " has no inbox entry " + std::to_string(inbox));
    return response::json({{"id", std::string(req.param("id"))},
                           {"removed", {{"id", 5}, {"path", "/payment/o-17/received"}}}});
}

response signal_one(request& req) {
    auto duplicate = body_string(req, "key") == "seen";
    return response::json({{"outcome", duplicate ? "duplicate" : "stored"}, {"waiting", true}});
}

response signal_all(request& req) {
    if (req.param("path") == "unknown/x")
        return response::problem(status::not_found, "no signal matches /unknown/x");
    auto key = req.header("Idempotency-Key");
    return response::json({{"delivered", 2}, {"duplicate", key && *key == "seen"}});
}

response stats(request&) {
    json counts{{"running", 1}, {"suspended", 2}, {"queued", 1},   {"parked", 0},
                {"failed", 0},  {"completed", 3}, {"cancelled", 0}};
    return response::json({{"definitions", {{"order_fulfillment", counts}}}, {"total", counts}});
}

response schedules(request&) {
    return response::json({{"schedules", json::array({{{"name", "dunning-eu"},
                                                       {"cron", "0 2 * * *"},
                                                       {"zone", "Europe/Berlin"},
                                                       {"paused", false},
                                                       {"deleted", false},
                                                       {"next", "2026-11-24T01:00:00.000Z"},
                                                       {"last_tick", "2026-11-23T01:00:00.000Z"},
                                                       {"started", 12},
                                                       {"skipped", 1},
                                                       {"missed", 2}}})}});
}

json queue_row() {
    return {{"name", "invoicing"},
            {"concurrency", 5},
            {"partition_concurrency", nullptr},
            {"worker_concurrency", 2},
            {"rate", 20},
            {"per_ms", 1000},
            {"waiting", 7},
            {"admitted", 5}};
}

response queues(request&) {
    return response::json({{"queues", json::array({queue_row()})}});
}

response queue_one(request& req) {
    std::string name(req.param("name"));
    if (name != "invoicing") return response::problem(status::not_found, "no queue " + name);
    auto out = queue_row();
    out["partitions"] = json::array({{{"partition", "acme"}, {"waiting", 7}, {"admitted", 2}},
                                     {{"partition", ""}, {"waiting", 0}, {"admitted", 3}}});
    out["more_partitions"] = false;
    return response::json(out);
}

response schedule_action(request& req) {
    std::string name(req.param("name"));
    if (name == "nope") return response::problem(status::not_found, "no schedule nope");
    return response::json({{"schedule", name}, {"action", std::string(req.param("action"))}});
}

response workers(request&) {
    return response::json(
        {{"workers",
          json::array({{{"worker", "orders-7f9c"},
                        {"versions", {{"order_fulfillment", "2026-11.2"}, {"email", ""}}},
                        {"seen", "2026-11-23T10:00:00.000Z"},
                        {"expires", "2026-11-23T10:00:15.000Z"}}})}});
}

}  // namespace

std::string recorded_request::query_value(std::string_view name) const {
    for (const auto& [n, v] : query)
        if (n == name) return v;
    return {};
}

fake_admin::fake_admin() {
    add_routes();
    server_ = std::make_unique<http::testing::test_server>(router_);
}

fake_admin::~fake_admin() {
    server_.reset();
}

std::string fake_admin::url() const {
    return "http://127.0.0.1:" + std::to_string(server_->port());
}

std::vector<recorded_request> fake_admin::requests() const {
    std::lock_guard lock(mutex_);
    return requests_;
}

std::vector<std::string> fake_admin::issued_cursors() const {
    std::lock_guard lock(mutex_);
    return cursors_;
}

recorded_request fake_admin::record(const request& req, std::string_view param_name) {
    recorded_request r{std::string(http::to_string(req.method())),
                       std::string(req.target()),
                       param_name.empty() ? std::string() : std::string(req.param(param_name)),
                       req.query_params(),
                       std::string(req.header("Authorization").value_or("")),
                       std::string(req.header("Idempotency-Key").value_or("")),
                       std::string(req.header("Content-Type").value_or("")),
                       std::string(req.body())};
    std::lock_guard lock(mutex_);
    requests_.push_back(r);
    return r;
}

void fake_admin::add_routes() {
    router_.use([this](request& req, http::next next) -> asio::awaitable<response> {
        bool allowed = req.header("Authorization") == "Bearer " + std::string(token);
        if (!allowed) {
            record(req, "");
            co_return response::problem(status::unauthorized, "a valid admin token is required")
                .header("WWW-Authenticate", "Bearer");
        }
        co_return co_await next(req);
    });
    auto on = [this](http::method m, std::string_view pattern, std::string_view param,
                     std::function<response(request&)> f) {
        router_.add(m, pattern, answer([this, param, f = std::move(f)](request& req) {
                        record(req, param);
                        return f(req);
                    }));
    };
    using http::method;
    on(method::get, "/admin/instances", "", [this](request& req) { return list(req); });
    on(method::get, "/admin/instances/*id", "id", show);
    on(method::get, "/admin/journal/*id", "id", [this](request& req) { return journal(req); });
    on(method::get, "/admin/stats", "", stats);
    on(method::get, "/admin/workers", "", workers);
    on(method::get, "/admin/schedules", "", schedules);
    on(method::get, "/admin/queues", "", queues);
    on(method::get, "/admin/queues/:name", "name", queue_one);
    on(method::post, "/admin/schedules/:name/:action", "name", schedule_action);
    on(method::post, "/admin/cancel/*id", "id", cancel);
    on(method::post, "/admin/resume/*id", "id", resume);
    on(method::post, "/admin/resume-parked", "", resume_parked);
    on(method::post, "/admin/retry/*id", "id", retry);
    on(method::post, "/admin/remove-signal/*id", "id", remove_signal);
    on(method::post, "/admin/signal/*id", "id", signal_one);
    on(method::post, "/admin/signals/*path", "path", signal_all);
}

response fake_admin::list(const request& req) {
    auto limit = int_query(req, "limit", 50);
    std::size_t start = 0;
    std::lock_guard lock(mutex_);
    if (auto cursor = req.query("cursor")) {
        auto it = std::find(cursors_.begin(), cursors_.end(), *cursor);
        if (it == cursors_.end())
            return response::problem(status::bad_request, "bad cursor", "cursor");
        start = std::stoul(it->substr(it->find('#') + 1));
    }
    auto end = std::min<std::size_t>(start + limit, instance_count);
    json page{{"instances", json::array()}, {"next", nullptr}};
    for (auto i = start; i < end; ++i) page["instances"].push_back(list_item(instance_count - i));
    if (end < instance_count) {
        cursors_.push_back("a+b/c d&e=f?ü#" + std::to_string(end));
        page["next"] = cursors_.back();
    }
    return response::json(page);
}

response fake_admin::journal(const request& req) {
    auto offset = int_query(req, "offset", 0);
    auto size = std::min(int_query(req, "limit", 100), journal_page_limit);
    auto end = std::min(offset + size, journal_length);
    json page{{"entries", json::array()}, {"total", journal_length}, {"next", nullptr}};
    for (auto p = offset; p < end; ++p) page["entries"].push_back(journal_entry(p));
    if (end < journal_length) page["next"] = end;
    return response::json(page);
}

}  // namespace keel::cli::testing
