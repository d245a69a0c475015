// What the samples of queues.md take as given.
#pragma once

#include <keel/framework/model.hpp>
#include <keel/process/context.hpp>
#include <keel/process/definition.hpp>
#include <keel/process/engine.hpp>
#include <keel/process/queue.hpp>
#include <string>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace guide_samples {

struct invoice {
    static constexpr std::string_view model_name = "invoice";
    std::string id;
};

keel::process::durable<void> bill(keel::process::context& ctx, keel::ref<invoice> i);
inline constexpr auto invoice_flow = keel::process::define<bill>("/invoice/:invoice");

extern keel::process::engine& eng;
extern std::string tenant;
extern std::string invoice_id;

}  // namespace guide_samples
