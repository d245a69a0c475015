// What the samples of tracing.md take as given.
#pragma once

#include <keel/framework/service.hpp>
#include <keel/http/metrics.hpp>
#include <keel/http/otlp.hpp>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace guide_samples {

extern keel::service_options options;
extern keel::http::metrics& metrics;

}  // namespace guide_samples
