#pragma once

/// @file
/// Controllers: a class that groups routes under a prefix, receives its dependencies by
/// constructor injection, and handles requests in member coroutines.
///
/// @code
///   struct order_controller {
///       using inject = keel::di::inject<order_repository&>;
///       explicit order_controller(order_repository& orders) : orders_(orders) {}
/// @endcode
///
/// @code
///       static void routes(keel::http::controller_routes<order_controller>& r) {
///           r.prefix("/orders");
///           r.get("/:id<int>", &order_controller::show);
///           r.post("/", &order_controller::create, {.max_body = 64 * 1024});
///       }
///       asio::awaitable<http::response> show(http::request& req);
///       asio::awaitable<http::response> create(http::request& req);
///     private:
///       order_repository& orders_;
///   };
/// @endcode
///
/// @code
///   keel::http::mount<order_controller>(router, container);  // resolved through DI, per request
///   keel::http::mount<order_controller>(router, instance);   // or an object the caller owns
/// @endcode
///
/// With DI, every request gets its own `di::scope` (reachable as `req.scope()` while the
/// handler runs); the controller is resolved from it, so it may be registered as a
/// singleton or per request, and per-request dependencies die with the request. Mounting a
/// controller the container does not know fails at start-up, not on the first request.

#include <boost/core/demangle.hpp>
#include <keel/di/container.hpp>
#include <keel/http/router.hpp>
#include <memory>
#include <string>
#include <string_view>
#include <typeinfo>
#include <vector>

namespace keel::http {

/// The routes of controller C, as declared by `C::routes`. Not thread-safe (start-up).
template <class C>
class controller_routes {
  public:
    /// A handler: a member coroutine of C.
    using member_handler = asio::awaitable<response> (C::*)(request&);
    /// One declared route.
    struct entry {
        /// The method.
        http::method method;
        /// The full pattern: the prefix and the route's path.
        std::string pattern;
        /// The member that handles it.
        member_handler handler;
        /// The route's options.
        route_options options;
    };

    /// The prefix every following route is declared under ("/orders").
    void prefix(std::string p) { prefix_ = std::move(p); }

    /// Declares a route at the prefix followed by `path` ("" or "/": the prefix itself).
    controller_routes& add(http::method m, std::string_view path, member_handler h,
                           route_options o = {}) {
        entries_.push_back({m, join(path), h, std::move(o)});
        return *this;
    }
    /// Declares a GET route (see add()).
    controller_routes& get(std::string_view p, member_handler h, route_options o = {}) {
        return add(method::get, p, h, std::move(o));
    }
    /// Declares a POST route (see add()).
    controller_routes& post(std::string_view p, member_handler h, route_options o = {}) {
        return add(method::post, p, h, std::move(o));
    }
    /// Declares a PUT route (see add()).
    controller_routes& put(std::string_view p, member_handler h, route_options o = {}) {
        return add(method::put, p, h, std::move(o));
    }
    /// Declares a PATCH route (see add()).
    controller_routes& patch(std::string_view p, member_handler h, route_options o = {}) {
        return add(method::patch, p, h, std::move(o));
    }
    /// Declares a DELETE route (see add()).
    controller_routes& del(std::string_view p, member_handler h, route_options o = {}) {
        return add(method::del, p, h, std::move(o));
    }

    /// The routes declared so far, in order.
    const std::vector<entry>& entries() const { return entries_; }

  private:
    std::string join(std::string_view path) const {
        if (path.empty() || path == "/") return prefix_.empty() ? std::string("/") : prefix_;
        return prefix_ + std::string(path);
    }

    std::string prefix_;
    std::vector<entry> entries_;
};

/// A type that declares its routes with `static void routes(controller_routes<C>&)`.
template <class C>
concept controller = requires(controller_routes<C>& r) {
    C::routes(r);
};

namespace detail {
template <class C>
std::vector<typename controller_routes<C>::entry> controller_entries() {
    controller_routes<C> r;
    C::routes(r);
    if (r.entries().empty())
        throw route_error(std::string("controller ") + boost::core::demangle(typeid(C).name()) +
                          " declares no routes");
    return r.entries();
}
}  // namespace detail

/// Mounts a controller object that the caller owns and keeps alive as long as the router.
template <controller C>
router& mount(router& r, C& instance) {
    for (auto& e : detail::controller_entries<C>()) {
        auto h = e.handler;
        r.add(
            e.method, e.pattern, [obj = &instance, h](request& req) { return (obj->*h)(req); },
            std::move(e.options));
    }
    return r;
}

namespace detail {
struct scope_binding {
    request& req;
    ~scope_binding() { req.set_scope(nullptr); }
};

template <class C>
asio::awaitable<response> call_in_scope(const di::container* c,
                                        typename controller_routes<C>::member_handler h,
                                        request& req) {
    auto scope = c->make_scope();
    req.set_scope(&scope);
    scope_binding bound{req};
    C& obj = scope.template get<C>();
    co_return co_await (obj.*h)(req);
}
}  // namespace detail

/// Mounts a controller resolved from `container` in a fresh scope for every request (the
/// router keeps its own handle on the container's graph). Throws route_error if C is not
/// registered, so a forgotten registration fails start-up, not the first request.
template <controller C>
router& mount(router& r, const di::container& container) {
    if (!container.template contains<C>())
        throw route_error("cannot mount controller " + boost::core::demangle(typeid(C).name()) +
                          ": it is not registered in the DI container");
    auto shared = std::make_shared<const di::container>(container);
    for (auto& e : detail::controller_entries<C>()) {
        auto h = e.handler;
        r.add(
            e.method, e.pattern,
            [shared, h](request& req) { return detail::call_in_scope<C>(shared.get(), h, req); },
            std::move(e.options));
    }
    return r;
}

}  // namespace keel::http
