#include <algorithm>
#include <charconv>
#include <keel/http/request.hpp>
#include <keel/http/router.hpp>

#include "uri.hpp"

namespace keel::http {

namespace detail {

std::optional<std::string> percent_decode(std::string_view in, bool plus_is_space) {
    std::string out;
    out.reserve(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) {
        char c = in[i];
        if (c == '%') {
            if (i + 2 >= in.size()) return std::nullopt;
            int hi = hex_value(in[i + 1]), lo = hex_value(in[i + 2]);
            if (hi < 0 || lo < 0) return std::nullopt;
            out.push_back(static_cast<char>(hi * 16 + lo));
            i += 2;
        } else if (c == '+' && plus_is_space) {
            out.push_back(' ');
        } else {
            out.push_back(c);
        }
    }
    return out;
}

std::string json_type_name(const nlohmann::json& j) {
    return j.type_name();
}

std::string describe(const nlohmann::json::exception& e) {
    std::string_view what = e.what();
    if (what.starts_with("[json.exception.")) {
        auto end = what.find("] ");
        if (end != std::string_view::npos) what.remove_prefix(end + 2);
    }
    return std::string(what);
}

}  // namespace detail

json_field_error::json_field_error(std::string pointer, std::string message)
    : std::runtime_error((pointer.empty() ? std::string("body") : pointer) + ": " + message),
      pointer_(std::move(pointer)),
      reason_(std::move(message)) {}

json_field_error json_field_error::nested_in(std::string_view segment) const {
    std::string escaped;
    for (char c : segment) {
        if (c == '~')
            escaped += "~0";
        else if (c == '/')
            escaped += "~1";
        else
            escaped += c;
    }
    return json_field_error("/" + escaped + pointer_, reason_);
}

request::request(http::method m, std::string target, http::headers h, std::string body)
    : method_(m),
      method_name_(to_string(m)),
      target_(std::move(target)),
      headers_(std::move(h)),
      body_(std::move(body)) {
    path_size_ = std::min(target_.find('?'), target_.size());
    decode_path();
}

void request::decode_path() {
    auto fail = [&](std::string why) {
        path_error_ = std::move(why);
        path_.clear();
        segments_.clear();
    };
    std::string_view raw = raw_path();
    if (raw.empty() || raw[0] != '/') return fail("the path must start with '/'");
    std::string_view rest = raw.substr(1);
    while (rest.ends_with('/')) rest.remove_suffix(1);
    if (!rest.empty()) {
        while (true) {
            auto slash = rest.find('/');
            auto decoded = detail::percent_decode(rest.substr(0, slash), false);
            if (!decoded) return fail("malformed percent-encoding in the path");
            for (char c : *decoded) {
                if (c == '/') return fail("an encoded '/' (%2F) is not allowed in a path segment");
                if (detail::is_control(c))
                    return fail("control characters are not allowed in the path");
            }
            if (*decoded == "." || *decoded == "..")
                return fail("'.' and '..' segments are not allowed in the path");
            segments_.push_back(std::move(*decoded));
            if (slash == std::string_view::npos) break;
            rest.remove_prefix(slash + 1);
        }
    }
    path_.reserve(raw.size());
    for (const auto& segment : segments_) path_.append("/").append(segment);
    if (path_.empty()) path_ = "/";
}

const std::vector<std::pair<std::string, std::string>>& request::query_params() const {
    if (query_) return *query_;
    query_.emplace();
    std::string_view rest =
        path_size_ < target_.size() ? std::string_view(target_).substr(path_size_ + 1) : "";
    while (!rest.empty()) {
        auto amp = rest.find('&');
        auto pair = rest.substr(0, amp);
        rest = amp == std::string_view::npos ? std::string_view{} : rest.substr(amp + 1);
        if (pair.empty()) continue;
        auto eq = pair.find('=');
        auto name = detail::percent_decode(pair.substr(0, eq), true);
        auto value = detail::percent_decode(
            eq == std::string_view::npos ? std::string_view{} : pair.substr(eq + 1), true);
        if (!name || !value)
            throw problem_error(status::bad_request, "malformed percent-encoding in the query");
        query_->emplace_back(std::move(*name), std::move(*value));
    }
    return *query_;
}

std::optional<std::string_view> request::idempotency_key() const {
    auto key = header("Idempotency-Key");
    if (!key) return key;
    if (key->size() > max_idempotency_key_bytes)
        throw problem_error(status::bad_request,
                            "Idempotency-Key is longer than " +
                                std::to_string(max_idempotency_key_bytes) + " bytes",
                            "Idempotency-Key");
    if (std::any_of(key->begin(), key->end(), detail::is_control))
        throw problem_error(status::bad_request, "Idempotency-Key holds a control character",
                            "Idempotency-Key");
    return key;
}

std::optional<std::string_view> request::query(std::string_view name) const {
    for (auto& [n, v] : query_params())
        if (n == name) return std::string_view(v);
    return std::nullopt;
}

std::string request::content_type() const {
    auto value = header("Content-Type");
    if (!value) return {};
    auto media = value->substr(0, value->find(';'));
    while (!media.empty() && (media.back() == ' ' || media.back() == '\t')) media.remove_suffix(1);
    while (!media.empty() && (media.front() == ' ' || media.front() == '\t'))
        media.remove_prefix(1);
    std::string out(media);
    for (auto& c : out)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return out;
}

std::string_view request::param(std::string_view name) const {
    for (auto& [n, v] : params_)
        if (n == name) return v;
    throw std::out_of_range("the matched route has no path parameter '" + std::string(name) + "'");
}

void request::bad_param(std::string_view name, std::string_view expected) const {
    throw problem_error(
        status::bad_request,
        "path parameter '" + std::string(name) + "' must be " + std::string(expected),
        std::string(name));
}

template <>
std::string request::param<std::string>(std::string_view name) const {
    return std::string(param(name));
}

template <>
std::int64_t request::param<std::int64_t>(std::string_view name) const {
    auto text = param(name);
    std::int64_t value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc{} || end != text.data() + text.size()) bad_param(name, "an integer");
    return value;
}

