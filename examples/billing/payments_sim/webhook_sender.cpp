#include "webhook_sender.hpp"

#include <boost/asio/post.hpp>
#include <keel/framework/concurrency/combinators.hpp>
#include <keel/http/middleware.hpp>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace billing::sim {

namespace http = keel::http;

namespace {

http::client_options client_options_for(const settings& s) {
    http::client_options options;
    options.tls.ca_file = s.webhook_ca;
    options.request_timeout = std::chrono::seconds(5);
    options.connect_timeout = std::chrono::seconds(2);
    options.user_agent = "keel-payments-sim";
    return options;
}

void check_webhook_settings(const settings& s) {
    if (s.webhook_url.empty()) return;
    if (!s.webhook_url.starts_with("http://") && !s.webhook_url.starts_with("https://"))
        throw std::invalid_argument("--webhook-url: expected an http:// or https:// URL, got " +
                                    s.webhook_url);
    if (s.webhook_secret.empty())
        throw std::invalid_argument("--webhook-url needs --webhook-secret (the HMAC key)");
}

std::string event_body(const std::string& id, const std::string& reference) {
    nlohmann::json event = {{"type", "charge.succeeded"}, {"charge", id}, {"reference", reference}};
    return event.dump();
}

}  // namespace

webhook_sender::webhook_sender(keel::service& svc, settings& s, charge_book& book)
    : svc_(svc),
      book_(book),
      delay_(s.pending_delay),
      url_(s.webhook_url),
      secret_(s.webhook_secret) {
    check_webhook_settings(s);
    if (!url_.empty()) client_.emplace(svc, client_options_for(s));
}

void webhook_sender::start() {
    if (!client_)
        log_.warn("no --webhook-url: pending charges succeed after {} ms without a webhook",
                  std::chrono::duration_cast<std::chrono::milliseconds>(delay_).count());
    svc_.on_shutdown([this] { asio::post(svc_.executor(0), [this] { stopping_.cancel(); }); });
}

void webhook_sender::schedule(std::string id, std::string reference) {
    auto name = "webhook for " + id;
    svc_.spawn(0, std::move(name), [this, id = std::move(id), reference = std::move(reference)] {
        return deliver(id, reference);
    });
}

asio::awaitable<void> webhook_sender::deliver(std::string id, std::string reference) {
    if (!co_await pause(delay_)) co_return;
    if (!book_.settle(id)) co_return;
    log_.info("charge {} succeeded", id);
    if (!client_) co_return;
    auto body = event_body(id, reference);
    keel::duration backoff = first_backoff;
    for (int attempt = 1;; ++attempt) {
        if (co_await post_once(id, body, attempt)) co_return;
        if (!co_await pause(backoff)) break;
        backoff = std::min<keel::duration>(backoff * 2, max_backoff);
    }
    log_.warn("webhook for {} abandoned at shutdown", id);
}

// One attempt; true once it is answered 2xx.
asio::awaitable<bool> webhook_sender::post_once(const std::string& id, const std::string& body,
                                                int attempt) {
    http::client_request req;
    req.method = http::method::post;
    req.url = url_;
    req.body = body;
    req.cancel = stopping_.token();
    req.header("Content-Type", "application/json");
    req.header("X-Signature", http::sign(secret_, body));
    auto res = co_await client_->request(std::move(req));
    if (res && res->ok()) {
        log_.info("webhook for {} delivered (attempt {})", id, attempt);
        co_return true;
    }
    if (res)
        log_.warn("webhook for {}: attempt {} answered {}", id, attempt, res->status_code());
    else
        log_.warn("webhook for {}: attempt {} failed: {}", id, attempt, res.error().message);
    co_return false;
}

// Waits `d`; false when shutdown began first.
asio::awaitable<bool> webhook_sender::pause(keel::duration d) {
    auto token = stopping_.token();  // named: not a temporary inside co_await
    if (token.cancelled()) co_return false;
    try {
        auto wait = svc_.clock().sleep_for(d);
        co_await keel::concurrency::with_cancellation(token, std::move(wait));
    } catch (const std::exception&) {
        co_return false;
    }
    co_return !token.cancelled();
}

}  // namespace billing::sim
