#include <keel/http/problem.hpp>
#include <keel/http/request.hpp>
#include <keel/http/response.hpp>
#include <keel/http/signal_route.hpp>
#include <memory>

namespace keel::http {

namespace {

using group_list = std::vector<const signals::signal_group*>;

asio::awaitable<response> emit_by_path(std::shared_ptr<const group_list> groups, request& req) {
    std::string path = "/" + std::string(req.param("path"));
    std::vector<std::string> values;
    const signals::signal_base* found = nullptr;
    for (const auto* g : *groups)
        if ((found = g->find(path, values))) break;
    if (!found) throw problem_error(status::not_found, "no signal has the path " + path);
    nlohmann::json payload;
    if (!req.body().empty()) {
        auto doc = req.json_document();
        if (!doc) throw problem_error(std::move(doc).error());
        payload = **doc;
    }
    signals::emit_options options;
    if (auto key = req.idempotency_key()) options.key = std::string(*key);
    if (req.trace().valid()) options.trace = req.trace().traceparent();
    signals::emit_result sent;
    try {
        sent = co_await found->emit_json(path, std::move(payload), std::move(options));
    } catch (const signals::emit_error& e) {
        throw problem_error(status::bad_request, e.what());
    }
    co_return response::json({{"delivered", sent.reached}, {"duplicate", sent.duplicate}});
}

}  // namespace

void add_signal_route(router& r, std::vector<const signals::signal_group*> groups,
                      signal_route_options options) {
    auto shared = std::make_shared<const group_list>(std::move(groups));
    r.post(
        options.prefix + "/*path", [shared](request& req) { return emit_by_path(shared, req); },
        std::move(options.route));
}

signals::emit_options emit_options_from(const request& req, std::string natural_key) {
    signals::emit_options o;
    auto header = req.idempotency_key();
    o.key = header && !header->empty() ? std::string(*header) : std::move(natural_key);
    if (req.trace().valid()) o.trace = req.trace().traceparent();
    return o;
}

}  // namespace keel::http
