// keel-billing: subscriptions billed every period. Each subscription is a durable process
// that starts an invoice process per period; an invoice charges the payment provider over
// HTTPS (durable calls, one idempotency key per attempt, at most --provider-rate calls a
// second across every worker, one charge at a time per customer), waits for the provider's
// webhook when a charge is pending, and retries a declined card after the dunning waits.
// A schedule records the day's paid invoices and revenue. Everything durable lives in Redis.
//
//   keel-billing --redis redis://127.0.0.1:6390 --port 8080
//       --provider-url https://127.0.0.1:8443 --provider-ca ca.pem --provider-secret s3cret
//       --period 30d --trial 14d --dunning 1d,3d,5d                 (one command line)
//
// --help lists the options (also KEEL_<NAME> environment variables and a JSON file through
// --config): the service's own (service.cpp) and those of every Keel service.

#include <keel/app/application.hpp>

#include "controllers.hpp"
#include "service.hpp"

int main(int argc, char** argv) {
    keel::app::application service("keel-billing");
    service.settings(billing::declare_settings)
        .services(billing::add_services)
        .services(billing::add_runtime);
    return billing::add_durable(service)
        .controllers<billing::customer_controller, billing::subscription_controller,
                     billing::invoice_controller, billing::report_controller,
                     billing::webhook_controller>()
        .routes(billing::require_signatures)
        .run(argc, argv);
}
