#pragma once

// What keel-billing is made of, for main.cpp's application and the unit tests' environment:
// its settings, its services, its processes, the queue and schedule it runs, and the
// signature check of the provider's webhooks.

#include <keel/app/settings.hpp>
#include <keel/di/container.hpp>
#include <keel/framework/service.hpp>
#include <keel/http/router.hpp>
#include <keel/process/engine.hpp>

#include "domain.hpp"
#include "processes.hpp"
#include "provider.hpp"

namespace billing {

// --provider-url, --provider-ca, --provider-secret, --provider-rate, --period, --trial,
// --dunning, --report-cron. A bad URL, a missing secret, a --dunning list or a cron
// expression that cannot be read stops the start naming the option (exit 2).
void declare_settings(keel::app::settings_schema<settings>& s);

// The books, the terms (from the settings), the provider's
// limit and the provider (HTTPS; tests replace payment_provider with a fake).
void add_services(keel::di::registry& registry);

// The component that registers the queue and declares the schedule when the service starts
// (it needs keel::service, which unit tests do not have).
void add_runtime(keel::di::registry& registry);

// The processes, listed once: main.cpp's application and the tests' environment take them
// from here.
template <class Service>
Service& add_durable(Service& service) {
    return service.processes(subscribing, invoicing, reporting);
}

// The queues the processes start on: before the engine runs.
void add_queues(keel::process::engine& engine);

// The daily report's schedule ("daily-report", UTC), declared (or changed) on the engine.
asio::awaitable<void> schedule_report(keel::process::engine& engine, std::string cron);

// Registers the queue before the engine runs, and declares the daily report's schedule once
// the service runs (a schedule is a process: declaring it again changes nothing).
class billing_runtime {
  public:
    using inject = keel::di::inject<keel::service&, keel::process::engine&, settings&>;
    billing_runtime(keel::service& service, keel::process::engine& engine, settings& s);

    void start();

  private:
    keel::service& service_;
    keel::process::engine& engine_;
    std::string cron_;
};

// Every request under /webhooks must carry X-Signature: sha256=<hex HMAC-SHA256 of the body>
// under --provider-secret (required: std::invalid_argument naming it when empty).
void require_signatures(keel::http::router& router, const keel::di::container& services);

}  // namespace billing
