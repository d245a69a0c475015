#pragma once

// The orders service's HTTP API. Requests and answers are JSON; every error is
// application/problem+json naming the field when there is one.
//
//   POST /orders                      create an order and start its fulfilment (idempotent by id)
//   GET  /orders/:id                  the order
//   GET  /orders/:id/fulfillment      the fulfilment process: status and result
//   POST /users                       create a user and start e-mail verification
//   GET  /users/:id/outbox            the codes sent to the user
//   GET  /users/:id/verification      the verification process: status and result
//   POST /users/:id/resend            ask for a new code
//   POST /webhooks/payment            {"orderId", "transactionId", "amount"}
//   POST /webhooks/payment-failed     {"orderId"}
//   POST /webhooks/delivered          {"orderId"}
//   POST /webhooks/verification-code  {"userId", "code"}
//
// A webhook answers {"received": true, "delivered": N, "duplicate": bool}: how many process
// instances the signal reached, and whether its idempotency key (the Idempotency-Key
// header, else the transaction id for payments) had been seen before.

#include <keel/http/controller.hpp>
#include <keel/process/engine.hpp>

#include "domain.hpp"

namespace orders {

class order_controller {
  public:
    using inject = keel::di::inject<keel::process::engine&, order_book&>;
    order_controller(keel::process::engine& engine, order_book& orders)
        : engine_(engine), orders_(orders) {}

    static void routes(keel::http::controller_routes<order_controller>& r);

    asio::awaitable<keel::http::response> create(keel::http::request& req);
    asio::awaitable<keel::http::response> show(keel::http::request& req);
    asio::awaitable<keel::http::response> fulfillment(keel::http::request& req);

  private:
    keel::process::engine& engine_;
    order_book& orders_;
};

class user_controller {
  public:
    using inject = keel::di::inject<keel::process::engine&, user_book&, verification_signals&>;
    user_controller(keel::process::engine& engine, user_book& users, verification_signals& signals)
        : engine_(engine), users_(users), signals_(signals) {}

    static void routes(keel::http::controller_routes<user_controller>& r);

    asio::awaitable<keel::http::response> create(keel::http::request& req);
    asio::awaitable<keel::http::response> outbox(keel::http::request& req);
    asio::awaitable<keel::http::response> verification(keel::http::request& req);
    asio::awaitable<keel::http::response> resend(keel::http::request& req);

  private:
    keel::process::engine& engine_;
    user_book& users_;
    verification_signals& signals_;
};

class webhook_controller {
  public:
    using inject = keel::di::inject<order_book&, user_book&, payment_signals&, shipping_signals&,
                                    verification_signals&>;
    webhook_controller(order_book& orders, user_book& users, payment_signals& payments,
                       shipping_signals& shipping, verification_signals& verification)
        : orders_(orders),
          users_(users),
          payments_(payments),
          shipping_(shipping),
          verification_(verification) {}

    static void routes(keel::http::controller_routes<webhook_controller>& r);

    asio::awaitable<keel::http::response> payment_received(keel::http::request& req);
    asio::awaitable<keel::http::response> payment_failed(keel::http::request& req);
    asio::awaitable<keel::http::response> delivered(keel::http::request& req);
    asio::awaitable<keel::http::response> verification_code(keel::http::request& req);

  private:
    asio::awaitable<keel::http::response> unapplied(const keel::ref<order>& ref,
                                                    const payment& paid);

    order_book& orders_;
    user_book& users_;
    payment_signals& payments_;
    shipping_signals& shipping_;
    verification_signals& verification_;
};

}  // namespace orders
