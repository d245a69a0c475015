#include "controllers.hpp"

#include <fmt/format.h>

#include <keel/http/json.hpp>
#include <keel/http/problem.hpp>
#include <keel/http/request.hpp>
#include <keel/http/response.hpp>
#include <keel/http/signal_route.hpp>
#include <random>

#include "processes.hpp"

namespace orders {

namespace http = keel::http;
using http::request;
using http::response;

namespace {

// ---- request bodies ----

struct new_order {
    std::optional<std::string> id;
    std::string email;
    std::string address;
    double total = 0;
};
void from_json(const nlohmann::json& j, new_order& n) {
    http::read_field(j, "id", n.id);
    http::read_field(j, "email", n.email);
    http::read_field(j, "address", n.address);
    http::read_field(j, "total", n.total);
}

struct new_user {
    std::string id;
    std::string email;
};
void from_json(const nlohmann::json& j, new_user& n) {
    http::read_field(j, "id", n.id);
    http::read_field(j, "email", n.email);
}

struct payment_hook {
    std::string order_id;
    std::string transaction_id;
    double amount = 0;
};
void from_json(const nlohmann::json& j, payment_hook& h) {
    http::read_field(j, "orderId", h.order_id);
    http::read_field(j, "transactionId", h.transaction_id);
    http::read_field(j, "amount", h.amount);
}

struct order_hook {
    std::string order_id;
};
void from_json(const nlohmann::json& j, order_hook& h) {
    http::read_field(j, "orderId", h.order_id);
}

struct code_hook {
    std::string user_id;
    std::string code;
};
void from_json(const nlohmann::json& j, code_hook& h) {
    http::read_field(j, "userId", h.user_id);
    http::read_field(j, "code", h.code);
}

// ---- checks and answers ----

void check_text(const std::string& value, std::string_view field) {
    if (value.empty())
        throw http::problem_error(http::status::bad_request, "must not be empty",
                                  std::string(field));
}

// Transaction ids are remembered as idempotency keys: bounded and printable.
void check_key(const std::string& value, std::string_view field) {
    bool ok = !value.empty() && value.size() <= keel::signals::max_key_bytes;
    for (char c : value) ok = ok && static_cast<unsigned char>(c) >= 0x20 && c != 0x7f;
    if (!ok)
        throw http::problem_error(
            http::status::bad_request,
            "must be 1 to " + std::to_string(keel::signals::max_key_bytes) + " printable bytes",
            std::string(field));
}

void check_amount(double value, std::string_view field) {
    if (!(value > 0 && value < max_amount))
        throw http::problem_error(
            http::status::bad_request,
            "must be a positive amount below " + fmt::format("{}", max_amount), std::string(field));
}

[[noreturn]] void not_found(std::string_view what, std::string_view id) {
    throw http::problem_error(http::status::not_found,
                              std::string(what) + " " + std::string(id) + " does not exist");
}

std::string generated_id() {
    thread_local std::mt19937_64 rng{std::random_device{}()};
    static constexpr char hex[] = "0123456789abcdef";
    std::string id = "o-";
    auto bits = rng();
    for (int i = 0; i < 12; ++i, bits >>= 4) id += hex[bits & 15];
    return id;
}

response process_answer(const std::optional<keel::process::instance_info>& info,
                        std::string_view what, std::string_view id) {
    if (!info) not_found(what, id);
    return response::json(*info);
}

response webhook_answer(const keel::signals::emit_result& r) {
    return response::json(
        {{"received", true}, {"delivered", r.reached}, {"duplicate", r.duplicate}});
}

// A webhook {"orderId"} for a signal without payload, for an order that exists; the key is
// the Idempotency-Key header, else "<kind>/<order>". The order's existence is checked with
// the emit (update_and_emit with a change that changes nothing): one round trip when this
// process knows the order.
template <class Signal>
asio::awaitable<response> emit_for_order(request& req, order_book& orders, const Signal& signal,
                                         std::string kind) {
    auto body = req.json<order_hook>();
    http::require_plain_id(body.order_id, "/orderId");
    auto options = http::emit_options_from(req, kind + "/" + body.order_id);
    keel::ref<order> ref(body.order_id);
    auto exists = [&](std::optional<order>& o) {
        if (!o) not_found("order", ref.id());
        return false;
    };
    auto sent = co_await signal.update_and_emit(orders.repository(), ref, exists, ref, options);
    if (!sent) throw http::problem_of(sent.error());
    co_return webhook_answer(*sent);
}

// The user, or the 404 / 503 answer.
asio::awaitable<user> find_user(user_book& users, std::string id) {
    keel::ref<user> ref(std::move(id));
    auto found = co_await users.repository().get(ref);
    if (!found) throw http::problem_of(found.error());
    if (!*found) not_found("user", ref.id());
    co_return std::move(**found);
}

}  // namespace

// ---- orders ----

void order_controller::routes(http::controller_routes<order_controller>& r) {
    r.prefix("/orders");
    r.post("/", &order_controller::create);
    r.get("/:id", &order_controller::show);
    r.get("/:id/fulfillment", &order_controller::fulfillment);
}

asio::awaitable<response> order_controller::create(request& req) {
    auto body = req.json<new_order>();
    std::string id = body.id ? *body.id : generated_id();
    http::require_plain_id(id, "/id");
    check_text(body.email, "/email");
    check_text(body.address, "/address");
    check_amount(body.total, "/total");
    keel::ref<order> ref(id);
    // The order unless it exists, and its process unless it exists, in one step: a retried
    // request finds both and answers 200. The process continues this request's trace.
    order fresh{id, body.email, body.address, body.total, "created", {}};
    keel::process::start_options in_request{.trace = req.trace()};
    auto started = co_await engine_.create_and_start(in_request, orders_.repository(), ref,
                                                     std::move(fresh), order_fulfillment, ref);
    if (!started) throw http::problem_of(started.error());
    co_return response::json({{"order", id}, {"process", started->process.id()}},
                             started->created ? http::status::created : http::status::ok)
        .header("Location", "/orders/" + id);
}

asio::awaitable<response> order_controller::show(request& req) {
    keel::ref<order> ref(req.param<std::string>("id"));
    auto found = co_await orders_.repository().get(ref);
    if (!found) throw http::problem_of(found.error());
    if (!*found) not_found("order", ref.id());
    co_return response::json(**found);
}

asio::awaitable<response> order_controller::fulfillment(request& req) {
    keel::ref<order> ref(req.param<std::string>("id"));
    http::require_plain_id(ref.id(), "id");
    auto info = co_await engine_.describe(order_fulfillment.instance_id(ref));
    co_return process_answer(info, "order", ref.id());
}

// ---- users ----

void user_controller::routes(http::controller_routes<user_controller>& r) {
    r.prefix("/users");
    r.post("/", &user_controller::create);
    r.get("/:id/outbox", &user_controller::outbox);
    r.get("/:id/verification", &user_controller::verification);
    r.post("/:id/resend", &user_controller::resend);
}

asio::awaitable<response> user_controller::create(request& req) {
    auto body = req.json<new_user>();
    http::require_plain_id(body.id, "/id");
    check_text(body.email, "/email");
    keel::ref<user> ref(body.id);
    const user fresh{body.id, body.email, {}, false};
    auto created = co_await users_.repository().create(ref, fresh);
    if (!created) throw http::problem_of(created.error());
    keel::process::start_options in_request{.trace = req.trace()};
    auto process = co_await engine_.start(in_request, email_verification, ref);
    co_return response::json({{"user", body.id}, {"process", process.id()}},
                             *created ? http::status::created : http::status::ok);
}

asio::awaitable<response> user_controller::outbox(request& req) {
    auto found = co_await find_user(users_, req.param<std::string>("id"));
    co_return response::json({{"codes", found.outbox}});
}

asio::awaitable<response> user_controller::verification(request& req) {
    keel::ref<user> ref(req.param<std::string>("id"));
    http::require_plain_id(ref.id(), "id");
    auto info = co_await engine_.describe(email_verification.instance_id(ref));
    co_return process_answer(info, "user", ref.id());
}

asio::awaitable<response> user_controller::resend(request& req) {
    keel::ref<user> ref(req.param<std::string>("id"));
    auto options = http::emit_options_from(req, "");
    co_await find_user(users_, ref.id());
    auto sent = co_await signals_.resend_requested.emit(ref, options);
    co_return webhook_answer(sent);
}

// ---- webhooks ----

void webhook_controller::routes(http::controller_routes<webhook_controller>& r) {
    r.prefix("/webhooks");
    r.post("/payment", &webhook_controller::payment_received);
    r.post("/payment-failed", &webhook_controller::payment_failed);
    r.post("/delivered", &webhook_controller::delivered);
    r.post("/verification-code", &webhook_controller::verification_code);
}

// The payment is recorded on the order with the signal, both or neither (update_and_emit: a
// conditional write, and a concurrent change of the order makes the check run again on it),
// so a second payment, a payment for a finished order or one of the wrong amount is refused
// with the reason instead of being delivered to a process that no longer waits for it.
asio::awaitable<response> webhook_controller::payment_received(request& req) {
    auto body = req.json<payment_hook>();
    http::require_plain_id(body.order_id, "/orderId");
    check_key(body.transaction_id, "/transactionId");
    check_amount(body.amount, "/amount");
    auto options = http::emit_options_from(req, "payment/" + body.transaction_id);
    keel::ref<order> ref(body.order_id);
    payment paid{body.transaction_id, body.amount};
    auto accept = [&](std::optional<order>& o) {
        if (!o) not_found("order", ref.id());
        auto verdict = judge_payment(*o, paid);
        if (verdict.decision == payment_verdict::kind::refuse)
            throw http::problem_error(http::status::conflict, verdict.reason, "/transactionId");
        if (verdict.decision == payment_verdict::kind::repeat) return false;
        o->payments.push_back(paid);
        return true;
    };
    auto sent = co_await payments_.received.update_and_emit(orders_.repository(), ref, accept, ref,
                                                            paid, options);
    if (!sent) throw http::problem_of(sent.error());
    if (sent->reached == 0) co_return co_await unapplied(ref, paid);
    co_return webhook_answer(*sent);
}

// A payment no fulfilment took (an operator cancelled the order's flow: the order itself still
// says "created"): taken off the order again and refused, so that it is refunded rather than
// recorded on an order that will never ship. A retry of the webhook ends here too.
asio::awaitable<response> webhook_controller::unapplied(const keel::ref<order>& ref,
                                                        const payment& paid) {
    auto forget = [&](std::optional<order>& o) {
        if (!o) return false;
        auto before = o->payments.size();
        std::erase_if(o->payments,
                      [&](const payment& p) { return p.transaction_id == paid.transaction_id; });
        return o->payments.size() != before;
    };
    auto forgotten = co_await orders_.repository().update(ref, forget);
    if (!forgotten) throw http::problem_of(forgotten.error());
    throw http::problem_error(http::status::conflict,
                              "order " + ref.id() + " has no fulfilment that waits for a payment " +
                                  "(it was cancelled): payment " + paid.transaction_id +
                                  " was not applied; refund it",
                              "/transactionId");
}

// Failing a payment is recorded on the order with the signal, like a payment, so the two
// cannot both be accepted.
asio::awaitable<response> webhook_controller::payment_failed(request& req) {
    auto body = req.json<order_hook>();
    http::require_plain_id(body.order_id, "/orderId");
    auto options = http::emit_options_from(req, "payment-failed/" + body.order_id);
    keel::ref<order> ref(body.order_id);
    auto fail = [&](std::optional<order>& o) {
        if (!o) not_found("order", ref.id());
        if (!o->payments.empty())
            throw http::problem_error(http::status::conflict,
                                      "order " + o->id + " is paid by " +
                                          o->payments.front().transaction_id +
                                          ": its payment cannot fail any more",
                                      "/orderId");
        if (o->status != "created" && o->status != "payment_failed")
            throw http::problem_error(http::status::conflict,
                                      "order " + o->id + " is " + o->status + ": nothing to fail",
                                      "/orderId");
        if (o->status == "payment_failed") return false;
        o->status = "payment_failed";
        return true;
    };
    auto sent =
        co_await payments_.failed.update_and_emit(orders_.repository(), ref, fail, ref, options);
    if (!sent) throw http::problem_of(sent.error());
    co_return webhook_answer(*sent);
}

asio::awaitable<response> webhook_controller::delivered(request& req) {
    co_return co_await emit_for_order(req, orders_, shipping_.delivered, "delivered");
}

asio::awaitable<response> webhook_controller::verification_code(request& req) {
    auto body = req.json<code_hook>();
    http::require_plain_id(body.user_id, "/userId");
    keel::ref<user> ref(body.user_id);
    auto options = http::emit_options_from(req, "");  // every submission is an attempt
    co_await find_user(users_, body.user_id);
    auto sent = co_await verification_.code_submitted.emit(ref, body.code, options);
    co_return webhook_answer(sent);
}

}  // namespace orders
