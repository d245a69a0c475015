#pragma once

// The pending card's second act: after --pending-delay the charge succeeds, then
//   POST --webhook-url  {"type": "charge.succeeded", "charge": "ch_...", "reference": "..."}
//   X-Signature: sha256=<lowercase hex HMAC-SHA256 of the exact body bytes, --webhook-secret>
// is sent until it is answered 2xx: again after 200 ms, then twice as long each time, at
// most 5 s apart. The charge is succeeded before the first attempt (as with real providers,
// the event reports what already happened, so a receiver that looks the charge up sees it).
//
// Deliveries run on service thread 0. At shutdown they stop at once (waits and requests are
// cancelled); an undelivered webhook is lost with the rest of the sim's memory.

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <keel/di/container.hpp>
#include <keel/framework/concurrency/cancellation.hpp>
#include <keel/framework/log.hpp>
#include <keel/framework/service.hpp>
#include <keel/http/client.hpp>
#include <optional>
#include <string>

#include "charges.hpp"
#include "settings.hpp"

namespace billing::sim {

namespace asio = boost::asio;

class webhook_sender {
  public:
    using inject = keel::di::inject<keel::service&, settings&, charge_book&>;
    // Throws std::invalid_argument for a webhook URL that is not http(s):// or has no
    // secret, or a --webhook-ca that does not load.
    webhook_sender(keel::service& svc, settings& s, charge_book& book);

    // Registers the shutdown hook.
    void start();

    // Settles pending charge `id` after --pending-delay, then sends its webhook.
    void schedule(std::string id, std::string reference);

    static constexpr std::chrono::milliseconds first_backoff{200};
    static constexpr std::chrono::milliseconds max_backoff{5'000};

  private:
    asio::awaitable<void> deliver(std::string id, std::string reference);
    asio::awaitable<bool> post_once(const std::string& id, const std::string& body, int attempt);
    asio::awaitable<bool> pause(keel::duration d);

    keel::service& svc_;
    charge_book& book_;
    keel::duration delay_;
    std::string url_;
    std::string secret_;
    std::optional<keel::http::client> client_;   // none without --webhook-url
    keel::concurrency::cancel_source stopping_;  // thread 0's; cancelled at shutdown
    keel::log::logger log_{"webhook"};
};

}  // namespace billing::sim
