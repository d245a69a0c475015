// What the samples of calling-services.md take as given.
#pragma once

#include <gtest/gtest.h>

#include <boost/asio/detached.hpp>
#include <keel/framework/log.hpp>
#include <keel/framework/model.hpp>
#include <keel/framework/service.hpp>
#include <keel/http/client.hpp>
#include <keel/http/json.hpp>
#include <keel/http/metrics.hpp>
#include <keel/http/request.hpp>
#include <keel/http/router.hpp>
#include <keel/http/testing.hpp>
#include <keel/process/context.hpp>
#include <keel/process/http_call.hpp>
#include <keel/process/limiter.hpp>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace guide_samples {

struct order {
    static constexpr std::string_view model_name = "order";
    std::string id;
};

extern keel::service_options options;
extern keel::log::logger log;
extern keel::http::client http;
extern keel::http::request& req;
extern nlohmann::json item;
extern std::string token;
extern std::string key;
extern keel::process::context& ctx;

}  // namespace guide_samples
