#pragma once

// keel-payments-sim's own options (besides every Keel service's: --port, --tls-cert,
// --tls-key, --threads, --log-level, ...):
//
//   --rate N              new charges allowed in any one second (default 20)
//   --pending-delay D     how long a 4000000000000077 charge stays pending (default 1s)
//   --webhook-url URL     where charge.succeeded is POSTed (http:// or https://)
//   --webhook-secret S    the HMAC-SHA256 key of its X-Signature (required with the URL)
//   --webhook-ca FILE     a PEM file to trust for an https:// webhook URL
//   --answer-delay D      how long each charge's answer is held after the charge is booked
//                         (a slow provider: a client killed meanwhile calls again; default 0)

#include <chrono>
#include <cstdint>
#include <keel/app/settings.hpp>
#include <keel/framework/clock.hpp>
#include <string>

namespace billing::sim {

struct settings {
    std::int64_t rate = 20;
    keel::duration pending_delay = std::chrono::seconds(1);
    std::string webhook_url;
    std::string webhook_secret;
    std::string webhook_ca;
    keel::duration answer_delay{};
};

void declare_settings(keel::app::settings_schema<settings>& s);

}  // namespace billing::sim
