// keel-payments-sim: a fake payment provider for examples/billing and its tests. It charges
// test cards (cards.hpp) over HTTPS, answers replays of an Idempotency-Key with the same
// charge, limits new charges to --rate a second, and sends a signed webhook when a pending
// charge succeeds (webhook_sender.hpp). Its state is in memory and it needs no Redis
// (keel::app::application::without_redis): a restart forgets every charge.
//
//   keel-payments-sim --port 8443 --tls-cert server.pem --tls-key server-key.pem
//       --webhook-url https://localhost:8080/webhooks/payments --webhook-secret s3cret
//       --webhook-ca ca.pem --rate 20 --pending-delay 1s    (one line)
//
// The API is in controllers.hpp; --help lists every option. scripts/make_test_ca.sh makes
// a test CA and a certificate for localhost with openssl.

#include <keel/app/application.hpp>
#include <memory>

#include "charges.hpp"
#include "controllers.hpp"
#include "settings.hpp"
#include "webhook_sender.hpp"

namespace billing::sim {

void add_services(keel::di::registry& r) {
    r.singleton<charge_book>([](settings& s) {
        return std::make_unique<charge_book>(static_cast<std::size_t>(s.rate));
    });
    r.singleton<webhook_sender>();
}

}  // namespace billing::sim

int main(int argc, char** argv) {
    return keel::app::application("keel-payments-sim")
        .without_redis()
        .require_tls()
        .settings(billing::sim::declare_settings)
        .services(billing::sim::add_services)
        .controllers<billing::sim::charge_controller>()
        .run(argc, argv);
}
