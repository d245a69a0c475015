// keel-orders: the orders service. Orders are paid, dispatched and delivered by a durable
// fulfilment process; users verify their e-mail through a durable verification process.
// Webhooks emit signals that resume the processes exactly once, however often they are
// retried. Everything durable lives in Redis.
//
//   keel-orders --redis redis://127.0.0.1:6390 --port 8080 --payment-timeout 3d
//
// --help lists the options (also KEEL_<NAME> environment variables and a JSON file through
// --config): the service's own (service.cpp) and those of every Keel service.

#include <keel/app/application.hpp>

#include "controllers.hpp"
#include "service.hpp"

int main(int argc, char** argv) {
    keel::app::application service("keel-orders");
    service.settings(orders::declare_settings).services(orders::add_services);
    return orders::add_durable(service)
        .controllers<orders::order_controller, orders::user_controller,
                     orders::webhook_controller>()
        .routes(orders::require_signatures)
        .signal_route("/webhooks/signals")
        .run(argc, argv);
}
