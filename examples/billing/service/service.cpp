#include "service.hpp"

#include <algorithm>
#include <keel/framework/log.hpp>
#include <keel/http/middleware.hpp>
#include <keel/process/cron.hpp>
#include <keel/process/schedule.hpp>
#include <stdexcept>

namespace billing {

namespace {

using refusal = std::optional<std::string>;

refusal provider_url_error(const std::string& url) {
    if (url.starts_with("https://") || url.starts_with("http://")) return std::nullopt;
    return "must be the provider's https:// URL, got '" + url + "'";
}

refusal provider_secret_error(const std::string& secret) {
    if (!secret.empty()) return std::nullopt;
    return "required: the provider's webhooks are signed with it";
}

refusal dunning_error(const std::string& list) {
    try {
        parse_dunning(list);
        return std::nullopt;
    } catch (const std::invalid_argument& e) {
        return e.what();
    }
}

refusal report_cron_error(const std::string& cron) {
    auto fields = std::count(cron.begin(), cron.end(), ' ') + 1;
    if (!cron.empty() && cron.front() != '@' && fields != 6)
        return "six fields, seconds first (\"0 55 23 * * *\"), got '" + cron + "'";
    if (auto parsed = keel::process::cron_schedule::parse(cron, "UTC"); !parsed)
        return parsed.error().message;
    return std::nullopt;
}

}  // namespace

void declare_settings(keel::app::settings_schema<settings>& s) {
    s.add("provider_url", &settings::provider_url,
          "the payment provider's base URL (https://...); charges go to <url>/charges",
          keel::app::setting_check<std::string>(provider_url_error))
        .add("provider_ca", &settings::provider_ca,
             "PEM file of the CA that signs the provider's certificate (default: the system's)")
        .add("provider_secret", &settings::provider_secret,
             "HMAC key of the provider's webhooks: X-Signature: sha256=<hex HMAC-SHA256 of the "
             "body>",
             keel::app::setting_check<std::string>(provider_secret_error))
        .add("provider_rate", &settings::provider_rate,
             "calls per second to the provider, across every worker", {.min = 1, .max = 100000})
        .add("period", &settings::period, "the billing period (30d, 1h, ...)",
             {.min = 0.001, .max = 3.2e7})
        .add("trial", &settings::trial, "the trial before the first period (0s: none)",
             {.min = 0, .max = 3.2e7})
        .add("dunning", &settings::dunning,
             "the waits before each retry of a declined charge, e.g. 1d,3d,5d (empty: none)",
             keel::app::setting_check<std::string>(dunning_error))
        .add("report_cron", &settings::report_cron,
             "when the daily report runs, in UTC: six cron fields with seconds",
             keel::app::setting_check<std::string>(report_cron_error));
}

void add_services(keel::di::registry& registry) {
    registry.singleton<customer_book>()
        .singleton<subscription_book>()
        .singleton<invoice_book>()
        .singleton<report_book>()
        .singleton<terms>([](settings& s) { return terms_of(s); })
        .singleton<provider_limit>([](settings& s) { return provider_limit_of(s); })
        .singleton<payment_provider, http_provider>();
}

void add_runtime(keel::di::registry& registry) {
    registry.singleton<billing_runtime>();
}

void add_queues(keel::process::engine& engine) {
    engine.add_queue(charges);
}

asio::awaitable<void> schedule_report(keel::process::engine& engine, std::string cron) {
    keel::process::schedule_options daily{
        .name = "daily-report", .cron = std::move(cron), .zone = "UTC"};
    co_await engine.schedule(std::move(daily), reporting);
}

billing_runtime::billing_runtime(keel::service& service, keel::process::engine& engine, settings& s)
    : service_(service), engine_(engine), cron_(s.report_cron) {}

void billing_runtime::start() {
    add_queues(engine_);
    // Declared once the service runs; until the store answers, tried again.
    service_.spawn(0, "daily-report schedule", [this]() -> asio::awaitable<void> {
        keel::log::logger log("billing");
        keel::duration wait = std::chrono::milliseconds(250);
        while (!service_.stopping()) {
            try {
                co_await schedule_report(engine_, cron_);
                log.info("daily report scheduled: {} UTC", cron_);
                co_return;
            } catch (const std::invalid_argument&) {
                throw;  // a bad declaration does not get better
            } catch (const std::exception& e) {
                log.warn("the daily report is not scheduled yet: {}", e.what());
            }
            co_await service_.clock().sleep_for(wait);
            wait = std::min<keel::duration>(2 * wait, std::chrono::seconds(30));
        }
    });
}

void require_signatures(keel::http::router& router, const keel::di::container& services) {
    const auto& secret = services.get<settings>().provider_secret;  // checked: not empty
    router.group("/webhooks").use(keel::http::webhook_signature({.secret = secret}));
}

}  // namespace billing
