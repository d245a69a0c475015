// What the samples of settings.md take as given: nothing beyond Keel (the page's sample is a
// whole file).
#pragma once

#include <keel/app/application.hpp>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace guide_samples {}  // namespace guide_samples
