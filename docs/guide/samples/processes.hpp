// What the samples of processes.md take as given.
#pragma once

#include <keel/framework/model.hpp>
#include <keel/process/context.hpp>
#include <keel/process/definition.hpp>
#include <keel/process/retry.hpp>
#include <keel/signals/signal.hpp>
#include <nlohmann/json.hpp>
#include <string>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace guide_samples {

struct order {
    static constexpr std::string_view model_name = "order";
    std::string id;
};

struct payment_received {
    std::string tx_id;
    double amount = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(payment_received, tx_id, amount)

struct payment_signals : keel::signal_group {
    keel::signal<payment_received, order> received{this, "/payment/:order/received"};
    keel::signal<void, order> failed{this, "/payment/:order/failed"};
};

// A dependency of the handlers: the warehouse's client.
struct warehouse {
    std::string pack(const std::string& order_id);  // the parcel's id
    bool dispatch(const std::string& parcel);
    bool reserve(const std::string& order_id);
};

struct mailer {
    bool sorry(const std::string& order_id, const std::string& why);
};

// The definition's retry policy (defined on the page).
keel::process::retry_policy patient();

extern keel::process::context& ctx;
extern keel::ref<order> o;
extern warehouse& stock;
extern mailer& mail;

}  // namespace guide_samples
