// What the samples of signals.md take as given (`payment` and `payment_signals` are the
// page's own first sample).
#pragma once

#include <keel/di/container.hpp>
#include <keel/framework/model.hpp>
#include <keel/http/middleware.hpp>
#include <keel/http/request.hpp>
#include <keel/http/response.hpp>
#include <keel/http/router.hpp>
#include <keel/http/signal_route.hpp>
#include <keel/process/context.hpp>
#include <keel/process/durable.hpp>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace guide_samples {

using keel::http::request;
using keel::http::response;

struct order {
    static constexpr std::string_view model_name = "order";
    std::string id;
};

// The provider's webhook body.
struct payment_hook {
    std::string order_id;
    std::string transaction_id;
    std::int64_t amount = 0;
};
void from_json(const nlohmann::json& j, payment_hook& h);

struct payment_signals;

class webhook_controller {
  public:
    explicit webhook_controller(payment_signals& payments) : payments_(payments) {}
    asio::awaitable<response> paid(request& req);

  private:
    payment_signals& payments_;
};

struct settings {
    std::string webhook_secret;
};

}  // namespace guide_samples
