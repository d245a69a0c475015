#include "admin_client.hpp"

#include <algorithm>

#include "errors.hpp"

namespace keel::cli {

namespace {

bool has_control_character(std::string_view text) {
    return std::any_of(text.begin(), text.end(),
                       [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7F; });
}

std::string check_token(std::string token) {
    if (has_control_character(token)) throw usage_error("the token contains control characters");
    return token;
}

std::string hint_for(int status) {
    if (status == 401) return " (check --token or KEEL_ADMIN_TOKEN)";
    return {};
}

}  // namespace

admin_client::admin_client(const connection_options& options)
    : http_(parse_url(options.url), options.timeout), token_(check_token(options.token)) {}

nlohmann::json admin_client::get(std::string_view target) {
    return exchange({"GET", std::string(target), {}, {}});
}

nlohmann::json admin_client::post(std::string_view target,
                                  const std::optional<nlohmann::json>& body, header_list headers) {
    http_request request{"POST", std::string(target), std::move(headers), {}};
    if (body) {
        request.headers.emplace_back("Content-Type", "application/json");
        request.body = body->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
    return exchange(std::move(request));
}

nlohmann::json admin_client::exchange(http_request request) {
    for (const auto& [name, value] : request.headers)
        if (has_control_character(value))
            throw usage_error("the " + name + " header would contain control characters");
    if (!token_.empty()) request.headers.emplace_back("Authorization", "Bearer " + token_);
    auto res = http_.send(request);
    if (exit_code_for_status(res.status) != exit_code::ok)
        throw api_error(res.status, problem_message(res.status, res.body) + hint_for(res.status));
    if (res.body.empty()) return nullptr;
    auto doc = nlohmann::json::parse(res.body, nullptr, false);
    if (doc.is_discarded())
        throw transport_error("the answer to " + request.method + " " + request.target + " from " +
                              http_.base().text + " is not JSON");
    return doc;
}

}  // namespace keel::cli
