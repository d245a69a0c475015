#include <array>
#include <cctype>
#include <chrono>
#include <keel/http/metrics.hpp>
#include <keel/http/middleware.hpp>
#include <memory>
#include <random>

#include "uri.hpp"

namespace keel::http {

namespace {

bool is_sane_id(std::string_view id) {
    if (id.empty() || id.size() > 128) return false;
    for (char c : id) {
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == ':' || c == '-';
        if (!ok) return false;
    }
    return true;
}

std::string random_id() {
    thread_local std::mt19937_64 engine{std::random_device{}()};
    static constexpr char hex[] = "0123456789abcdef";
    std::string out(32, '0');
    for (int half = 0; half < 2; ++half) {
        auto bits = engine();
        for (int i = 0; i < 16; ++i) out[half * 16 + i] = hex[(bits >> (i * 4)) & 0xf];
    }
    return out;
}

response internal_error(const request& req) {
    return response::problem(
        problem{status::internal_server_error,
                "the server failed to handle the request; quote the request id when reporting it"},
        req.request_id());
}

}  // namespace

middleware request_id(std::string header) {
    return [header = std::move(header)](request& req, next n) -> asio::awaitable<response> {
        auto incoming = req.header(header);
        req.set_request_id(incoming && is_sane_id(*incoming) ? std::string(*incoming)
                                                             : random_id());
        auto res = co_await n(req);
        res.header(header, req.request_id());
        co_return res;
    };
}

middleware trace_context() {
    // Not a coroutine: the chain's rest is returned, not awaited here (one frame less per
    // request). Without a parent the request's own trace is made when first read.
    return [](request& req, next n) -> asio::awaitable<response> {
        auto parent = trace::parse_traceparent(req.header("traceparent").value_or(""),
                                               req.header("tracestate").value_or(""));
        if (parent) req.set_trace(trace::child_of(*parent));
        return n(req);
    };
}

namespace {

bool names_a_credential(std::string_view raw_name) {
    std::string name;
    for (char c : raw_name) name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (std::string_view word : {"token", "secret", "password", "passwd", "key", "auth", "sig",
                                  "credential", "session", "code"})
        if (name.find(word) != std::string::npos) return true;
    return false;
}

}  // namespace

std::string loggable_target(const request& req) {
    auto target = req.target();
    auto mark = target.find('?');
    if (mark == std::string_view::npos) return std::string(target);
    std::string out(target.substr(0, mark + 1));
    auto query = target.substr(mark + 1);
    for (std::size_t start = 0;;) {
        auto end = query.find('&', start);
        auto pair = query.substr(start, end == std::string_view::npos ? end : end - start);
        auto eq = pair.find('=');
        // The name as sent and decoded: "%74oken" hides nothing.
        auto name = pair.substr(0, eq);
        auto decoded = detail::percent_decode(name, true);
        bool hidden = names_a_credential(name) || !decoded || names_a_credential(*decoded);
        if (eq == std::string_view::npos || !hidden)
            out += pair;
        else
            out.append(name).append("=***");
        if (end == std::string_view::npos) return out;
        out += '&';
        start = end + 1;
    }
}

middleware access_log() {
    return [](request& req, next n) -> asio::awaitable<response> {
        if (!log::enabled(log::level::info)) co_return co_await n(req);
        auto start = std::chrono::steady_clock::now();
        auto res = co_await n(req);
        std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - start;
        req.log().info("{} {} {} {} bytes {:.3f} ms", req.method_name(), loggable_target(req),
                       to_int(res.status()), res.body().size(), took.count());
        co_return res;
    };
}

middleware error_mapping() {
    return [](request& req, next n) -> asio::awaitable<response> {
        try {
            co_return co_await n(req);
        } catch (const problem_error& e) {
            co_return response::problem(e.problem(), req.request_id());
        } catch (const std::exception& e) {
            req.log().error("unhandled exception in {} {}: {}", req.method_name(),
                            loggable_target(req), e.what());
            co_return internal_error(req);
        } catch (...) {
            req.log().error("unhandled exception in {} {}: not a std::exception", req.method_name(),
                            loggable_target(req));
            co_return internal_error(req);
        }
    };
}

middleware observe(metrics& m) {
    return [&m](request& req, next n) -> asio::awaitable<response> {
        auto start = std::chrono::steady_clock::now();
        auto res = co_await n(req);
        m.observe(req.route(), res.status(), std::chrono::steady_clock::now() - start);
        co_return res;
    };
}

middleware webhook_signature(signature_options options) {
    if (options.secret.empty())
        throw std::invalid_argument("webhook_signature: the secret must not be empty");
    return [opts = std::move(options)](request& req, next n) -> asio::awaitable<response> {
        auto value = req.header(opts.header);
        if (!value || !verify_signature(opts.secret, req.body(), *value, opts.prefix))
            co_return response::problem(
                problem{status::unauthorized, "missing or invalid signature in " + opts.header},
                req.request_id());
        co_return co_await n(req);
    };
}

middleware bearer_token(std::string token) {
    auto check = std::make_shared<const bearer_check>(token);
    return [check](request& req, next n) -> asio::awaitable<response> {
        auto given = req.header("Authorization");
        if (!given || !(*check)(*given)) {
            auto res = response::problem(
                problem{status::unauthorized, "missing or wrong bearer token in Authorization"},
                req.request_id());
            res.header("WWW-Authenticate", "Bearer");
            co_return res;
        }
        co_return co_await n(req);
    };
}

}  // namespace keel::http
