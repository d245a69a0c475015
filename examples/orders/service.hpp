#pragma once

// What keel-orders is made of, for main.cpp's application: its settings, its services, its
// signals and processes, and the middleware of its webhooks.

#include <keel/app/settings.hpp>
#include <keel/di/container.hpp>
#include <keel/http/router.hpp>

#include "domain.hpp"
#include "processes.hpp"

namespace orders {

// --payment-timeout, --verification-timeout, --webhook-secret.
void declare_settings(keel::app::settings_schema<settings>& s);

// The order and user books.
void add_services(keel::di::registry& registry);

// The service's signals and processes, listed once: main.cpp's keel::app::application and
// the tests' keel::process::testing::environment both take them from here.
template <class Service>
Service& add_durable(Service& service) {
    return service.template signals<payment_signals, shipping_signals, verification_signals>()
        .processes(order_fulfillment, email_verification);
}

// Webhooks only: the rest of the API is for the shop's own front end. The check is attached
// to the routes under /webhooks, so no spelling of a webhook's path can skip it.
void require_signatures(keel::http::router& router, const keel::di::container& services);

}  // namespace orders
