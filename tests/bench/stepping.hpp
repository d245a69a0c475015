#pragma once

// The durable-step benchmarks' flow: an instance doing k `ctx.run` steps, each returning its
// index, started as /bench/<n>/<k>.

#include <keel/process/context.hpp>
#include <keel/process/definition.hpp>
#include <string>

namespace keel::bench {

inline process::durable<int> steps_flow(process::context& ctx, std::string, int k) {
    int sum = 0;
    for (int i = 0; i < k; ++i) sum += co_await ctx.run("step", [i] { return i; });
    co_return sum;
}
inline constexpr auto stepping = process::define<steps_flow>("/bench/:n/:k");

}  // namespace keel::bench
