#include "route_table.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>

namespace keel::http::detail {

namespace {

struct segment {
    enum { literal, param, rest } type = literal;
    std::string text;  // literal text or parameter name
    param_kind kind = param_kind::string;
};

[[noreturn]] void invalid(method m, std::string_view pattern, std::string_view why) {
    throw route_error("invalid route " + std::string(to_string(m)) + " " + std::string(pattern) +
                      ": " + std::string(why));
}

bool is_name(std::string_view s) {
    if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
    return std::all_of(s.begin(), s.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
    });
}

segment parse_param(method m, std::string_view pattern, std::string_view text) {
    segment seg{segment::param};
    auto open = text.find('<');
    std::string_view name = text.substr(1, open == std::string_view::npos ? text.npos : open - 1);
    if (!is_name(name))
        invalid(m, pattern, "parameter name '" + std::string(name) + "' is not an identifier");
    seg.text = std::string(name);
    if (open == std::string_view::npos) return seg;
    if (!text.ends_with('>'))
        invalid(m, pattern, "unterminated type in '" + std::string(text) + "'");
    auto type = text.substr(open + 1, text.size() - open - 2);
    if (type == "int")
        seg.kind = param_kind::integer;
    else if (type == "uuid")
        seg.kind = param_kind::uuid;
    else if (type == "string")
        seg.kind = param_kind::string;
    else
        invalid(m, pattern,
                "unknown parameter type '" + std::string(type) + "' (int, uuid or string)");
    return seg;
}

std::vector<segment> parse_pattern(method m, std::string_view pattern) {
    if (pattern.empty() || pattern[0] != '/') invalid(m, pattern, "a pattern must start with '/'");
    std::string_view body = pattern.substr(1);
    if (body.ends_with('/')) body.remove_suffix(1);
    std::vector<segment> out;
    while (!body.empty()) {
        auto slash = body.find('/');
        auto text = body.substr(0, slash);
        body = slash == std::string_view::npos ? std::string_view{} : body.substr(slash + 1);
        if (text.empty()) invalid(m, pattern, "empty path segment");
        if (!out.empty() && out.back().type == segment::rest)
            invalid(m, pattern, "a wildcard must be the last segment");
        if (text[0] == ':') {
            out.push_back(parse_param(m, pattern, text));
        } else if (text[0] == '*') {
            if (!is_name(text.substr(1))) invalid(m, pattern, "a wildcard needs a name: '*rest'");
            out.push_back({segment::rest, std::string(text.substr(1)), param_kind::rest});
        } else {
            if (text.find_first_of(":*?# <>{}") != std::string_view::npos)
                invalid(m, pattern,
                        "segment '" + std::string(text) + "' contains a reserved character");
            out.push_back({segment::literal, std::string(text)});
        }
        if (slash == std::string_view::npos) break;
    }
    return out;
}

std::string normalised(const std::vector<segment>& segs) {
    std::string out;
    for (auto& s : segs) {
        out += '/';
        if (s.type == segment::param) {
            out += ':' + s.text;
            if (s.kind == param_kind::integer) out += "<int>";
            if (s.kind == param_kind::uuid) out += "<uuid>";
        } else if (s.type == segment::rest) {
            out += '*' + s.text;
        } else {
            out += s.text;
        }
    }
    return out.empty() ? "/" : out;
}

std::string join(const std::vector<std::string>& parts, std::size_t from) {
    std::string out;
    for (std::size_t i = from; i < parts.size(); ++i) {
        if (i > from) out += '/';
        out += parts[i];
    }
    return out;
}

const node* walk(const node& n, const std::vector<std::string>& segs, std::size_t i,
                 std::vector<std::string>& values) {
    if (i == segs.size()) {
        if (n.has_routes()) return &n;
        if (n.wildcard && n.wildcard->has_routes()) {
            values.emplace_back();
            return n.wildcard.get();
        }
        return nullptr;
    }
    for (auto& [text, child] : n.statics) {
        if (text != segs[i]) continue;
        if (auto* found = walk(*child, segs, i + 1, values)) return found;
        break;
    }
    if (n.param && !segs[i].empty()) {
        values.push_back(segs[i]);
        if (auto* found = walk(*n.param, segs, i + 1, values)) return found;
        values.pop_back();
    }
    if (n.wildcard && n.wildcard->has_routes()) {
        values.push_back(join(segs, i));
        return n.wildcard.get();
    }
    return nullptr;
}

}  // namespace

bool node::has_routes() const {
    return std::any_of(routes.begin(), routes.end(), [](auto* r) { return r != nullptr; });
}

route_entry& route_table::insert(method m, std::string_view pattern, handler fn,
                                 route_options options) {
    if (static_cast<std::size_t>(m) >= routable_method_count)
        invalid(m, pattern, "method cannot be routed");
    if (!fn) invalid(m, pattern, "the handler is empty");
    auto segs = parse_pattern(m, pattern);
    auto norm = normalised(segs);
    auto route_name = std::string(to_string(m)) + " " + norm;

    std::vector<std::pair<std::string, param_kind>> params;
    node* at = &root_;
    for (auto& s : segs) {
        if (s.type == segment::literal) {
            auto it = std::find_if(at->statics.begin(), at->statics.end(),
                                   [&](auto& c) { return c.first == s.text; });
            if (it == at->statics.end()) {
                at->statics.emplace_back(s.text, std::make_unique<node>());
                it = std::prev(at->statics.end());
            }
            at = it->second.get();
            continue;
        }
        for (auto& [name, kind] : params)
            if (name == s.text)
                throw route_error("invalid route " + route_name + ": parameter '" + s.text +
                                  "' appears twice");
        params.emplace_back(s.text, s.kind);
        auto& child = s.type == segment::param ? at->param : at->wildcard;
        auto& name = s.type == segment::param ? at->param_name : at->wildcard_name;
        if (!child) {
            child = std::make_unique<node>();
            name = s.text;
            at->kind = s.kind;
            child->origin = norm;
        } else if (name != s.text || (s.type == segment::param && at->kind != s.kind)) {
            throw route_error("route " + route_name + " conflicts with " + child->origin +
                              ": one path position can have only one parameter name and type");
        }
        at = child.get();
    }
    auto& slot = at->routes[static_cast<std::size_t>(m)];
    if (slot) throw route_error("duplicate route " + route_name);

    route_entry& e = entries_.emplace_back();
    e.method = m;
    e.pattern = norm;
    e.max_body = options.max_body;
    e.fn = std::move(fn);
    e.middleware = std::move(options.middleware);
    e.params = std::move(params);
    slot = &e;
    return e;
}

route_table::found route_table::find(const std::vector<std::string>& segments) const {
    found result;
    result.values.reserve(segments.size());
    result.at = walk(root_, segments, 0, result.values);
    return result;
}

std::string normalise_pattern(std::string_view pattern) {
    return normalised(parse_pattern(method::get, pattern));
}

std::string join_patterns(std::string_view prefix, std::string_view pattern) {
    std::string out(prefix);
    while (out.ends_with('/')) out.pop_back();
    if (!pattern.empty() && pattern != "/") {
        if (!pattern.starts_with('/')) out += '/';
        out += pattern;
    }
    return out.empty() ? std::string("/") : out;
}

bool is_integer(std::string_view s) {
    std::int64_t v = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    return ec == std::errc{} && end == s.data() + s.size();
}

bool is_uuid(std::string_view s) {
    if (s.size() != 36) return false;
    for (std::size_t i = 0; i < s.size(); ++i) {
        bool dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash ? s[i] != '-' : !std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
    }
    return true;
}

}  // namespace keel::http::detail
