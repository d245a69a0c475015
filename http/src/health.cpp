#include <fmt/format.h>

#include <keel/framework/prometheus.hpp>
#include <keel/framework/redis/connection.hpp>
#include <keel/http/builtin.hpp>
#include <keel/http/middleware.hpp>

namespace keel::http {

void health::add_check(std::string name, check c) {
    if (!c) throw std::invalid_argument("health::add_check: the check '" + name + "' is empty");
    checks_.emplace_back(std::move(name), std::move(c));
}

asio::awaitable<health::report> health::check_ready() const {
    report r;
    r.ready = !draining();
    if (draining()) r.checks.emplace_back("shutdown", "draining");
    for (auto& [name, check] : checks_) {
        std::string outcome = "ok";
        try {
            auto result = co_await check();
            if (!result) outcome = result.error().empty() ? "failed" : result.error();
        } catch (const std::exception& e) {
            outcome = e.what();
        }
        if (outcome != "ok") r.ready = false;
        r.checks.emplace_back(name, std::move(outcome));
    }
    co_return r;
}

namespace {
asio::awaitable<keel::expected<void, std::string>> ping(redis::connection* c,
                                                        std::chrono::milliseconds timeout) {
    auto pong = co_await c->ping(timeout);
    if (!pong) co_return keel::unexpected(std::string(pong.error().what()));
    if (c->write_refusal()) {
        auto probe = co_await c->probe_writes(timeout);
        if (auto refusal = c->write_refusal())
            co_return keel::unexpected("refusing writes: " + *refusal);
        if (!probe) co_return keel::unexpected(std::string(probe.error().what()));
    }
    co_return keel::expected<void, std::string>{};
}
}  // namespace

std::function<asio::awaitable<std::string>()> redis_metrics(redis::connection& connection) {
    return [c = &connection]() -> asio::awaitable<std::string> {
        auto stats = c->stats();
        std::string out;
        prometheus::header(out, "keel_redis_refused_writes_total", "counter",
                           "Requests Redis refused because it accepted no writes, by Redis's "
                           "reason: oom (maxmemory), misconf (a failed RDB or AOF write), "
                           "readonly (a replica).");
        for (auto [reason, count] :
             {std::pair{"oom", stats.refused_oom}, std::pair{"misconf", stats.refused_misconf},
              std::pair{"readonly", stats.refused_readonly}})
            out +=
                fmt::format("keel_redis_refused_writes_total{{reason=\"{}\"}} {}\n", reason, count);
        co_return out;
    };
}

health::check redis_check(redis::connection& connection, std::chrono::milliseconds timeout) {
    return [c = &connection, timeout] { return ping(c, timeout); };
}

void add_builtin_routes(router& r, metrics& m, health& h) {
    r.get("/healthz", [](request&) -> asio::awaitable<response> {
        co_return response::json({{"status", "ok"}});
    });
    r.get("/readyz", [&h](request&) -> asio::awaitable<response> {
        auto report = co_await h.check_ready();
        nlohmann::json checks = nlohmann::json::object();
        for (auto& [name, outcome] : report.checks) checks[name] = outcome;
        co_return response::json(
            {{"status", report.ready ? "ready" : "not ready"}, {"checks", checks}},
            report.ready ? status::ok : status::service_unavailable);
    });
    r.get("/metrics", [&m](request&) -> asio::awaitable<response> {
        auto text = co_await m.collect();
        co_return response::text(std::move(text), status::ok,
                                 "text/plain; version=0.0.4; charset=utf-8");
    });
}

void install_defaults(router& r, metrics& m, health& h) {
    r.use(trace_context());
    r.use(request_id());
    r.use(access_log());
    r.use(observe(m));
    r.use(error_mapping());
    add_builtin_routes(r, m, h);
}

}  // namespace keel::http
