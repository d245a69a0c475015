#include <keel/framework/json_text.hpp>
#include <keel/http/response.hpp>
#include <nlohmann/json.hpp>

namespace keel::http {

response response::json(const nlohmann::json& body, http::status s) {
    response r(s);
    r.headers_.reserve(4);
    r.headers_.add("Content-Type", "application/json");
    r.body_ = dump_json(body, json_utf8_handler::replace);
    return r;
}

response response::text(std::string body, http::status s, std::string_view content_type) {
    response r(s);
    r.headers_.reserve(4);
    r.headers_.add("Content-Type", std::string(content_type));
    r.body_ = std::move(body);
    return r;
}

response response::problem(const http::problem& p, std::string_view request_id) {
    nlohmann::json body = {
        {"type", p.type.empty() ? "about:blank" : p.type},
        {"title", p.title.empty() ? std::string(reason(p.status)) : p.title},
        {"status", to_int(p.status)},
    };
    if (!p.detail.empty()) body["detail"] = p.detail;
    if (!p.field.empty()) body["field"] = p.field;
    if (!request_id.empty()) body["request_id"] = request_id;
    response r(p.status);
    r.headers_.reserve(4);
    r.headers_.add("Content-Type", "application/problem+json");
    // RFC 9110 §10.2.3: tell a client of an unavailable or busy service when to try again.
    if (p.status == status::service_unavailable || p.status == status::too_many_requests)
        r.headers_.add("Retry-After", "1");
    r.body_ = dump_json(body, json_utf8_handler::replace);
    return r;
}

response response::problem(http::status s, std::string detail, std::string field) {
    return problem(http::problem{s, std::move(detail), std::move(field)});
}

}  // namespace keel::http
