// fuzz_route: request-target decoding (keel::http::request: path, segments, query) and
// routing (router::match) over a route table shaped like a service's: static routes, plain,
// <int>, <uuid> and <string> parameters, wildcards, and a /webhooks/... prefix.
//
// Input: byte 0 picks the method ('0' GET, '1' HEAD, '2' POST, ... '9' other, see
// method_of), the rest is the request-target. Checked against an independent model of the
// documented rules (request.hpp, router.hpp) rather than against the code: how a path
// decodes or is refused, which patterns can match its segments, that a matched route's
// parameters are exactly its pattern's, in order, with the values of the segments they stand
// for and of their declared type, that a route and a problem never come together, and that
// every answer renders as problem+json. query_params() may throw problem_error (400);
// nothing else may escape.

#include <keel/http/response.hpp>
#include <keel/http/router.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fuzz_check.hpp"

namespace {

using namespace keel::http;
using keel::fuzz::as_text;

struct route_spec {
    method m;
    std::string_view pattern;
};

constexpr route_spec route_specs[] = {
    {method::get, "/"},
    {method::get, "/healthz"},
    {method::get, "/orders"},
    {method::post, "/orders"},
    {method::get, "/orders/:id<int>"},
    {method::del, "/orders/:id<int>"},
    {method::get, "/orders/:id<int>/lines/:line"},
    {method::put, "/orders/:id<int>/lines/:line"},
    {method::get, "/users/:user<uuid>"},
    {method::post, "/users/:user<uuid>/resend"},
    {method::get, "/files/*path"},
    {method::post, "/webhooks/payment"},
    {method::post, "/webhooks/delivered"},
    {method::post, "/webhooks/signals/*signal"},
    {method::get, "/a/:x/b"},
    {method::get, "/a/:x/c/*rest"},
    {method::get, "/a/static/b/c"},
    {method::patch, "/search/:term<string>/page/:page<int>"},
};

const router& the_router() {
    static const router r = [] {
        router built;
        for (const auto& spec : route_specs)
            built.add(spec.m, spec.pattern,
                      [](request&) -> boost::asio::awaitable<response> { co_return response(); });
        return built;
    }();
    return r;
}

method method_of(std::uint8_t byte) {
    return static_cast<method>(static_cast<std::uint8_t>(byte - '0') % 10);
}

// The model of request.hpp's path rules.
int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

std::optional<std::string> decode(std::string_view in, bool plus_is_space) {
    std::string out;
    for (std::size_t i = 0; i < in.size(); ++i) {
        if (in[i] == '%') {
            if (in.size() - i < 3 || hex(in[i + 1]) < 0 || hex(in[i + 2]) < 0) return std::nullopt;
            out += static_cast<char>(hex(in[i + 1]) * 16 + hex(in[i + 2]));
            i += 2;
        } else {
            out += plus_is_space && in[i] == '+' ? ' ' : in[i];
        }
    }
    return out;
}

std::optional<std::vector<std::string>> model_segments(std::string_view target) {
    auto raw = target.substr(0, target.find('?'));
    if (raw.empty() || raw[0] != '/') return std::nullopt;
    auto rest = raw.substr(1);
    while (rest.ends_with('/')) rest.remove_suffix(1);
    std::vector<std::string> segments;
    if (rest.empty()) return segments;
    for (;;) {
        auto slash = rest.find('/');
        auto segment = decode(rest.substr(0, slash), false);
        if (!segment || *segment == "." || *segment == "..") return std::nullopt;
        for (char c : *segment) {
            auto u = static_cast<unsigned char>(c);
            if (c == '/' || u < 0x20 || u == 0x7f) return std::nullopt;
        }
        segments.push_back(std::move(*segment));
        if (slash == std::string_view::npos) return segments;
        rest.remove_prefix(slash + 1);
    }
}

std::optional<std::vector<std::pair<std::string, std::string>>> model_query(
    std::string_view target) {
    auto question = target.find('?');
    std::vector<std::pair<std::string, std::string>> out;
    if (question == std::string_view::npos) return out;
    auto rest = target.substr(question + 1);
    while (!rest.empty()) {
        auto amp = rest.find('&');
        auto pair = rest.substr(0, amp);
        rest = amp == std::string_view::npos ? std::string_view{} : rest.substr(amp + 1);
        if (pair.empty()) continue;
        auto eq = pair.find('=');
        auto name = decode(pair.substr(0, eq), true);
        auto value = decode(eq == std::string_view::npos ? "" : pair.substr(eq + 1), true);
        if (!name || !value) return std::nullopt;
        out.emplace_back(std::move(*name), std::move(*value));
    }
    return out;
}

// The model of router.hpp's patterns: what a normalised pattern binds for given segments.
struct pattern_part {
    enum { literal, param, rest } kind;
    std::string text;  // literal text or parameter name
    std::string type;  // "int", "uuid" or empty
};

std::vector<pattern_part> parse_pattern(std::string_view pattern) {
    std::vector<pattern_part> parts;
    auto rest = pattern.substr(1);
    while (!rest.empty()) {
        auto slash = rest.find('/');
        auto text = rest.substr(0, slash);
        rest = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash + 1);
        if (text[0] == '*') {
            parts.push_back({pattern_part::rest, std::string(text.substr(1)), ""});
        } else if (text[0] == ':') {
            auto open = text.find('<');
            std::string type;
            if (open != std::string_view::npos)
                type = text.substr(open + 1, text.size() - open - 2);
            parts.push_back({pattern_part::param, std::string(text.substr(1, open - 1)), type});
        } else {
            parts.push_back({pattern_part::literal, std::string(text), ""});
        }
    }
    return parts;
}

