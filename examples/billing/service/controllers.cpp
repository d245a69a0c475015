#include "controllers.hpp"

#include <keel/framework/log.hpp>
#include <keel/framework/rfc3339.hpp>
#include <keel/http/json.hpp>
#include <keel/http/problem.hpp>
#include <keel/http/request.hpp>
#include <keel/http/response.hpp>

#include "processes.hpp"

namespace billing {

namespace http = keel::http;
using http::request;
using http::response;

namespace {

// ---- request bodies ----

struct new_customer {
    std::string id;
    std::string email;
};
void from_json(const nlohmann::json& j, new_customer& n) {
    http::read_field(j, "id", n.id);
    http::read_field(j, "email", n.email);
}

struct new_subscription {
    std::string id;
    std::string customer;
    std::string plan;
    std::string card;
};
void from_json(const nlohmann::json& j, new_subscription& n) {
    http::read_field(j, "id", n.id);
    http::read_field(j, "customer", n.customer);
    http::read_field(j, "plan", n.plan);
    http::read_field(j, "card", n.card);
}

struct plan_change {
    std::string plan;
};
void from_json(const nlohmann::json& j, plan_change& p) {
    http::read_field(j, "plan", p.plan);
}

// ---- checks and answers ----

void check_text(const std::string& value, std::string_view field) {
    if (value.empty() || value.size() > 256)
        throw http::problem_error(http::status::bad_request, "must be 1 to 256 bytes",
                                  std::string(field));
}

void check_plan(const std::string& plan, std::string_view field) {
    if (!plan_price(plan))
        throw http::problem_error(http::status::bad_request,
                                  "there is no plan '" + plan + "' (basic or pro)",
                                  std::string(field));
}

[[noreturn]] void not_found(std::string_view what, std::string_view id) {
    throw http::problem_error(http::status::not_found,
                              std::string(what) + " " + std::string(id) + " does not exist");
}

template <class T>
asio::awaitable<std::optional<T>> find(keel::repository<T>& repo, std::string id) {
    keel::ref<T> ref(std::move(id));
    auto found = co_await repo.get(ref);
    if (!found) throw http::problem_of(found.error());
    co_return std::move(*found);
}

// The ask's options: the client's Idempotency-Key, when it gives one, is the request's id,
// so that a retried request gets the first answer.
keel::process::ask_options ask_options_from(const request& req, std::string_view what,
                                            const std::string& subscription) {
    keel::process::ask_options options;
    options.timeout = std::chrono::seconds(10);
    if (auto key = req.header("Idempotency-Key"); key && !key->empty())
        options.id = std::string(what) + "/" + subscription + "/" + std::string(*key);
    return options;
}

// An ask's error as a problem: the process's statuses (404, 409, 504, 422), except that a
// refusal is 409 here. The only refusal is a plan change to the plan in place (an unknown
// plan is a 400 before the ask): `refused` says so in the client's terms, since the engine's
// message names the process and the request's internal id.
[[noreturn]] void ask_failed(const keel::process::ask_error& e, std::string refused = {}) {
    using reason = keel::process::ask_error::reason;
    auto status = static_cast<http::status>(keel::process::http_status(e));
    if (e.why == reason::refused) status = http::status::conflict;
    std::string detail = e.message;
    if (e.why == reason::refused && !refused.empty()) detail = std::move(refused);
    if (e.why == reason::not_found) detail = "subscription does not exist";
    if (e.why == reason::final) detail = "the subscription is cancelled";
    throw http::problem_error(status, detail);
}

nlohmann::json invoice_json(const invoice& i) {
    return {{"id", i.id},          {"subscription", i.subscription},
            {"period", i.period},  {"amount", i.amount},
            {"status", i.status},  {"attempts", i.attempts},
            {"charges", i.charges}};
}

}  // namespace

// ---- customers ----

void customer_controller::routes(http::controller_routes<customer_controller>& r) {
    r.prefix("/customers");
    r.post("/", &customer_controller::create);
}

asio::awaitable<response> customer_controller::create(request& req) {
    auto body = req.json<new_customer>();
    http::require_plain_id(body.id, "/id");
    check_text(body.email, "/email");
    keel::ref<customer> ref(body.id);
    customer fresh{.id = body.id, .email = body.email};
    auto created = co_await customers_.repository().create(ref, fresh);
    if (!created) throw http::problem_of(created.error());
    if (!*created) {
        auto there = co_await find(customers_.repository(), body.id);
        if (there && !(*there == fresh))
            throw http::problem_error(http::status::conflict,
                                      "customer " + body.id + " exists with another e-mail",
                                      "/email");
    }
    co_return response::json({{"customer", body.id}},
                             *created ? http::status::created : http::status::ok);
}

// ---- subscriptions ----

void subscription_controller::routes(http::controller_routes<subscription_controller>& r) {
    r.prefix("/subscriptions");
    r.post("/", &subscription_controller::create);
    r.get("/:id", &subscription_controller::show);
    r.post("/:id/cancel", &subscription_controller::cancel);
    r.post("/:id/plan", &subscription_controller::change_plan);
}

// The subscription unless it exists, and its process unless it exists, in one step (a
// retried request finds both: 200); the same id asking for something else is 409.
asio::awaitable<response> subscription_controller::create(request& req) {
    auto body = req.json<new_subscription>();
    http::require_plain_id(body.id, "/id");
    http::require_plain_id(body.customer, "/customer");
    check_plan(body.plan, "/plan");
    check_text(body.card, "/card");
    auto owner = co_await find(customers_.repository(), body.customer);
    if (!owner) not_found("customer", body.customer);

    subscription fresh{.id = body.id,
                       .customer = body.customer,
                       .plan = body.plan,
                       .card = body.card,
                       .created = keel::format_rfc3339(engine_.clock().now())};
    keel::ref<subscription> ref(body.id);
    bool created = false;
    auto create_or_match = [&](std::optional<subscription>& s) {
        created = !s;
        if (created) {
            s = fresh;
            return true;
        }
        if (!same_request(*s, fresh))
            throw http::problem_error(
                http::status::conflict,
                "subscription " + fresh.id + " exists with another customer, plan or card", "/id");
        return false;
    };
    keel::process::start_options in_request{.trace = req.trace()};
    auto started = co_await engine_.update_and_start(in_request, subscriptions_.repository(), ref,
                                                     create_or_match, subscribing, ref);
    if (!started) throw http::problem_of(started.error());
    co_return response::json({{"subscription", body.id}, {"process", started->id()}},
                             created ? http::status::created : http::status::ok)
        .header("Location", "/subscriptions/" + body.id);
}

asio::awaitable<response> subscription_controller::show(request& req) {
    auto id = req.param<std::string>("id");
    http::require_plain_id(id, "id");
    auto sub = co_await find(subscriptions_.repository(), id);
    if (!sub) not_found("subscription", id);
    auto process = subscribing.instance_id(keel::ref<subscription>(id));
    auto published = co_await engine_.published(process, "subscription");

    // Before its process first published: the state it starts in.
    nlohmann::json state = {{"plan", sub->plan},
                            {"status", terms_.trial.count() > 0 ? "trialing" : "active"},
                            {"period", 0}};
    if (published && published->is_object()) state = *published;
    auto period = state.value("period", std::int64_t{0});
    nlohmann::json invoices = nlohmann::json::array();
    for (std::int64_t n = 1; n <= period; ++n) {
        auto i = co_await find(invoices_.repository(), invoice_id(id, n));
        if (!i) continue;
        invoices.push_back({{"id", i->id},
                            {"period", i->period},
                            {"amount", i->amount},
                            {"status", i->status},
                            {"attempts", i->attempts}});
    }
    co_return response::json({{"id", id},
                              {"customer", sub->customer},
                              {"plan", state["plan"]},
                              {"status", state["status"]},
                              {"period", period},
                              {"invoices", std::move(invoices)}});
}

asio::awaitable<response> subscription_controller::cancel(request& req) {
    auto id = req.param<std::string>("id");
    http::require_plain_id(id, "id");
    auto process = subscribing.instance_id(keel::ref<subscription>(id));
    auto options = ask_options_from(req, "cancel", id);
    nlohmann::json body = nlohmann::json::object();
    std::string path(cancel_path);
    auto answer = co_await engine_.ask(process, path, body, options);
    if (!answer) ask_failed(answer.error());
    co_return response::json(*answer);
}

asio::awaitable<response> subscription_controller::change_plan(request& req) {
    auto id = req.param<std::string>("id");
    http::require_plain_id(id, "id");
    auto wanted = req.json<plan_change>();
    check_plan(wanted.plan, "/plan");
    auto process = subscribing.instance_id(keel::ref<subscription>(id));
    auto options = ask_options_from(req, "plan", id);
    nlohmann::json body = {{"plan", wanted.plan}};
    std::string path(plan_path);
    auto answer = co_await engine_.ask(process, path, body, options);
    if (!answer)
        ask_failed(answer.error(), "subscription " + id + " is already on plan " + wanted.plan +
                                       " (now or from the next period)");
    co_return response::json(*answer);
}

// ---- invoices and reports ----

void invoice_controller::routes(http::controller_routes<invoice_controller>& r) {
    r.prefix("/invoices");
    r.get("/:id", &invoice_controller::show);
}

asio::awaitable<response> invoice_controller::show(request& req) {
    auto id = req.param<std::string>("id");
    http::require_plain_id(id, "id");
    auto found = co_await find(invoices_.repository(), id);
    if (!found) not_found("invoice", id);
    co_return response::json(invoice_json(*found));
}

void report_controller::routes(http::controller_routes<report_controller>& r) {
    r.prefix("/reports");
    r.get("/:date", &report_controller::show);
}

asio::awaitable<response> report_controller::show(request& req) {
    auto date = req.param<std::string>("date");
    if (!is_date(date))
        throw http::problem_error(http::status::bad_request, "must be a day, YYYY-MM-DD", "date");
    auto found = co_await find(reports_.reports(), date);
    if (!found) not_found("the report of", date);
    co_return response::json(nlohmann::json(*found));
}

// ---- the provider's webhooks ----

void webhook_controller::routes(http::controller_routes<webhook_controller>& r) {
    r.prefix("/webhooks");
    r.post("/provider", &webhook_controller::provider);
}

// Delivered, not emitted: a delivery waits in the invoice's inbox when it comes before the
// invoice waits for it (a pending charge's webhook may overtake the step that made it).
// Its key is the charge id, so the provider's retries are duplicates.
asio::awaitable<response> webhook_controller::provider(request& req) {
    auto event = req.json<provider_event>();
    check_text(event.type, "/type");
    http::require_plain_id(event.charge, "/charge");
    http::require_plain_id(event.reference, "/reference");
    auto found = co_await find(invoices_.repository(), event.reference);
    if (!found) {
        req.log().warn("provider event {} for charge {} names no invoice ({}): dropped", event.type,
                       event.charge, event.reference);
        co_return response::json({{"received", true}, {"delivered", false}});
    }
    auto process =
        invoicing.instance_id(keel::ref<subscription>(found->subscription), found->period);
    nlohmann::json payload = event;
    std::string path(charge_event_path);
    auto sent = co_await engine_.deliver(process, path, payload, event.charge);
    using outcome = keel::process::delivery::outcome;
    if (sent.result == outcome::finished || sent.result == outcome::no_instance)
        req.log().warn("provider event {} for charge {}: invoice {} is {}", event.type,
                       event.charge, event.reference, found->status);
    co_return response::json({{"received", true},
                              {"delivered", sent.result == outcome::stored},
                              {"duplicate", sent.result == outcome::duplicate}});
}

}  // namespace billing
