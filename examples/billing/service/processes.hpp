#pragma once

// keel-billing's durable processes.
//
// Subscription (/subscription/:subscription): waits out the trial, then for each period
// opens the period's invoice, starts its process as a child on the `charges` queue (one
// charge at a time per customer) and waits for it, then waits for the period's end. Every
// wait races the requests it answers at any time: /subscription/cancel (the refund of the
// unused part of a paid period; the process ends, its unfinished invoice void) and
// /subscription/plan (the plan of the next period; the same plan is refused). A failed
// invoice makes it past_due, and cancelled at the end of that period. It publishes its state
// under "subscription" for GET /subscriptions/:id. Period n starts at
// start + trial + (n - 1) * period: times computed from the start, read once.
//
// Invoice (/invoice/:subscription/:period): charges the provider (payment_provider), one
// step per attempt ("charge 1", "charge 2", ...: one idempotency key each); a pending charge
// waits for the provider's webhook (delivered to /invoice/charge) up to pending_deadline; a
// declined one is tried again after each dunning wait (a late webhook of an earlier pending
// charge ends the wait too). Paid, it is put on the day's ledger.
//
// Report (/report/:tick): started by the daily-report schedule; records the invoices paid
// on the tick's UTC day up to the tick, and their revenue.

#include <keel/process/definition.hpp>
#include <keel/process/queue.hpp>
#include <string>
#include <string_view>

#include "domain.hpp"
#include "provider.hpp"

namespace billing {

// The paths of the requests a subscription answers, and of the provider's events an invoice
// waits for.
inline constexpr std::string_view cancel_path = "/subscription/cancel";
inline constexpr std::string_view plan_path = "/subscription/plan";
inline constexpr std::string_view charge_event_path = "/invoice/charge";

// How long a pending charge waits for the provider's webhook before it counts as declined.
inline constexpr auto pending_deadline = std::chrono::hours(1);

// Invoices run one at a time per customer (the partition): a customer's charges never race.
inline const keel::process::queue charges{.name = "charges", .partition_concurrency = 1};

// A provider webhook as delivered to the invoice's process.
struct provider_event {
    std::string type;  // charge.succeeded (or charge.declined, charge.failed)
    std::string charge;
    std::string reference;
    NLOHMANN_DEFINE_TYPE_INTRUSIVE(provider_event, type, charge, reference)
};

struct invoice_outcome {
    std::string status;  // paid or failed
    std::int64_t amount = 0;
    int attempts = 0;
    std::string paid_at;  // RFC 3339, when paid
    NLOHMANN_DEFINE_TYPE_INTRUSIVE(invoice_outcome, status, amount, attempts, paid_at)
};

struct subscription_end {
    std::string status;  // cancelled
    std::string reason;  // customer (a cancel request) or unpaid
    std::int64_t refund = 0;
    std::int64_t period = 0;  // the period it ended in (0: the trial)
    NLOHMANN_DEFINE_TYPE_INTRUSIVE(subscription_end, status, reason, refund, period)
};

keel::process::durable<invoice_outcome> bill(keel::process::context& ctx,
                                             keel::ref<subscription> sub, std::int64_t period,
                                             invoice_book& invoices, subscription_book& subs,
                                             report_book& reports, payment_provider& provider,
                                             terms& billing_terms);

keel::process::durable<subscription_end> subscribe(keel::process::context& ctx,
                                                   keel::ref<subscription> sub,
                                                   subscription_book& subs, invoice_book& invoices,
                                                   terms& billing_terms);

keel::process::durable<report> report_day(keel::process::context& ctx, std::string tick,
                                          report_book& reports);

// Steps retry for a while: a Redis restart must not fail a bill.
keel::process::retry_policy patient();

inline constexpr auto invoicing =
    keel::process::define<bill>("/invoice/:subscription/:period").retry(patient);
inline constexpr auto subscribing =
    keel::process::define<subscribe>("/subscription/:subscription").retry(patient);
inline constexpr auto reporting = keel::process::define<report_day>("/report/:tick").retry(patient);

// The refund of `amount` for `remaining` of a period of `length`: rounded down, never
// negative nor more than the amount.
std::int64_t prorate(std::int64_t amount, keel::duration remaining, keel::duration length);

// The time of a schedule tick ("20261129T235500Z"); std::invalid_argument for another text.
keel::time_point tick_time(std::string_view tick);

}  // namespace billing