template <>
int request::param<int>(std::string_view name) const {
    auto text = param(name);
    int value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc{} || end != text.data() + text.size()) bad_param(name, "an integer");
    return value;
}

keel::expected<const nlohmann::json*, problem> request::json_document() const {
    if (json_) return &*json_;
    auto type = content_type();
    if (type != "application/json" && !type.ends_with("+json"))
        return keel::unexpected(problem{status::unsupported_media_type,
                                        "expected Content-Type application/json, got " +
                                            (type.empty() ? std::string("none") : type)});
    if (body_.empty())
        return keel::unexpected(
            problem{status::bad_request, "the request body is empty; expected JSON"});
    try {
        json_ = parse_json(body_);
    } catch (const problem_error& e) {
        return keel::unexpected(e.problem());
    }
    return &*json_;
}

problem request::json_problem(const nlohmann::json::exception& e) {
    auto text = detail::describe(e);
    // out_of_range.403 names the key: "key 'amount' not found".
    if (e.id == 403 && text.starts_with("key '")) {
        auto end = text.find('\'', 5);
        auto key = text.substr(5, end - 5);
        return problem{status::bad_request, "field /" + key + " is required", "/" + key};
    }
    return problem{status::bad_request, "invalid request body: " + text};
}

problem request::field_problem(const json_field_error& e) {
    if (e.pointer().empty())
        return problem{status::bad_request, "invalid request body: " + e.reason()};
    return problem{status::bad_request, "field " + e.pointer() + ": " + e.reason(), e.pointer()};
}

void request::set_request_id(std::string id) {
    request_id_ = std::move(id);
    log_.reset();
}

const log::logger& request::log() const {
    if (!log_) {
        log::logger base("http");
        if (!request_id_.empty()) base = base.with("request_id", request_id_);
        const auto& t = trace();
        log_.emplace(base.with("trace_id", t.trace.hex()).with("span_id", t.span.hex()));
    }
    return *log_;
}

const trace::span_context& request::trace() const {
    if (!trace_) trace_ = trace::new_root();
    return *trace_;
}

void request::set_trace(trace::span_context context) {
    trace_ = std::move(context);
    log_.reset();
}

std::string_view request::route_pattern() const {
    return route_ ? std::string_view(route_->pattern) : std::string_view{};
}

}  // namespace keel::http
