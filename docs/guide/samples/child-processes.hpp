// What the samples of child-processes.md take as given.
#pragma once

#include <keel/framework/model.hpp>
#include <keel/http/response.hpp>
#include <keel/http/router.hpp>
#include <keel/process/ask_route.hpp>
#include <keel/process/child.hpp>
#include <keel/process/context.hpp>
#include <keel/process/definition.hpp>
#include <keel/process/engine.hpp>
#include <keel/process/request.hpp>
#include <keel/signals/signal.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace guide_samples {

using keel::http::response;
using keel::process::child_options;
using keel::process::context;
using keel::process::define;
using keel::process::durable;
using keel::process::parent_close;

struct subscription {
    static constexpr std::string_view model_name = "subscription";
    std::string id;
};

struct order {
    static constexpr std::string_view model_name = "order";
    std::string id;
};

struct invoice_total {
    std::string currency;
    long cents = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(invoice_total, currency, cents)
invoice_total& operator+=(invoice_total& a, const invoice_total& b);

// A dependency of the invoice flow: the payment provider's client.
struct payments {};

// What a warehouse is told to pick, and the warehouse's signals.
struct picking {
    std::vector<std::string> items;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(picking, items)

struct warehouse_signals : keel::signal_group {
    keel::signal<picking, order> pick_requested{this, "/warehouse/:order/pick"};
};

// An order's audit trail, started as a child that outlives its parent.
durable<void> audit_order(context& ctx, keel::ref<order> o);
inline constexpr auto audit = define<audit_order>("/audit/:order");

extern keel::process::context& ctx;
extern keel::process::engine& eng;
extern keel::http::router& router;
extern keel::ref<subscription> sub;
extern std::vector<std::string> periods;
extern invoice_total total;
extern keel::ref<order> order_ref;
extern warehouse_signals& warehouse;
extern picking pick_list;
extern std::string idempotency_key;
extern bool in_first_year;
extern nlohmann::json refund;
extern int i;
extern int n;

}  // namespace guide_samples
