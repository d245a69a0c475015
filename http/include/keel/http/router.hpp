#pragma once

/// @file
/// The router: routes by method and path, and the middleware chain around handlers.
///
/// Patterns are absolute paths made of segments:
/// @code
///   /orders              a static segment
///   /orders/:id          a parameter (any non-empty segment, decoded)
///   /orders/:id<int>     a typed parameter: <int> (signed 64-bit), <uuid>, <string>;
///                        a value that does not convert is answered 400 naming it
///   /files/*path         a trailing wildcard: the rest of the path, possibly empty
/// @endcode
/// A trailing slash is not significant: "/orders/" and "/orders" are the same route.
///
/// Matching prefers, at each segment, a static segment, then the parameter, then the
/// wildcard, and backtracks if the rest of the path does not match. A path that matches
/// no route is 404; a path that matches with another method is 405 with `Allow`. HEAD is
/// served by the GET route (without the body) unless a HEAD route exists; OPTIONS is
/// answered 204 with `Allow` unless an OPTIONS route exists.
///
/// Registration is explicit code and fails loudly: an invalid pattern, a route declared
/// twice, or two parameters with different names or types at the same position throw
/// route_error naming both routes, so a service that starts serves every route it
/// declared.
///
/// Middleware wraps handlers: `use()` adds router-wide middleware (it also sees 404/405
/// answers), `group(prefix).use()` middleware for every route under a path prefix, and
/// `route_options::middleware` middleware for one route. Each middleware receives the
/// request and `next`, and may act before and after the rest of the chain:
///
/// @code
///   router.use([](http::request& req, http::next next) -> asio::awaitable<http::response> {
///       auto res = co_await next(req);
///       res.header("X-Frame-Options", "DENY");
///       co_return res;
///   });
/// @endcode
///
/// Guard a part of the API with a group, never by testing the path in router-wide
/// middleware: a group's middleware is attached to the routes themselves, so whatever
/// spelling of a path reaches a handler (percent-encoded, trailing slash) has passed it.
///
/// @code
///   router.group("/webhooks").use(http::webhook_signature({.secret = secret}));
/// @endcode
///
/// Paths are decoded once, by the request (request::path()); a path with an encoded '/',
/// a control character or a dot segment is answered 400 (see request::path_error()).
///
/// Thread-safety: register routes before the server starts; afterwards the router is
/// read-only and may be used from every thread.

#include <boost/asio/awaitable.hpp>
#include <cstddef>
#include <functional>
#include <keel/http/request.hpp>
#include <keel/http/response.hpp>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace keel::http {

namespace asio = boost::asio;

/// A route's handler: answers a request, whose path parameters are set.
using handler = std::function<asio::awaitable<response>(request&)>;

namespace detail {
struct chain;
}

/// The rest of the middleware chain, as seen by a middleware. Cheap to copy.
class next {
  public:
    /// Runs the rest of the chain, the handler last, on `req`.
    asio::awaitable<response> operator()(request& req) const;

  private:
    friend class router;
    next(const detail::chain* c, std::size_t index) : chain_(c), index_(index) {}
    const detail::chain* chain_;
    std::size_t index_;
};

/// A middleware: receives the request and the rest of the chain; see the file's description.
using middleware = std::function<asio::awaitable<response>(request&, next)>;

/// Options of one route.
struct route_options {
    /// Largest accepted body in bytes; default: server_options::max_body_bytes (1 MiB).
    /// A larger body is answered 413 before it is read.
    std::optional<std::size_t> max_body;
    /// Middleware for this route only, run inside the router-wide middleware, in order.
    std::vector<http::middleware> middleware;
};

/// What a request can learn about the route that matched it.
struct route_info {
    /// The route's method.
    http::method method;
    std::string pattern;  ///< as registered, normalised ("/orders/:id<int>")
    /// The route's body limit; nullopt: the server's.
    std::optional<std::size_t> max_body;
};

/// A route that cannot be registered; what() says which and why.
class route_error : public std::invalid_argument {
  public:
    using std::invalid_argument::invalid_argument;
};