using bindings = std::vector<std::pair<std::string, std::string>>;

std::optional<bindings> bind_pattern(std::string_view pattern,
                                     const std::vector<std::string>& segments) {
    bindings out;
    auto parts = parse_pattern(pattern);
    for (std::size_t i = 0; i < parts.size(); ++i) {
        if (parts[i].kind == pattern_part::rest) {
            std::string joined;
            for (std::size_t j = i; j < segments.size(); ++j)
                joined += (j > i ? "/" : "") + segments[j];
            out.emplace_back(parts[i].text, std::move(joined));
            return out;
        }
        if (i >= segments.size()) return std::nullopt;
        if (parts[i].kind == pattern_part::literal && parts[i].text != segments[i])
            return std::nullopt;
        if (parts[i].kind == pattern_part::param) {
            if (segments[i].empty()) return std::nullopt;
            out.emplace_back(parts[i].text, segments[i]);
        }
    }
    if (parts.size() != segments.size()) return std::nullopt;
    return out;
}

std::string type_of(std::string_view pattern, std::string_view name) {
    for (const auto& part : parse_pattern(pattern))
        if (part.kind == pattern_part::param && part.text == name) return part.type;
    return {};
}

bool is_int64(std::string_view value) {
    bool negative = value.starts_with('-');
    if (negative) value.remove_prefix(1);
    if (value.empty()) return false;
    for (char c : value)
        if (c < '0' || c > '9') return false;
    while (value.size() > 1 && value.front() == '0') value.remove_prefix(1);
    if (value.size() != 19) return value.size() < 19;
    return value <= (negative ? "9223372036854775808" : "9223372036854775807");
}

bool typed_ok(std::string_view type, std::string_view value) {
    if (type == "int") return is_int64(value);
    if (type != "uuid") return true;
    if (value.size() != 36) return false;
    for (std::size_t i = 0; i < value.size(); ++i) {
        bool dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash ? value[i] != '-' : hex(value[i]) < 0) return false;
    }
    return true;
}

bool any_route_binds(const std::vector<std::string>& segments) {
    for (const auto* info : the_router().routes())
        if (bind_pattern(info->pattern, segments)) return true;
    return false;
}

void check_renders(const problem& p) {
    auto res = response::problem(p, "fuzz-request");
    KEEL_FUZZ_CHECK(res.status() == p.status);
    auto body = nlohmann::json::parse(res.body(), nullptr, false);
    KEEL_FUZZ_CHECK(body.is_object() && body["status"] == static_cast<int>(p.status));
}

