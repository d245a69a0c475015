#include "controllers.hpp"

#include <algorithm>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cctype>
#include <keel/http/json.hpp>
#include <keel/http/problem.hpp>
#include <keel/http/request.hpp>
#include <keel/http/response.hpp>

namespace billing::sim {

namespace http = keel::http;
using http::request;
using http::response;

// Read by request::json<charge_request>(): a missing or wrong-typed field is a 400 naming it.
void from_json(const nlohmann::json& j, charge_request& c) {
    http::read_field(j, "card", c.card);
    http::read_field(j, "amount", c.amount);
    http::read_field(j, "currency", c.currency);
    http::read_field(j, "reference", c.reference);
}

namespace {

constexpr std::size_t max_reference_bytes = 256;

[[noreturn]] void bad_field(std::string field, std::string detail) {
    throw http::problem_error(http::status::bad_request, std::move(detail), std::move(field));
}

bool is_letters(std::string_view s) {
    return std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isalpha(c); });
}

bool has_control_characters(std::string_view s) {
    return std::any_of(s.begin(), s.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; });
}

// The fields' values, once their types are right; the currency is lower-cased.
void check(charge_request& c) {
    if (!well_formed_card(c.card)) bad_field("/card", "must be 12 to 19 digits");
    if (c.amount < 1) bad_field("/amount", "must be a positive integer (minor units)");
    if (c.currency.size() != 3 || !is_letters(c.currency))
        bad_field("/currency", "must be a 3-letter currency code");
    std::transform(c.currency.begin(), c.currency.end(), c.currency.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    if (c.reference.empty() || c.reference.size() > max_reference_bytes ||
        has_control_characters(c.reference))
        bad_field("/reference", "must be 1 to 256 characters, none of them control characters");
}

std::string required_key(const request& req) {
    auto key = req.idempotency_key();  // 400 itself when too long or with control characters
    if (!key || key->empty())
        throw http::problem_error(http::status::bad_request,
                                  "the Idempotency-Key header is required", "Idempotency-Key");
    return std::string(*key);
}

nlohmann::json receipt(const charge& c) {
    return {{"id", c.id}, {"status", to_string(c.status)}, {"reference", c.request.reference}};
}

nlohmann::json details(const charge& c) {
    auto out = receipt(c);
    out["amount"] = c.request.amount;
    out["currency"] = c.request.currency;
    out["card"] = last4(c.request.card);
    out["requests"] = c.requests;
    return out;
}

// A problem answer carrying the request's id, as the router's own answers do.
response refusal(const request& req, http::status status, std::string detail,
                 std::string field = {}) {
    http::problem p{.status = status, .detail = std::move(detail), .field = std::move(field)};
    return response::problem(p, req.request_id());
}

}  // namespace

void charge_controller::routes(http::controller_routes<charge_controller>& r) {
    r.prefix("/charges");
    r.post("/", &charge_controller::create, {.max_body = 16 * 1024});
    r.get("/", &charge_controller::list);
}

asio::awaitable<response> charge_controller::create(request& req) {
    auto key = required_key(req);
    auto asked = req.json<charge_request>();
    check(asked);
    auto result = book_.charge(key, asked, std::chrono::steady_clock::now());
    if (answer_delay_ > keel::duration::zero() && result.made) {
        asio::steady_timer held(co_await asio::this_coro::executor, answer_delay_);
        co_await held.async_wait(asio::use_awaitable);
    }
    switch (result.outcome) {
        case charge_outcome::created:
            req.log().info("charge {} for {}: {}", result.made->id, asked.reference,
                           to_string(result.made->status));
            if (result.made->status == charge_status::pending)
                webhooks_.schedule(result.made->id, asked.reference);
            co_return response::json(receipt(*result.made), http::status::created);
        case charge_outcome::replayed:
            co_return response::json(receipt(*result.made), http::status::ok);
        case charge_outcome::key_reused:
            co_return refusal(req, http::status::conflict,
                              "this Idempotency-Key was used for another request; nothing was "
                              "charged",
                              "Idempotency-Key");
        case charge_outcome::rate_limited:
            break;
    }
    co_return refusal(req, http::status::too_many_requests,
                      "too many charges in the last second; nothing was charged")
        .header("Retry-After", "1");
}

asio::awaitable<response> charge_controller::list(request& req) {
    auto reference = req.query("reference");
    auto charges = book_.list(reference);
    nlohmann::json out = nlohmann::json::array();
    for (const auto& c : charges) out.push_back(details(c));
    nlohmann::json body = {{"charges", std::move(out)}};
    co_return response::json(body);
}

}  // namespace billing::sim
