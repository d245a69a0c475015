#include "errors.hpp"

#include <keel/http/message.hpp>
#include <nlohmann/json.hpp>

#include "format.hpp"

namespace keel::cli {

namespace {

constexpr std::size_t max_body_excerpt = 200;

std::string string_field(const nlohmann::json& doc, const char* name) {
    auto it = doc.find(name);
    if (it == doc.end() || !it->is_string()) return {};
    return it->get<std::string>();
}

std::string first_line(std::string_view body) {
    auto line = body.substr(0, body.find_first_of("\r\n"));
    return truncate_end(one_line(line), max_body_excerpt);
}

}  // namespace

exit_code exit_code_for_status(int status) {
    return status >= 200 && status < 300 ? exit_code::ok : exit_code::failed;
}

std::string problem_message(int status, std::string_view body) {
    auto head = std::to_string(status);
    auto doc = nlohmann::json::parse(body, nullptr, false);
    std::string title, detail;
    if (doc.is_object()) {
        title = string_field(doc, "title");
        detail = string_field(doc, "detail");
    } else {
        detail = first_line(body);
    }
    if (title.empty()) title = http::reason(static_cast<http::status>(status));
    if (title != "Unknown") head += " " + title;
    return detail.empty() || detail == title ? head : head + ": " + detail;
}

}  // namespace keel::cli