/// The outcome of matching a request, before its body is read. Without a route the
/// request is answered without a handler: `problem` (400 bad parameter, 404, 405 with
/// `allow`), or 204 with `allow` for an automatic OPTIONS.
struct match_result {
    /// The matched route; nullptr when there is none.
    const route_info* route = nullptr;
    /// The answer without a route: 400, 404 or 405.
    std::optional<http::problem> problem;
    /// The Allow field's value for a 405 or an automatic OPTIONS.
    std::string allow;
    /// Without a route (404, 405, OPTIONS): the middleware of the groups the path lies under,
    /// outermost first, which run before the answer (route_group::use).
    std::vector<const middleware*> group_middleware;
};

class router;

/// The routes under a path prefix, made by router::group(). Holds a reference to its router.
class route_group {
  public:
    /// Middleware for every route whose pattern lies under the prefix (whole segments:
    /// "/webhooks" covers "/webhooks" and "/webhooks/payment", not "/webhooks2"), whether it
    /// is registered before or after, here or by any other means (controllers, the signal
    /// route). It runs inside router-wide middleware and outside the route's own; groups
    /// nest outermost (shortest prefix) first. A request under the prefix that matches no
    /// route (404, 405, and OPTIONS, which answers the allowed methods) meets it too before it
    /// is answered, so a guard decides first: without its credentials nobody learns which
    /// paths and methods exist (for a prefix with parameters, only paths that match a route
    /// pattern).
    route_group& use(middleware mw);

    /// Registers a route at prefix + pattern ("/payment" under "/webhooks").
    route_group& add(http::method m, std::string_view pattern, handler h, route_options o = {});
    /// Registers a GET route under the prefix.
    route_group& get(std::string_view p, handler h, route_options o = {}) {
        return add(method::get, p, std::move(h), std::move(o));
    }
    /// Registers a POST route under the prefix.
    route_group& post(std::string_view p, handler h, route_options o = {}) {
        return add(method::post, p, std::move(h), std::move(o));
    }

    /// A group nested in this one.
    route_group group(std::string_view prefix) const;
    /// The group's prefix.
    const std::string& prefix() const { return prefix_; }

  private:
    friend class router;
    route_group(router& r, std::string prefix) : router_(&r), prefix_(std::move(prefix)) {}
    router* router_;
    std::string prefix_;
};

/// Routes requests by method and path to handlers, through middleware; see the file's description.
class router {
  public:
    router();
    ~router();
    ///@{
    /// Moves the routes.
    router(router&&) noexcept;
    router& operator=(router&&) noexcept;
    ///@}

    /// Registers a route. Throws route_error on an invalid pattern or a conflict with a route
    /// already registered.
    router& add(http::method m, std::string_view pattern, handler h, route_options o = {});
    /// Registers a GET route (see add()).
    router& get(std::string_view p, handler h, route_options o = {}) {
        return add(method::get, p, std::move(h), std::move(o));
    }
    /// Registers a POST route (see add()).
    router& post(std::string_view p, handler h, route_options o = {}) {
        return add(method::post, p, std::move(h), std::move(o));
    }
    /// Registers a PUT route (see add()).
    router& put(std::string_view p, handler h, route_options o = {}) {
        return add(method::put, p, std::move(h), std::move(o));
    }
    /// Registers a PATCH route (see add()).
    router& patch(std::string_view p, handler h, route_options o = {}) {
        return add(method::patch, p, std::move(h), std::move(o));
    }
    /// Registers a DELETE route (see add()).
    router& del(std::string_view p, handler h, route_options o = {}) {
        return add(method::del, p, std::move(h), std::move(o));
    }

    /// Router-wide middleware, outermost first.
    router& use(middleware mw);

    /// The routes under `prefix` ("/webhooks"; "/" is every route), to attach middleware to
    /// or register routes in. Throws route_error on a prefix that is not a valid pattern.
    route_group group(std::string_view prefix);

    /// Finds the route for the request and records it and its parameters on the request.
    match_result match(request& req) const;
    /// Runs the middleware chain and the handler of a matched request (body already read).
    asio::awaitable<response> dispatch(request& req, match_result m) const;
    /// match() then dispatch(): handles a complete request.
    asio::awaitable<response> handle(request& req) const;

    /// Every registered route, in registration order.
    std::vector<const route_info*> routes() const;

  private:
    friend class route_group;
    void use_under(const std::string& prefix, middleware mw);

    struct impl;
    std::unique_ptr<impl> impl_;
};

}  // namespace keel::http
