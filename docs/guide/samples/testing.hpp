// What the samples of testing.md take as given: a booking service's registration, signals
// and process, and an orders service's process whose journals are replayed.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <keel/di/container.hpp>
#include <keel/framework/model.hpp>
#include <keel/process/definition.hpp>
#include <keel/signals/signal.hpp>

namespace guide_samples {

namespace booking {
struct booking {
    static constexpr std::string_view model_name = "booking";
    std::string id;
};
struct payment {
    std::string id;
};
void to_json(nlohmann::json& j, const payment& p);
void from_json(const nlohmann::json& j, payment& p);
struct payment_signals : keel::signal_group {
    keel::signal<payment, booking> paid{this, "/payment/:booking/paid"};
};
struct payments {
    virtual ~payments() = default;
};
void add_services(keel::di::registry& r);
keel::process::durable<std::string> hold(keel::process::context& ctx, keel::ref<booking> b,
                                         payment_signals& signals, payments& provider);
inline constexpr auto holding = keel::process::define<hold>("/booking/:booking/hold");
}  // namespace booking

namespace orders {
struct order {
    static constexpr std::string_view model_name = "order";
    std::string id;
};
keel::process::durable<std::string> fulfil(keel::process::context& ctx, keel::ref<order> o);
inline constexpr auto order_fulfillment = keel::process::define<fulfil>("/order/:order/fulfilment");
}  // namespace orders

struct charge_result {
    std::string id;
};
struct charge_request {
    std::string customer;
    std::int64_t amount = 0;
};

extern booking::payments& fake_payments;
extern keel::process::testing::environment& deps;

}  // namespace guide_samples
