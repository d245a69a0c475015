#include "domain.hpp"

#include <algorithm>
#include <stdexcept>

namespace orders {

void to_json(nlohmann::json& j, const payment& p) {
    j = {{"transactionId", p.transaction_id}, {"amount", p.amount}};
}
void from_json(const nlohmann::json& j, payment& p) {
    j.at("transactionId").get_to(p.transaction_id);
    j.at("amount").get_to(p.amount);
}

void to_json(nlohmann::json& j, const order& o) {
    j = {{"id", o.id},       {"email", o.email},   {"address", o.address},
         {"total", o.total}, {"status", o.status}, {"payments", o.payments}};
}
void from_json(const nlohmann::json& j, order& o) {
    j.at("id").get_to(o.id);
    j.at("email").get_to(o.email);
    j.at("address").get_to(o.address);
    j.at("total").get_to(o.total);
    j.at("status").get_to(o.status);
    j.at("payments").get_to(o.payments);
}

void to_json(nlohmann::json& j, const user& u) {
    j = {{"id", u.id}, {"email", u.email}, {"outbox", u.outbox}, {"verified", u.verified}};
}
void from_json(const nlohmann::json& j, user& u) {
    j.at("id").get_to(u.id);
    j.at("email").get_to(u.email);
    j.at("outbox").get_to(u.outbox);
    j.at("verified").get_to(u.verified);
}

namespace {

// A failed step is retried by the engine: say why in the exception.
template <class T>
void check(const keel::expected<T, keel::model_error>& r, std::string_view what) {
    if (!r) throw std::runtime_error(std::string(what) + ": " + r.error().what());
}

}  // namespace

asio::awaitable<bool> order_book::record_payment(keel::ref<order> o, payment p) {
    auto held = co_await repo_.lock(o);
    check(held, "locking " + o.id());
    if (!held->value()) throw std::runtime_error("order " + o.id() + " does not exist");
    auto& payments = (*held)->payments;
    bool fresh = std::none_of(payments.begin(), payments.end(), [&](const payment& q) {
        return q.transaction_id == p.transaction_id;
    });
    if (fresh) payments.push_back(p);
    (*held)->status = "paid";
    auto saved = co_await held->save();
    check(saved, "saving " + o.id());
    co_return fresh;
}

asio::awaitable<bool> order_book::set_status(keel::ref<order> o, std::string status) {
    auto held = co_await repo_.lock(o);
    check(held, "locking " + o.id());
    if (!held->value()) throw std::runtime_error("order " + o.id() + " does not exist");
    (*held)->status = std::move(status);
    auto saved = co_await held->save();
    check(saved, "saving " + o.id());
    co_return true;
}

asio::awaitable<bool> user_book::send_code(keel::ref<user> u, std::string code) {
    auto held = co_await repo_.lock(u);
    check(held, "locking " + u.id());
    if (!held->value()) throw std::runtime_error("user " + u.id() + " does not exist");
    auto& outbox = (*held)->outbox;
    if (!outbox.empty() && outbox.back() == code) co_return false;  // a retried step
    outbox.push_back(std::move(code));
    auto saved = co_await held->save();
    check(saved, "saving " + u.id());
    co_return true;
}

asio::awaitable<bool> user_book::mark_verified(keel::ref<user> u) {
    auto held = co_await repo_.lock(u);
    check(held, "locking " + u.id());
    if (!held->value()) throw std::runtime_error("user " + u.id() + " does not exist");
    (*held)->verified = true;
    auto saved = co_await held->save();
    check(saved, "saving " + u.id());
    co_return true;
}

}  // namespace orders
