#pragma once

// keel-billing's domain: its documents (customer, subscription, invoice, the paid ledger of a
// day, the report of a day), its plans, its settings and the terms read from them, and the
// changes the processes make to documents. Plain C++ with JSON conversions; nothing here
// names a Redis key or a process. Money is integer cents; times are RFC 3339 UTC text.

#include <chrono>
#include <cstdint>
#include <keel/di/inject.hpp>
#include <keel/framework/clock.hpp>
#include <keel/framework/model.hpp>
#include <keel/framework/repository.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace billing {

namespace asio = boost::asio;

struct customer {
    static constexpr std::string_view model_name = "customer";
    std::string id;
    std::string email;
    friend bool operator==(const customer&, const customer&) = default;
    NLOHMANN_DEFINE_TYPE_INTRUSIVE(customer, id, email)
};

// Written by POST /subscriptions before its process starts; the process reads it once.
struct subscription {
    static constexpr std::string_view model_name = "subscription";
    std::string id;
    std::string customer;
    std::string plan;  // the plan it was created with (changes are the process's state)
    std::string card;
    std::string created;  // RFC 3339
    NLOHMANN_DEFINE_TYPE_INTRUSIVE(subscription, id, customer, plan, card, created)
};

// Whether two subscriptions are the same request (the creation time aside).
bool same_request(const subscription& a, const subscription& b);

// One period's bill, id "<subscription>-<period>": opened by the subscription's process (it
// knows the period's plan), then charged and updated by the invoice's. status: open, paid,
// failed or void.
struct invoice {
    static constexpr std::string_view model_name = "invoice";
    std::string id;
    std::string subscription;
    std::string customer;
    std::int64_t period = 0;
    std::int64_t amount = 0;  // cents
    std::string status = "open";
    int attempts = 0;
    std::vector<std::string> charges;  // the provider's charge ids, in order
    std::string paid_at;               // RFC 3339; empty unless paid
    NLOHMANN_DEFINE_TYPE_INTRUSIVE(invoice, id, subscription, customer, period, amount, status,
                                   attempts, charges, paid_at)
};

// The invoice id of a period: "<subscription>-<period>".
std::string invoice_id(std::string_view subscription, std::int64_t period);

struct paid_invoice {
    std::string invoice;
    std::int64_t amount = 0;
    std::string at;  // RFC 3339
    NLOHMANN_DEFINE_TYPE_INTRUSIVE(paid_invoice, invoice, amount, at)
};

// The invoices paid on one UTC day (id "YYYY-MM-DD"), appended as they are paid.
struct ledger {
    static constexpr std::string_view model_name = "ledger";
    std::string date;
    std::vector<paid_invoice> paid;
    NLOHMANN_DEFINE_TYPE_INTRUSIVE(ledger, date, paid)
};

// What the daily schedule recorded for a day (id "YYYY-MM-DD").
struct report {
    static constexpr std::string_view model_name = "report";
    std::string date;
    std::int64_t paid_invoices = 0;
    std::int64_t revenue = 0;  // cents
    std::string at;            // the tick, RFC 3339
    NLOHMANN_DEFINE_TYPE_INTRUSIVE(report, date, paid_invoices, revenue, at)
};

// The price of a plan per period in cents ("basic" 1000, "pro" 3000); nullopt for another.
std::optional<std::int64_t> plan_price(std::string_view plan);

// The UTC day of `t`: "2026-11-29".
std::string utc_date(keel::time_point t);
// Whether `text` is a date as utc_date writes it (a day that exists).
bool is_date(std::string_view text);

// The service's options (service.cpp declares them).
struct settings {
    std::string provider_url;          // https://...: where charges are made
    std::string provider_ca;           // PEM file of the CA that signs the provider's certificate
    std::string provider_secret;       // HMAC key of the provider's webhooks
    std::uint32_t provider_rate = 15;  // calls per second to the provider, all workers
    keel::duration period = std::chrono::hours(24 * 30);
    keel::duration trial = std::chrono::seconds(0);
    std::string dunning = "1d,3d,5d";
    std::string report_cron = "0 55 23 * * *";
};

// "1d,3d,5d": the waits before each retry of a declined charge. std::invalid_argument saying
// what is wrong with the list (an empty entry, a duration it cannot read, a zero wait).
std::vector<keel::duration> parse_dunning(std::string_view list);

// The billing terms the processes run with, read from the settings once (their values were
// checked at start: declare_settings).
struct terms {
    keel::duration trial{};
    keel::duration period{};
    std::vector<keel::duration> dunning;
};
terms terms_of(const settings& s);

// ---- the changes the processes make (ctx.update) ----
// Each applies to the document as read, may run more than once (a step runs at least once)
// and returns false when there is nothing to write.

struct open_invoice {  // the invoice unless it exists
    invoice fresh;
    bool operator()(std::optional<invoice>& i) const;
};
struct record_charge {  // attempt `attempt` made charge `charge` (empty: no charge id)
    int attempt = 0;
    std::string charge;
    bool operator()(std::optional<invoice>& i) const;
};
struct mark_paid {  // paid at `at` (a void invoice too: the money was taken)
    std::string at;
    bool operator()(std::optional<invoice>& i) const;
};
struct mark_failed {  // failed, unless it was paid or voided meanwhile
    bool operator()(std::optional<invoice>& i) const;
};
struct void_invoice {  // void, when it is still open
    bool operator()(std::optional<invoice>& i) const;
};
struct add_paid {  // the invoice on the day's ledger, once
    std::string date;
    paid_invoice paid;
    bool operator()(std::optional<ledger>& l) const;
};
struct put_report {  // the report, unless a later tick's is there
    billing::report value;
    bool operator()(std::optional<billing::report>& r) const;
};

// ---- the documents (in Redis in the service, in memory in unit tests) ----

class customer_book {
  public:
    using inject = keel::di::inject<keel::documents&>;
    explicit customer_book(keel::documents& docs) : repo_(docs) {}
    keel::repository<customer>& repository() { return repo_; }

  private:
    keel::repository<customer> repo_;
};

class subscription_book {
  public:
    using inject = keel::di::inject<keel::documents&>;
    explicit subscription_book(keel::documents& docs) : repo_(docs) {}
    keel::repository<subscription>& repository() { return repo_; }

  private:
    keel::repository<subscription> repo_;
};

class invoice_book {
  public:
    using inject = keel::di::inject<keel::documents&>;
    explicit invoice_book(keel::documents& docs) : repo_(docs) {}
    keel::repository<invoice>& repository() { return repo_; }

  private:
    keel::repository<invoice> repo_;
};

// Ledgers and reports: the daily figures.
class report_book {
  public:
    using inject = keel::di::inject<keel::documents&>;
    explicit report_book(keel::documents& docs) : ledgers_(docs), reports_(docs) {}
    keel::repository<ledger>& ledgers() { return ledgers_; }
    keel::repository<report>& reports() { return reports_; }

  private:
    keel::repository<ledger> ledgers_;
    keel::repository<report> reports_;
};

}  // namespace billing