void check_match(request& req, const match_result& m, const std::vector<std::string>& segments) {
    KEEL_FUZZ_CHECK(!(m.route && m.problem));
    if (m.route) {
        KEEL_FUZZ_CHECK(req.route() == m.route);
        KEEL_FUZZ_CHECK(m.route->method == req.method() ||
                        (req.method() == method::head && m.route->method == method::get));
        auto bound = bind_pattern(m.route->pattern, segments);
        KEEL_FUZZ_CHECK(bound.has_value());
        KEEL_FUZZ_CHECK(bound->size() == req.params().size());
        for (std::size_t i = 0; i < bound->size(); ++i) {
            KEEL_FUZZ_CHECK(req.params()[i].first == (*bound)[i].first);
            KEEL_FUZZ_CHECK(req.params()[i].second == (*bound)[i].second);
            KEEL_FUZZ_CHECK(req.param((*bound)[i].first) == (*bound)[i].second);
            auto type = type_of(m.route->pattern, (*bound)[i].first);
            KEEL_FUZZ_CHECK(typed_ok(type, (*bound)[i].second));
            if (type == "int") (void)req.param<std::int64_t>((*bound)[i].first);
        }
        return;
    }
    if (!m.problem) {
        KEEL_FUZZ_CHECK(req.method() == method::options && !m.allow.empty());
        KEEL_FUZZ_CHECK(any_route_binds(segments));
        return;
    }
    check_renders(*m.problem);
    switch (m.problem->status) {
        case status::bad_request: {
            // A typed parameter that does not convert: the route was found, the field names
            // the first parameter (in path order) whose value is not of its type.
            KEEL_FUZZ_CHECK(req.route() != nullptr && !m.problem->field.empty());
            auto bound = bind_pattern(req.route()->pattern, segments);
            KEEL_FUZZ_CHECK(bound.has_value());
            std::string first_bad;
            for (const auto& [name, value] : *bound) {
                if (!typed_ok(type_of(req.route()->pattern, name), value)) {
                    first_bad = name;
                    break;
                }
            }
            KEEL_FUZZ_CHECK(first_bad == m.problem->field);
            break;
        }
        case status::not_found:
            KEEL_FUZZ_CHECK(!any_route_binds(segments));
            break;
        case status::method_not_allowed:
            KEEL_FUZZ_CHECK(req.method() != method::options && !m.allow.empty());
            KEEL_FUZZ_CHECK(any_route_binds(segments));
            break;
        default:
            KEEL_FUZZ_CHECK(!"match answered a status other than 400, 404 or 405");
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    auto target = as_text(data + 1, size - 1);
    request req(method_of(data[0]), std::string(target));

    auto segments = model_segments(target);
    KEEL_FUZZ_CHECK(req.path_error().empty() == segments.has_value());
    KEEL_FUZZ_CHECK(req.raw_path() == target.substr(0, target.find('?')));
    if (segments) {
        KEEL_FUZZ_CHECK(req.path_segments() == *segments);
        // Documented: the decoded path, without a trailing slash.
        KEEL_FUZZ_CHECK(req.path() == "/" || !req.path().ends_with('/'));
    } else {
        KEEL_FUZZ_CHECK(req.path().empty() && req.path_segments().empty());
    }

    auto m = the_router().match(req);
    if (!segments) {
        KEEL_FUZZ_CHECK(!m.route && m.problem && m.problem->status == status::bad_request &&
                        m.problem->field.empty());
        check_renders(*m.problem);
    } else {
        check_match(req, m, *segments);
    }

    // match() starts afresh every time: the same request matches the same way again.
    auto params = req.params();
    auto again = the_router().match(req);
    KEEL_FUZZ_CHECK(again.route == m.route && again.problem.has_value() == m.problem.has_value());
    KEEL_FUZZ_CHECK(req.params() == params);

    auto expected_query = model_query(target);
    try {
        const auto& query = req.query_params();
        KEEL_FUZZ_CHECK(expected_query && query == *expected_query);
        if (!query.empty()) KEEL_FUZZ_CHECK(req.query(query.front().first) == query.front().second);
    } catch (const problem_error& e) {
        KEEL_FUZZ_CHECK(!expected_query && e.problem().status == status::bad_request);
        check_renders(e.problem());
    }
    return 0;
}
