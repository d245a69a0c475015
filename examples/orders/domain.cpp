#include "domain.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

namespace orders {

payment_verdict judge_payment(const order& o, const payment& p) {
    using kind = payment_verdict::kind;
    for (const auto& q : o.payments)
        if (q.transaction_id == p.transaction_id) return {kind::repeat, {}};
    if (o.status != "created")
        return {kind::refuse, "order " + o.id + " is " + o.status + ": payment " +
                                  p.transaction_id + " was not applied; refund it"};
    if (!o.payments.empty())
        return {kind::refuse, "order " + o.id + " is already paid by " +
                                  o.payments.front().transaction_id + ": payment " +
                                  p.transaction_id + " was not applied; refund it"};
    if (std::llround(p.amount * 100) != std::llround(o.total * 100))
        return {kind::refuse, "payment " + p.transaction_id + " of " + fmt::format("{}", p.amount) +
                                  " does not match the order total " + fmt::format("{}", o.total) +
                                  "; it was not applied"};
    return {kind::apply, {}};
}

namespace {

// The entity a change applies to; it must exist.
template <class T>
T& existing(std::optional<T>& x) {
    if (!x) throw std::runtime_error("the " + std::string(T::model_name) + " does not exist");
    return *x;
}

}  // namespace

bool record_payment::operator()(std::optional<order>& o) const {
    auto& x = existing(o);
    bool fresh = std::none_of(x.payments.begin(), x.payments.end(), [&](const payment& q) {
        return q.transaction_id == paid.transaction_id;
    });
    if (fresh) x.payments.push_back(paid);
    bool changed = fresh || x.status != "paid";
    x.status = "paid";
    return changed;
}

bool set_status::operator()(std::optional<order>& o) const {
    auto& x = existing(o);
    if (x.status == status) return false;
    x.status = status;
    return true;
}

bool expire_order::operator()(std::optional<order>& o) const {
    auto& x = existing(o);
    if (x.status != "created") return false;  // failed meanwhile: that answer stands
    x.status = "expired";
    x.refunds.insert(x.refunds.end(), x.payments.begin(), x.payments.end());
    x.payments.clear();
    return true;
}

bool record_code::operator()(std::optional<user>& u) const {
    auto& x = existing(u);
    if (!x.outbox.empty() && x.outbox.back() == code) return false;  // a retried step
    x.outbox.push_back(code);
    return true;
}

bool mark_verified::operator()(std::optional<user>& u) const {
    return !std::exchange(existing(u).verified, true);
}

}  // namespace orders
