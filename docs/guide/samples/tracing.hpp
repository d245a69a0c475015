// What the samples of tracing.md take as given.
#pragma once

#include <keel/framework/service.hpp>
#include <keel/http/metrics.hpp>
#include <keel/http/otlp.hpp>
#include <keel/http/request.hpp>
#include <keel/process/definition.hpp>
#include <keel/process/engine.hpp>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace guide_samples {

extern keel::service_options options;
extern keel::http::metrics& metrics;

struct order {
    static constexpr std::string_view model_name = "order";
    std::string id;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(order, id)

keel::process::durable<void> fulfil(keel::process::context& ctx, keel::ref<order> o);
inline constexpr auto fulfillment = keel::process::define<fulfil>("/order/:order/fulfillment");

extern keel::process::engine& eng;
extern keel::http::request& req;
extern keel::repository<order>& orders;
extern keel::ref<order> ref;
extern order fresh;

}  // namespace guide_samples
