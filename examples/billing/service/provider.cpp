#include "provider.hpp"

#include <fmt/format.h>

#include <keel/process/http_call.hpp>
#include <stdexcept>

namespace billing {

namespace {

keel::http::client_options client_options_of(const settings& s) {
    keel::http::client_options options;
    options.tls.ca_file = s.provider_ca;
    options.request_timeout = std::chrono::seconds(10);
    return options;
}

std::string charges_url(const settings& s) {
    auto url = s.provider_url;  // checked at start (service.cpp): http:// or https://
    while (!url.empty() && url.back() == '/') url.pop_back();
    return url + "/charges";
}

}  // namespace

charge_result read_charge(int status, const std::string& body) {
    if (status != 200 && status != 201)
        return {
            .id = {}, .status = "error", .detail = fmt::format("the provider answered {}", status)};
    try {
        auto j = nlohmann::json::parse(body);
        charge_result r{.id = j.at("id").get<std::string>(),
                        .status = j.at("status").get<std::string>(),
                        .detail = {}};
        if (r.status != "succeeded" && r.status != "declined" && r.status != "pending")
            return {.id = r.id, .status = "error", .detail = "unknown charge status " + r.status};
        return r;
    } catch (const std::exception& e) {
        return {.id = {},
                .status = "error",
                .detail = std::string("the provider's answer does not read: ") + e.what()};
    }
}

provider_limit provider_limit_of(const settings& s) {
    keel::process::limit l{
        .name = "provider", .rate = s.provider_rate, .per = std::chrono::seconds(1)};
    keel::process::check(l);
    return {std::move(l)};
}

http_provider::http_provider(keel::service& service, settings& s, provider_limit& limit)
    : url_(charges_url(s)), limit_(limit.limit), client_(service, client_options_of(s)) {}

keel::process::durable<charge_result> http_provider::charge(keel::process::context& ctx,
                                                            std::string step,
                                                            charge_request request) {
    nlohmann::json body = {{"card", request.card},
                           {"amount", request.amount},
                           {"currency", "eur"},
                           {"reference", request.reference}};
    auto req = keel::http::client_request::json(keel::http::method::post, url_, body);
    auto call = ctx.http(std::move(step), client_, std::move(req)).limited(limit_);
    std::optional<keel::http::client_response> res;
    try {
        res.emplace(co_await std::move(call));
    } catch (const keel::process::step_failed& e) {  // no answer after the step's retries
        co_return charge_result{.id = {}, .status = "error", .detail = e.what()};
    }
    co_return read_charge(res->status_code(), res->body());
}

}  // namespace billing
