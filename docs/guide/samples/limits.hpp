// What the samples of limits.md take as given.
#pragma once

#include <keel/http/client.hpp>
#include <keel/process/context.hpp>
#include <keel/process/definition.hpp>
#include <keel/process/http_call.hpp>
#include <keel/process/limiter.hpp>
#include <nlohmann/json.hpp>
#include <string>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace guide_samples {

using keel::process::context;
using keel::process::durable;

struct charge {
    std::string id;
    double amount = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(charge, id, amount)

// The payment provider's client, a dependency of the handler.
struct provider {
    guide_samples::charge charge(const std::string& invoice_id);
};

// The same provider over HTTP, for a ctx.http step.
struct provider_api {
    keel::http::client& client;
    std::string url;
};

extern keel::process::context& ctx;

}  // namespace guide_samples
