#include <algorithm>
#include <charconv>
#include <keel/http/problem.hpp>
#include <keel/http/request.hpp>
#include <keel/http/response.hpp>
#include <keel/process/ask_route.hpp>
#include <keel/process/request.hpp>
#include <memory>
#include <stdexcept>

namespace keel::process {

namespace {

struct ask_route {
    engine& eng;
    std::vector<std::string> paths;
    ask_route_options options;
};

std::chrono::milliseconds timeout_of(const http::request& req, const ask_route_options& o) {
    auto text = req.query("timeout_ms");
    if (!text) return o.timeout;
    std::uint64_t ms = 0;
    auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), ms);
    if (ec != std::errc() || end != text->data() + text->size() || ms == 0 ||
        ms > static_cast<std::uint64_t>(o.max_timeout.count()))
        throw http::problem_error(http::status::bad_request,
                                  "timeout_ms must be a whole number of milliseconds, 1 to " +
                                      std::to_string(o.max_timeout.count()),
                                  "timeout_ms");
    return std::chrono::milliseconds(ms);
}

asio::awaitable<http::response> ask_by_path(std::shared_ptr<const ask_route> route,
                                            http::request& req) {
    std::string path = "/" + std::string(req.param("path"));
    if (std::find(route->paths.begin(), route->paths.end(), path) == route->paths.end())
        throw http::problem_error(http::status::not_found, "no request has the path " + path);
    auto instance = req.query("instance");
    if (!instance || instance->empty())
        throw http::problem_error(http::status::bad_request,
                                  "the query parameter instance (the process instance to ask) "
                                  "is missing",
                                  "instance");
    ask_options options;
    options.timeout = timeout_of(req, route->options);
    if (auto key = req.idempotency_key(); key && !key->empty())
        options.id = path + " " + std::string(*key);
    nlohmann::json body;
    if (!req.body().empty()) {
        auto doc = req.json_document();
        if (!doc) throw http::problem_error(std::move(doc).error());
        body = **doc;
    }
    std::string id(*instance);
    auto answer = co_await route->eng.ask(id, std::move(path), std::move(body), std::move(options));
    if (!answer)
        throw http::problem_error(static_cast<http::status>(http_status(answer.error())),
                                  answer.error().message);
    co_return http::response::json({{"instance", std::move(id)}, {"answer", std::move(*answer)}});
}

void check(const std::vector<std::string>& paths, const ask_route_options& o) {
    if (paths.empty()) throw std::invalid_argument("ask route: no request paths given");
    for (const auto& p : paths)
        if (p.size() < 2 || p.front() != '/')
            throw std::invalid_argument("ask route: request path '" + p +
                                        "' must start with '/' and name something");
    if (o.timeout.count() <= 0 || o.timeout > o.max_timeout)
        throw std::invalid_argument("ask route: timeout must be positive and at most max_timeout");
}

}  // namespace

void add_ask_route(http::router& r, engine& eng, std::vector<std::string> paths,
                   ask_route_options options) {
    check(paths, options);
    auto route_opts = std::move(options.route);
    auto prefix = options.prefix;
    auto shared =
        std::make_shared<const ask_route>(ask_route{eng, std::move(paths), std::move(options)});
    r.post(
        prefix + "/*path", [shared](http::request& req) { return ask_by_path(shared, req); },
        std::move(route_opts));
}

}  // namespace keel::process
