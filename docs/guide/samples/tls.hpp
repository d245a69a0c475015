// What the samples of tls.md take as given.
#pragma once

#include <keel/framework/service.hpp>
#include <keel/http/router.hpp>
#include <keel/http/server.hpp>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace guide_samples {

extern keel::service& service;
extern keel::http::router& router;

}  // namespace guide_samples
