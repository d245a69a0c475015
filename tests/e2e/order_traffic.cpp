#include "order_traffic.hpp"

namespace keel::e2e {

namespace {

nlohmann::json body_of(order_call what, const std::string& order) {
    switch (what) {
        case order_call::create:
            return {{"id", order},
                    {"email", order + "@example.com"},
                    {"address", "1 Harbour Road"},
                    {"total", 10.0}};
        case order_call::pay:
            return {{"orderId", order}, {"transactionId", "tx-" + order}, {"amount", 10.0}};
        case order_call::deliver:
            return {{"orderId", order}};
    }
    return {};
}

const char* target_of(order_call what) {
    switch (what) {
        case order_call::create:
            return "/orders";
        case order_call::pay:
            return "/webhooks/payment";
        case order_call::deliver:
            return "/webhooks/delivered";
    }
    return "/";
}

}  // namespace

bool reached_flow(const order_outcome& o) {
    if (!o.ok()) return false;
    auto body = nlohmann::json::parse(o.detail, nullptr, false);
    return body.is_object() && body.value("delivered", 0) > 0;
}

std::string order_outcome::describe() const {
    static constexpr const char* names[] = {"create ", "payment ", "delivery "};
    return names[static_cast<int>(what)] + order + ": " +
           (status ? std::to_string(status) : std::string("no answer")) + " " + detail;
}

order_outcome send_order_call(http::testing::test_client& client, order_call what,
                              const std::string& order) {
    order_outcome o{.what = what, .order = order, .sent = std::chrono::steady_clock::now()};
    try {
        auto res = client.post_json(target_of(what), body_of(what, order));
        o.status = http::to_int(res.status);
        o.retry_after = res.header("Retry-After").has_value();
        o.detail = res.body;
    } catch (const std::exception& e) {
        o.detail = e.what();
    }
    o.took = std::chrono::steady_clock::now() - o.sent;
    return o;
}

order_traffic::order_traffic(const service_process& service, const std::string& name,
                             order_traffic_options options)
    : options_(options) {
    for (int i = 0; i < options_.clients; ++i)
        threads_.emplace_back(
            [this, &service, prefix = name + "-" + std::to_string(i)] { drive(service, prefix); });
}

order_traffic::~order_traffic() {
    stop();
}

void order_traffic::keep(order_outcome o) {
    std::lock_guard lock(mutex_);
    answers_.push_back(std::move(o));
}

void order_traffic::drive(const service_process& service, const std::string& prefix) {
    auto client = service.client(options_.client_timeout);
    auto send = [&](order_call what, const std::string& order) {
        auto o = send_order_call(client, what, order);
        if (o.status == 0) client = service.client(options_.client_timeout);
        if (!o.ok()) std::this_thread::sleep_for(options_.pause_after_failure);
        return o;
    };
    for (int n = 0; !stop_; ++n) {
        auto order = prefix + "-" + std::to_string(n);
        auto created = send(order_call::create, order);
        bool go_on = created.ok();
        keep(std::move(created));
        if (go_on) {
            auto paid = send(order_call::pay, order);
            go_on = paid.ok() && options_.deliver;
            keep(std::move(paid));
        }
        // The flow ships the order, then waits for its delivery: report it until it does.
        for (int tries = 0; go_on && !stop_ && tries < 200; ++tries) {
            auto delivered = send(order_call::deliver, order);
            go_on = !reached_flow(delivered);
            if (!go_on || tries == 199) keep(std::move(delivered));
            if (go_on) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        if (options_.pace.count() > 0) std::this_thread::sleep_for(options_.pace);
    }
}

std::vector<order_outcome> order_traffic::take() {
    std::lock_guard lock(mutex_);
    return std::exchange(answers_, {});
}

std::vector<order_outcome> order_traffic::stop() {
    stop_ = true;
    for (auto& t : threads_)
        if (t.joinable()) t.join();
    return take();
}

int payments_with(const nlohmann::json& order, const std::string& tx) {
    int n = 0;
    if (!order.contains("payments") || !order["payments"].is_array()) return 0;
    for (const auto& p : order["payments"])
        if (p.is_object() && p.value("transactionId", "") == tx) ++n;
    return n;
}

}  // namespace keel::e2e
