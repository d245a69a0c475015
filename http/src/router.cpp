#include <keel/http/router.hpp>

#include "route_table.hpp"

namespace keel::http {

namespace detail {

struct chain {
    const std::vector<middleware>& global;
    const std::vector<middleware>* local;
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
    try {
        co_return co_await c->route->fn(req);
    } catch (const problem_error& e) {
        co_return response::problem(e.problem(), req.request_id());
    }
}

}  // namespace
}  // namespace detail

asio::awaitable<response> next::operator()(request& req) const {
    const auto& c = *chain_;
    if (index_ < c.global.size()) return c.global[index_](req, next(chain_, index_ + 1));
    auto local = index_ - c.global.size();
    if (c.local && local < c.local->size()) return (*c.local)[local](req, next(chain_, index_ + 1));
    return detail::run_handler(chain_, req);
}

struct router::impl {
    detail::route_table table;
    std::vector<middleware> global;
};

router::router() : impl_(std::make_unique<impl>()) {}
router::~router() = default;
router::router(router&&) noexcept = default;
router& router::operator=(router&&) noexcept = default;

router& router::add(http::method m, std::string_view pattern, handler h, route_options o) {
    impl_->table.insert(m, pattern, std::move(h), std::move(o));
    return *this;
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
    auto found = impl_->table.find(req.path());
    if (found.malformed) {
        result.problem = problem{status::bad_request, "malformed request path"};
        return result;
    }
    if (!found.at) {
        result.problem = problem{status::not_found, "no route matches " + std::string(req.path())};
        return result;
    }
    const auto* route = detail::pick(*found.at, req.method());
    if (!route) {
        result.allow = detail::allow_header(*found.at);
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
    detail::chain c{impl_->global, route ? &route->middleware : nullptr, route, m};
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
