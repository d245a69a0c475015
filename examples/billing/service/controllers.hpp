#pragma once

// keel-billing's HTTP API. Requests and answers are JSON, money in integer cents, times
// RFC 3339 UTC; every error is application/problem+json naming the field when there is one.
//
//   POST /customers                    {"id", "email"}: 201, the same again 200, other 409
//   POST /subscriptions                {"id", "customer", "plan", "card"}: the subscription
//                                      and its process; 201, the same again 200
//   GET  /subscriptions/:id            its state (published by its process) and invoices
//   POST /subscriptions/:id/cancel     asked of its process: {"status", "refund"}
//   POST /subscriptions/:id/plan       {"plan"}: asked of its process: {"plan",
//                                      "effective_period"}; the same plan 409
//   GET  /invoices/:id                 an invoice and its charges
//   GET  /reports/:date                the daily report of YYYY-MM-DD, once it ran
//   POST /webhooks/provider            the provider's signed events (service.cpp checks the
//                                      signature): delivered to the invoice's process
//
// Cancel and plan take an Idempotency-Key header: a retried request gets the first answer.

#include <keel/http/controller.hpp>
#include <keel/process/engine.hpp>

#include "domain.hpp"

namespace billing {

class customer_controller {
  public:
    using inject = keel::di::inject<customer_book&>;
    explicit customer_controller(customer_book& customers) : customers_(customers) {}

    static void routes(keel::http::controller_routes<customer_controller>& r);

    asio::awaitable<keel::http::response> create(keel::http::request& req);

  private:
    customer_book& customers_;
};

class subscription_controller {
  public:
    using inject = keel::di::inject<keel::process::engine&, customer_book&, subscription_book&,
                                    invoice_book&, terms&>;
    subscription_controller(keel::process::engine& engine, customer_book& customers,
                            subscription_book& subscriptions, invoice_book& invoices,
                            terms& billing_terms)
        : engine_(engine),
          customers_(customers),
          subscriptions_(subscriptions),
          invoices_(invoices),
          terms_(billing_terms) {}

    static void routes(keel::http::controller_routes<subscription_controller>& r);

    asio::awaitable<keel::http::response> create(keel::http::request& req);
    asio::awaitable<keel::http::response> show(keel::http::request& req);
    asio::awaitable<keel::http::response> cancel(keel::http::request& req);
    asio::awaitable<keel::http::response> change_plan(keel::http::request& req);

  private:
    keel::process::engine& engine_;
    customer_book& customers_;
    subscription_book& subscriptions_;
    invoice_book& invoices_;
    terms& terms_;
};

class invoice_controller {
  public:
    using inject = keel::di::inject<invoice_book&>;
    explicit invoice_controller(invoice_book& invoices) : invoices_(invoices) {}

    static void routes(keel::http::controller_routes<invoice_controller>& r);

    asio::awaitable<keel::http::response> show(keel::http::request& req);

  private:
    invoice_book& invoices_;
};

class report_controller {
  public:
    using inject = keel::di::inject<report_book&>;
    explicit report_controller(report_book& reports) : reports_(reports) {}

    static void routes(keel::http::controller_routes<report_controller>& r);

    asio::awaitable<keel::http::response> show(keel::http::request& req);

  private:
    report_book& reports_;
};

// An event whose reference names no invoice is answered 200 and logged: the provider
// retries until it gets a 2xx, and an invoice is written before its first charge is made,
// so an unknown reference never becomes known (a 404 would only make it retry for ever).
class webhook_controller {
  public:
    using inject = keel::di::inject<keel::process::engine&, invoice_book&>;
    webhook_controller(keel::process::engine& engine, invoice_book& invoices)
        : engine_(engine), invoices_(invoices) {}

    static void routes(keel::http::controller_routes<webhook_controller>& r);

    asio::awaitable<keel::http::response> provider(keel::http::request& req);

  private:
    keel::process::engine& engine_;
    invoice_book& invoices_;
};

}  // namespace billing
