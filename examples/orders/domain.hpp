#pragma once

// The orders service's domain: its models (order, user), the signals webhooks send, and the
// services the processes and controllers share. Everything here is plain C++ with JSON
// conversions; nothing names a Redis key.

#include <keel/di/inject.hpp>
#include <keel/framework/clock.hpp>
#include <keel/framework/model.hpp>
#include <keel/framework/repository.hpp>
#include <keel/signals/signal.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace orders {

namespace asio = boost::asio;

// The models' JSON is described once (keel::fields): Keel writes their documents from it
// and reads them back.
struct payment {
    std::string transaction_id;
    double amount = 0;
    static constexpr auto json_fields =
        keel::fields(keel::field("transactionId", &payment::transaction_id),
                     keel::field("amount", &payment::amount));
};

// status: created, paid, shipped, delivered, payment_failed or expired. `payments` holds
// the payment accepted by the payment webhook (at most one: the order's total); `refunds`
// payments that were accepted but could not be applied because the order expired first:
// the shop owes them back (orders written before refunds existed have none).
struct order {
    static constexpr std::string_view model_name = "order";
    std::string id;
    std::string email;
    std::string address;
    double total = 0;
    std::string status = "created";
    std::vector<payment> payments;
    std::vector<payment> refunds;
    static constexpr auto json_fields = keel::fields(
        keel::field("id", &order::id), keel::field("email", &order::email),
        keel::field("address", &order::address), keel::field("total", &order::total),
        keel::field("status", &order::status), keel::field("payments", &order::payments),
        keel::field("refunds", &order::refunds).may_be_absent());
};

// There is no mail server: codes "sent" to a user land in their outbox.
struct user {
    static constexpr std::string_view model_name = "user";
    std::string id;
    std::string email;
    std::vector<std::string> outbox;
    bool verified = false;
    static constexpr auto json_fields = keel::fields(
        keel::field("id", &user::id), keel::field("email", &user::email),
        keel::field("outbox", &user::outbox), keel::field("verified", &user::verified));
};

struct payment_signals : keel::signal_group {
    keel::signal<payment, order> received{this, "/payment/:order/received"};
    keel::signal<void, order> failed{this, "/payment/:order/failed"};
};

struct shipping_signals : keel::signal_group {
    keel::signal<void, order> delivered{this, "/shipping/:order/delivered"};
};

struct verification_signals : keel::signal_group {
    keel::signal<std::string, user> code_submitted{this, "/verification/:user/code"};
    keel::signal<void, user> resend_requested{this, "/verification/:user/resend"};
};

// Amounts are positive, finite and below this (in the order's currency).
inline constexpr double max_amount = 1e9;

// What the payment webhook may do with payment `p` for order `o`, read under the order's
// lock: apply it, repeat it (a retried webhook: the same transaction again, emitted again
// under the same key), or refuse it with the reason (answered 409, never a silent 200).
struct payment_verdict {
    enum class kind { apply, repeat, refuse } decision;
    std::string reason;
};
payment_verdict judge_payment(const order& o, const payment& p);

// The service's tunables, from its configuration (service.cpp declares them).
struct settings {
    keel::duration payment_timeout = std::chrono::hours(72);
    keel::duration verification_timeout = std::chrono::minutes(10);
    std::string webhook_secret;  // empty: webhooks are not signed
};

// The changes the fulfilment process makes to an order, for repository<order>::update and
// context::update (a step whose write is committed with it). Each applies to the order as
// read and runs again on a newer one, returns false when there is nothing to write, and is
// idempotent, because a step runs at least once. An order that does not exist is an error.
struct record_payment {  // the payment, once per transaction id; the order paid
    payment paid;
    bool operator()(std::optional<order>& o) const;
};
struct set_status {
    std::string status;
    bool operator()(std::optional<order>& o) const;
};
struct expire_order {  // "expired"; a payment accepted meanwhile becomes a refund
    bool operator()(std::optional<order>& o) const;
};

// Orders (in Redis in the service, in memory in unit tests).
class order_book {
  public:
    using inject = keel::di::inject<keel::documents&>;
    explicit order_book(keel::documents& docs) : repo_(docs) {}

    keel::repository<order>& repository() { return repo_; }

  private:
    keel::repository<order> repo_;
};

// The changes the verification process makes to a user, as the order's above.
struct record_code {  // the code sent, in the outbox unless it is already the latest one
    std::string code;
    bool operator()(std::optional<user>& u) const;
};
struct mark_verified {
    bool operator()(std::optional<user>& u) const;
};

// Users (in Redis in the service, in memory in unit tests).
class user_book {
  public:
    using inject = keel::di::inject<keel::documents&>;
    explicit user_book(keel::documents& docs) : repo_(docs) {}

    keel::repository<user>& repository() { return repo_; }

  private:
    keel::repository<user> repo_;
};

}  // namespace orders
