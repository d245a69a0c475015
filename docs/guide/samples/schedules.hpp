// What the samples of schedules.md take as given.
#pragma once

#include <keel/di/container.hpp>
#include <keel/process/context.hpp>
#include <keel/process/definition.hpp>
#include <keel/process/engine.hpp>
#include <keel/process/schedule.hpp>
#include <string>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace guide_samples {

using keel::process::context;
using keel::process::define;
using keel::process::durable;

// A dependency of the handler: what sends the reminders.
struct dunning {};

extern keel::process::engine& eng;
extern keel::di::container& container;

}  // namespace guide_samples
