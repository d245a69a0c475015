#pragma once

// keel-payments-sim's HTTP API. Requests and answers are JSON; every error is
// application/problem+json naming the field (a JSON pointer, or the header) when there is one.
//
//   POST /charges  Idempotency-Key: <key>
//        {"card": "4242424242424242", "amount": 1000, "currency": "eur", "reference": "inv-1"}
//     201 {"id": "ch_...", "status": "succeeded" | "declined" | "pending", "reference": "inv-1"}
//     200 the same, for a replay of the key with the same request (nothing charged)
//     400 no Idempotency-Key, bad JSON, a missing or wrong-typed field, a card that is not
//         12 to 19 digits, an amount below 1, a currency that is not 3 letters, an empty
//         reference; 415 when the body is not application/json; 413 past 16 KiB
//     409 the key was used before with another request (nothing charged)
//     429 Retry-After: 1, past --rate new charges in one second (nothing charged)
//   GET /charges[?reference=inv-1]
//     200 {"charges": [{"id", "status", "reference", "amount", "currency", "card",
//         "requests"}, ...]} in creation order; "card" is the last four digits, "requests"
//         how many requests carried the charge's key (1, plus each replay).
// With --answer-delay, a charge's answer (201 or 200) leaves that long after it is booked.

#include <keel/http/controller.hpp>

#include "charges.hpp"
#include "settings.hpp"
#include "webhook_sender.hpp"

namespace billing::sim {

class charge_controller {
  public:
    using inject = keel::di::inject<charge_book&, webhook_sender&, settings&>;
    charge_controller(charge_book& book, webhook_sender& webhooks, settings& s)
        : book_(book), webhooks_(webhooks), answer_delay_(s.answer_delay) {}

    static void routes(keel::http::controller_routes<charge_controller>& r);

    asio::awaitable<keel::http::response> create(keel::http::request& req);
    asio::awaitable<keel::http::response> list(keel::http::request& req);

  private:
    charge_book& book_;
    webhook_sender& webhooks_;
    keel::duration answer_delay_;
};

}  // namespace billing::sim
