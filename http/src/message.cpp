#include <algorithm>
#include <array>
#include <cctype>
#include <keel/framework/repository.hpp>
#include <keel/http/message.hpp>
#include <keel/http/problem.hpp>

namespace keel::http {

namespace {
constexpr std::array<std::string_view, 10> method_names = {
    "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE", "OTHER"};

char lower(char c) {
    return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}
}  // namespace

std::string_view to_string(method m) {
    return method_names[static_cast<std::size_t>(m)];
}

method parse_method(std::string_view name) {
    for (std::size_t i = 0; i + 1 < method_names.size(); ++i)
        if (method_names[i] == name) return static_cast<method>(i);
    return method::other;
}

std::string_view reason(status s) {
    switch (s) {
        case status::continue_:
            return "Continue";
        case status::ok:
            return "OK";
        case status::created:
            return "Created";
        case status::accepted:
            return "Accepted";
        case status::no_content:
            return "No Content";
        case status::moved_permanently:
            return "Moved Permanently";
        case status::found:
            return "Found";
        case status::see_other:
            return "See Other";
        case status::not_modified:
            return "Not Modified";
        case status::temporary_redirect:
            return "Temporary Redirect";
        case status::permanent_redirect:
            return "Permanent Redirect";
        case status::bad_request:
            return "Bad Request";
        case status::unauthorized:
            return "Unauthorized";
        case status::forbidden:
            return "Forbidden";
        case status::not_found:
            return "Not Found";
        case status::method_not_allowed:
            return "Method Not Allowed";
        case status::not_acceptable:
            return "Not Acceptable";
        case status::request_timeout:
            return "Request Timeout";
        case status::conflict:
            return "Conflict";
        case status::gone:
            return "Gone";
        case status::precondition_failed:
            return "Precondition Failed";
        case status::payload_too_large:
            return "Content Too Large";
        case status::unsupported_media_type:
            return "Unsupported Media Type";
        case status::unprocessable_content:
            return "Unprocessable Content";
        case status::too_many_requests:
            return "Too Many Requests";
        case status::request_header_fields_too_large:
            return "Request Header Fields Too Large";
        case status::internal_server_error:
            return "Internal Server Error";
        case status::not_implemented:
            return "Not Implemented";
        case status::bad_gateway:
            return "Bad Gateway";
        case status::service_unavailable:
            return "Service Unavailable";
        case status::gateway_timeout:
            return "Gateway Timeout";
    }
    return "Unknown";
}

bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(),
                                              [](char x, char y) { return lower(x) == lower(y); });
}

std::optional<std::string_view> headers::get(std::string_view name) const {
    for (auto& [n, v] : fields_)
        if (iequals(n, name)) return std::string_view(v);
    return std::nullopt;
}

void headers::set(std::string_view name, std::string_view value) {
    remove(name);
    fields_.emplace_back(std::string(name), std::string(value));
}

void headers::add(std::string name, std::string value) {
    fields_.emplace_back(std::move(name), std::move(value));
}

void headers::remove(std::string_view name) {
    std::erase_if(fields_, [&](const field& f) { return iequals(f.first, name); });
}

problem_error::problem_error(http::problem p)
    : std::runtime_error(p.detail.empty() ? std::string(reason(p.status)) : p.detail),
      problem_(std::move(p)) {}

problem_error::problem_error(http::status s, std::string detail, std::string field)
    : problem_error(http::problem{s, std::move(detail), std::move(field)}) {}

problem_error problem_of(const keel::model_error& e) {
    switch (e.kind) {
        case keel::model_error::code::lock_timeout:
            return {status::conflict, "the entity is busy; retry: " + e.what()};
        case keel::model_error::code::lock_lost:
            return {status::conflict,
                    "the entity changed hands while it was written; retry: " + e.what()};
        case keel::model_error::code::invalid_document:
            return {status::internal_server_error, "a stored document does not decode"};
        case keel::model_error::code::unavailable:
            break;
    }
    return {status::service_unavailable, "storage is unavailable; retry: " + e.what()};
}

void require_plain_id(std::string_view id, std::string_view field) {
    bool ok = !id.empty() && id.size() <= 128;
    for (char c : id)
        ok =
            ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.');
    if (!ok)
        throw problem_error(status::bad_request,
                            "must be 1 to 128 letters, digits, '-', '_' or '.'",
                            std::string(field));
}

}  // namespace keel::http
