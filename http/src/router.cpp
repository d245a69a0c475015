#include <algorithm>
#include <deque>
#include <keel/framework/errors.hpp>
#include <keel/http/router.hpp>

#include "route_table.hpp"

namespace keel::http {

namespace detail {

struct chain {
    const std::vector<middleware>& global;
    const route_entry* route;
    const match_result& match;
};

namespace {

std::string allow_header(const node& n) {
    std::string out;
    auto add = [&](std::string_view m) {
        if (!out.empty()) out += ", ";
        out += m;
    };
    for (std::size_t i = 0; i < routable_method_count; ++i) {
        auto m = static_cast<method>(i);
        bool present = n.routes[i] != nullptr;
        if (m == method::head) present = present || n.routes[0] != nullptr;
        if (m == method::options) present = true;
        if (present) add(to_string(m));
    }
    return out;
}

const route_entry* any_route(const node& n) {
    for (const auto* r : n.routes)
        if (r) return r;
    return nullptr;
}

const route_entry* pick(const node& n, method m) {
    auto index = static_cast<std::size_t>(m);
    if (index < routable_method_count && n.routes[index]) return n.routes[index];
    if (m == method::head) return n.routes[static_cast<std::size_t>(method::get)];
    return nullptr;
}

std::string_view expected_form(param_kind kind) {
    return kind == param_kind::integer ? "an integer" : "a UUID";
}

response answer(const match_result& m, const request& req) {
    if (m.problem) {
        auto res = response::problem(*m.problem, req.request_id());
        if (!m.allow.empty()) res.header("Allow", m.allow);
        return res;
    }
    response res(status::no_content);
    res.header("Allow", m.allow);
    return res;
}

asio::awaitable<response> run_handler(const chain* c, request& req) {
    if (!c->route) co_return answer(c->match, req);
    std::optional<std::chrono::seconds> retry_after;
    try {
        co_return co_await c->route->fn(req);
    } catch (const problem_error& e) {
        co_return response::problem(e.problem(), req.request_id());
    } catch (const keel::unavailable_error& e) {
        // Logged where the outage is noticed (the Redis connection, the engine), once.
        req.log().debug("{} {}: {}", req.method_name(), req.path(), e.what());
        retry_after = e.retry_after();
    }
    auto res =
        response::problem(problem{status::service_unavailable,
                                  "a service this request needs is unavailable; retry later"},
                          req.request_id());
    res.header("Retry-After", std::to_string(std::max<std::int64_t>(1, retry_after->count())));
    co_return res;
}

}  // namespace
}  // namespace detail

asio::awaitable<response> next::operator()(request& req) const {
    const auto& c = *chain_;
    auto at = index_;
    if (at < c.global.size()) return c.global[at](req, next(chain_, index_ + 1));
    at -= c.global.size();
    const auto& groups = c.route ? c.route->group_middleware : c.match.group_middleware;
    if (at < groups.size()) return (*groups[at])(req, next(chain_, index_ + 1));
    at -= groups.size();
    if (c.route && at < c.route->middleware.size())
        return c.route->middleware[at](req, next(chain_, index_ + 1));
    return detail::run_handler(chain_, req);
}

struct router::impl {
    struct group_middleware {
        std::string prefix;  // normalised pattern; "/" covers everything
        middleware mw;
    };

    detail::route_table table;
    std::vector<middleware> global;
    std::deque<group_middleware> groups;  // stable addresses: routes point into it

