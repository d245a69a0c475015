#include "settings.hpp"

namespace billing::sim {

void declare_settings(keel::app::settings_schema<settings>& s) {
    s.add("rate", &settings::rate,
          "new charges allowed in any one second (a sliding window); past it 429 with "
          "Retry-After: 1 (replays of a known Idempotency-Key are not counted)",
          {.min = 1, .max = 1e6})
        .add("pending_delay", &settings::pending_delay,
             "how long a charge on 4000000000000077 stays pending before it succeeds and its "
             "webhook is sent",
             {.min = 0, .max = 86400})
        .add("webhook_url", &settings::webhook_url,
             "where the charge.succeeded webhook is POSTed (http:// or https://); none: "
             "pending charges succeed without a webhook")
        .add("webhook_secret", &settings::webhook_secret,
             "the webhook's HMAC-SHA256 key: X-Signature: sha256=<hex HMAC of the body>")
        .add("webhook_ca", &settings::webhook_ca,
             "a PEM file of CA certificates to trust for an https:// webhook URL (default: the "
             "system's)")
        .add("answer_delay", &settings::answer_delay,
             "how long each charge's answer is held after the charge is booked (a slow "
             "provider); 0: at once",
             {.min = 0, .max = 600});
}

}  // namespace billing::sim
