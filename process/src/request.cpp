// Requests answered by a running process: the request's signal payload, the handler's side
// (receive, reply, refuse) and the stored answer's forms.

#include <keel/process/context.hpp>
#include <keel/process/detail/runtime.hpp>
#include <keel/process/request.hpp>

namespace keel::process {

int http_status(const ask_error& e) noexcept {
    switch (e.why) {
        case ask_error::reason::not_found:
            return 404;
        case ask_error::reason::final:
            return 409;
        case ask_error::reason::timeout:
            return 504;
        case ask_error::reason::refused:
            return 422;
    }
    return 500;
}

namespace detail {

nlohmann::json request_payload(std::string_view id, nlohmann::json body) {
    return nlohmann::json{{"request", id}, {"body", std::move(body)}};
}

request request_from(std::string path, const nlohmann::json& payload) {
    auto id = payload.is_object() ? payload.find("request") : payload.end();
    if (id == payload.end() || !id->is_string() || !payload.contains("body"))
        return request{{}, std::move(path), payload};  // a plain signal: nobody asks
    return request{id->get<std::string>(), std::move(path), payload["body"]};
}

nlohmann::json answer_value(nlohmann::json value) {
    return nlohmann::json{{"value", std::move(value)}};
}

nlohmann::json answer_refusal(std::string why) {
    return nlohmann::json{{"refused", std::move(why)}};
}

asio::awaitable<nlohmann::json> runtime::answer(runtime* rt, std::string request,
                                                nlohmann::json answer) {
    if (!rt->calls_)
        throw terminal_error("process " + rt->id() + " cannot answer request " + request +
                             ": it does not run in an engine");
    co_await rt->calls_->answer(std::move(request), std::move(answer));
    co_return nlohmann::json(true);
}

}  // namespace detail

durable<request> context::receive(std::string path) {
    auto arrived = wait<nlohmann::json>(path);
    auto payload = co_await arrived;
    co_return detail::request_from(std::move(path), payload);
}

namespace {

// Takes everything by value: the durable may be awaited after the caller's arguments are gone.
durable<void> answer_step(context& ctx, detail::runtime* rt, std::string name, std::string request,
                          nlohmann::json answer) {
    if (request.empty()) co_return;  // a plain signal: nobody awaits an answer
    auto body = [rt, request = std::move(request), answer = std::move(answer)] {
        return detail::runtime::answer(rt, request, answer);
    };
    auto step = ctx.run(std::move(name), std::move(body));
    co_await step;
}

}  // namespace

durable<void> context::reply(const request& r, nlohmann::json value) {
    return answer_step(*this, rt_, "reply " + r.id, r.id, detail::answer_value(std::move(value)));
}

durable<void> context::refuse(const request& r, std::string why) {
    return answer_step(*this, rt_, "refuse " + r.id, r.id, detail::answer_refusal(std::move(why)));
}

}  // namespace keel::process