    static bool covers(std::string_view prefix, std::string_view pattern) {
        return prefix == "/" || pattern == prefix ||
               (pattern.starts_with(prefix) && pattern[prefix.size()] == '/');
    }
    static bool literal(const std::string& prefix) {
        return prefix.find_first_of(":*") == std::string::npos;
    }
    static std::size_t depth(const std::string& prefix) {
        return prefix == "/"
                   ? 0
                   : static_cast<std::size_t>(std::count(prefix.begin(), prefix.end(), '/'));
    }
    // The groups over a pattern, or over a path that matches no route (by their literal
    // prefixes): outermost (shortest prefix) first, equal prefixes in the order they were
    // added.
    std::vector<const http::middleware*> groups_over(std::string_view pattern,
                                                     bool literal_only) const {
        std::vector<const group_middleware*> under;
        for (const auto& g : groups)
            if ((!literal_only || literal(g.prefix)) && covers(g.prefix, pattern))
                under.push_back(&g);
        std::stable_sort(under.begin(), under.end(),
                         [](auto* a, auto* b) { return depth(a->prefix) < depth(b->prefix); });
        std::vector<const http::middleware*> out;
        for (const auto* g : under) out.push_back(&g->mw);
        return out;
    }
    void attach_groups(detail::route_entry& e) const {
        e.group_middleware = groups_over(e.pattern, false);
    }
};

router::router() : impl_(std::make_unique<impl>()) {}
router::~router() = default;
router::router(router&&) noexcept = default;
router& router::operator=(router&&) noexcept = default;

router& router::add(http::method m, std::string_view pattern, handler h, route_options o) {
    auto& entry = impl_->table.insert(m, pattern, std::move(h), std::move(o));
    impl_->attach_groups(entry);
    return *this;
}

route_group router::group(std::string_view prefix) {
    return route_group(*this, detail::normalise_pattern(prefix));
}

void router::use_under(const std::string& prefix, middleware mw) {
    if (!mw) throw route_error("route_group::use: the middleware is empty");
    impl_->groups.push_back({prefix, std::move(mw)});
    for (auto& e : impl_->table.entries()) impl_->attach_groups(e);
}

route_group& route_group::use(middleware mw) {
    router_->use_under(prefix_, std::move(mw));
    return *this;
}

route_group& route_group::add(http::method m, std::string_view pattern, handler h,
                              route_options o) {
    router_->add(m, detail::join_patterns(prefix_, pattern), std::move(h), std::move(o));
    return *this;
}

route_group route_group::group(std::string_view prefix) const {
    return route_group(*router_, detail::normalise_pattern(detail::join_patterns(prefix_, prefix)));
}

router& router::use(middleware mw) {
    if (!mw) throw route_error("router::use: the middleware is empty");
    impl_->global.push_back(std::move(mw));
    return *this;
}

match_result router::match(request& req) const {
    req.set_route(nullptr);
    req.clear_params();
    match_result result;
    if (!req.path_error().empty()) {
        result.problem =
            problem{status::bad_request, "malformed request path: " + req.path_error()};
        return result;
    }
    auto found = impl_->table.find(req.path_segments());
    if (!found.at) {
        result.problem = problem{status::not_found, "no route matches " + std::string(req.path())};
        result.group_middleware = impl_->groups_over(req.path(), true);
        return result;
    }
    const auto* route = detail::pick(*found.at, req.method());
    if (!route) {
        result.allow = detail::allow_header(*found.at);
        if (const auto* sibling = detail::any_route(*found.at))
            result.group_middleware = sibling->group_middleware;
        if (req.method() != method::options)
            result.problem = problem{
                status::method_not_allowed,
                std::string(req.method_name()) + " is not allowed on " + std::string(req.path())};
        return result;
    }
    req.set_route(route);
    for (std::size_t i = 0; i < route->params.size() && i < found.values.size(); ++i) {
        auto& [name, kind] = route->params[i];
        auto& value = found.values[i];
        bool ok = kind == detail::param_kind::integer ? detail::is_integer(value)
                  : kind == detail::param_kind::uuid  ? detail::is_uuid(value)
                                                      : true;
        if (!ok) {
            result.problem = problem{
                status::bad_request,
                "path parameter '" + name + "' must be " + std::string(detail::expected_form(kind)),
                name};
            return result;
        }
        req.add_param(name, std::move(value));
    }
    result.route = route;
    return result;
}

asio::awaitable<response> router::dispatch(request& req, match_result m) const {
    const auto* route = m.problem ? nullptr : static_cast<const detail::route_entry*>(m.route);
    detail::chain c{impl_->global, route, m};
    co_return co_await next(&c, 0)(req);
}

asio::awaitable<response> router::handle(request& req) const {
    auto m = match(req);
    co_return co_await dispatch(req, std::move(m));
}

std::vector<const route_info*> router::routes() const {
    std::vector<const route_info*> out;
    for (auto& e : impl_->table.entries()) out.push_back(&e);
    return out;
}

}  // namespace keel::http
