// The coroutine type and replay mechanics: synchronous completion, helpers, loops,
// try/catch, early returns, constant stack over long journals.

#include <gtest/gtest.h>

#include "harness.hpp"

namespace keel::process {
namespace {

durable<int> add_one(context& ctx, int x) {
    int y = co_await ctx.run("add", [x] { return x + 1; });
    co_return y;
}

durable<int> counter(context& ctx, std::string n) {
    int total = 0;
    int count = std::stoi(n);
    for (int i = 0; i < count; ++i) total = co_await add_one(ctx, total);
    co_return total;
}
inline constexpr auto counting = define<counter>("/count/:n");

TEST(durable, helpers_and_loops_complete) {
    test::harness h;
    h.eng->add(counting);
    auto handle = h.sync(h.eng->start(counting, std::string("5")));
    EXPECT_EQ(handle.id(), "count/5");
    auto r = h.sync(handle.wait());
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(*r, 5);
    EXPECT_EQ(h.snapshot("count/5").journal.size(), 5u);
}

}  // namespace
}  // namespace keel::process
