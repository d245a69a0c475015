#include "service.hpp"

#include <keel/http/middleware.hpp>

namespace orders {

void declare_settings(keel::app::settings_schema<settings>& s) {
    s.add("payment_timeout", &settings::payment_timeout,
          "how long an order waits for its payment (2s, 5m, 3d, ...)", {.min = 0.001, .max = 3.2e7})
        .add("verification_timeout", &settings::verification_timeout,
             "how long an e-mail verification waits for the right code",
             {.min = 0.001, .max = 3.2e7})
        .add("webhook_secret", &settings::webhook_secret,
             "when set, every webhook must carry X-Signature: sha256=<hex HMAC-SHA256 of the "
             "body>");
}

void add_services(keel::di::registry& registry) {
    registry.singleton<order_book>().singleton<user_book>();
}

void require_signatures(keel::http::router& router, const keel::di::container& services) {
    const auto& secret = services.get<settings>().webhook_secret;
    if (secret.empty()) return;
    router.group("/webhooks").use(keel::http::webhook_signature({.secret = secret}));
}

}  // namespace orders
