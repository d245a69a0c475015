#include "domain.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <keel/framework/json_text.hpp>
#include <stdexcept>
#include <utility>

namespace orders {

// The encoders assign member by member: an initializer list ({{"id", o.id}, ...}) makes
// nlohmann build a list of two-element arrays first, about three times the work (and this runs
// at every change of an order). The text is the same: an object's keys are sorted.
void to_json(nlohmann::json& j, const payment& p) {
    j = nlohmann::json::object();
    j["transactionId"] = p.transaction_id;
    j["amount"] = p.amount;
}
void from_json(const nlohmann::json& j, payment& p) {
    j.at("transactionId").get_to(p.transaction_id);
    j.at("amount").get_to(p.amount);
}

void to_json(nlohmann::json& j, const order& o) {
    j = nlohmann::json::object();
    j["id"] = o.id;
    j["email"] = o.email;
    j["address"] = o.address;
    j["total"] = o.total;
    j["status"] = o.status;
    j["payments"] = o.payments;
    j["refunds"] = o.refunds;
}

// The texts write members in the order nlohmann writes them: keys sorted.
void to_json_text(std::string& out, const payment& p) {
    out += R"({"amount":)";
    keel::append_json_number(out, p.amount);
    out += R"(,"transactionId":)";
    keel::append_json_string(out, p.transaction_id);
    out += '}';
}

namespace {
void append_payments(std::string& out, const std::vector<payment>& payments) {
    out += '[';
    for (const auto& p : payments) {
        if (&p != payments.data()) out += ',';
        to_json_text(out, p);
    }
    out += ']';
}
}  // namespace

void to_json_text(std::string& out, const order& o) {
    out += R"({"address":)";
    keel::append_json_string(out, o.address);
    out += R"(,"email":)";
    keel::append_json_string(out, o.email);
    out += R"(,"id":)";
    keel::append_json_string(out, o.id);
    out += R"(,"payments":)";
    append_payments(out, o.payments);
    out += R"(,"refunds":)";
    append_payments(out, o.refunds);
    out += R"(,"status":)";
    keel::append_json_string(out, o.status);
    out += R"(,"total":)";
    keel::append_json_number(out, o.total);
    out += '}';
}

void from_json(const nlohmann::json& j, order& o) {
    j.at("id").get_to(o.id);
    j.at("email").get_to(o.email);
    j.at("address").get_to(o.address);
    j.at("total").get_to(o.total);
    j.at("status").get_to(o.status);
    j.at("payments").get_to(o.payments);
    o.refunds = j.value("refunds", std::vector<payment>{});
}

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

void to_json(nlohmann::json& j, const user& u) {
    j = nlohmann::json::object();
    j["id"] = u.id;
    j["email"] = u.email;
    j["outbox"] = u.outbox;
    j["verified"] = u.verified;
}
void from_json(const nlohmann::json& j, user& u) {
    j.at("id").get_to(u.id);
    j.at("email").get_to(u.email);
    j.at("outbox").get_to(u.outbox);
    j.at("verified").get_to(u.verified);
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
