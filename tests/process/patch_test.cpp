// Changing code under running instances with context::patched: instances that passed (or
// wait at) the changed point with the old code replay the old branch without parking; new
// ones take the new branch and replay it; deprecate_patch lets the old branch go. The code
// version is switched between suspensions; max_hot = 0 makes every resume a replay.

#include <gtest/gtest.h>

#include "harness.hpp"

namespace keel::process {
namespace {

using namespace std::chrono_literals;
using test::harness;

int code_version = 1;

struct ran {
    std::vector<std::string> steps;
    template <class T>
    T& get() {
        return *this;
    }
};

// v1 dispatches through the warehouse; v2 books a carrier, behind a patch; v3 has dropped
// the warehouse branch.
durable<std::string> ship(context& ctx, std::string order, ran& r) {
    co_await ctx.run("pack", [&] { r.steps.push_back("pack"); });
    std::string via = "warehouse";
    if (code_version == 2 && ctx.patched("carrier")) via = "carrier";
    if (code_version == 3) {
        ctx.deprecate_patch("carrier");
        via = "carrier";
    }
    co_await ctx.run(via == "carrier" ? "book carrier" : "dispatch",
                     [&] { r.steps.push_back(via); });
    co_await ctx.wait("/delivered/" + order);
    co_return "delivered via " + via;
}
inline constexpr auto shipping = define<ship>("/ship/:order");

// v2 adds a fraud check before the payment wait, behind a patch.
durable<std::string> pay(context& ctx, std::string order, ran& r) {
    co_await ctx.run("reserve", [&] { r.steps.push_back("reserve"); });
    bool checked = code_version >= 2 && ctx.patched("fraud-check");
    if (checked) co_await ctx.run("fraud check", [&] { r.steps.push_back("check"); });
    co_await ctx.wait("/paid/" + order);
    co_return std::string(checked ? "checked" : "unchecked");
}
inline constexpr auto paying = define<pay>("/pay/:order");

// A patch inside a loop: each round asks again.
durable<std::vector<std::string>> rounds(context& ctx, std::string n, ran& r) {
    std::vector<std::string> out;
    for (int i = 0; i < 3; ++i) {
        std::string how = code_version >= 2 && ctx.patched("round-v2") ? "v2" : "v1";
        co_await ctx.run("round " + how, [&] { r.steps.push_back(how); });
        out.push_back(how);
        if (i < 2) co_await ctx.wait("/next/" + n);
    }
    co_return out;
}
inline constexpr auto rounding = define<rounds>("/rounds/:n");

// A patch inside a helper that runs as a branch racing a deadline: the marker is ordered
// with the branch's own operations.
durable<std::string> collect(context& ctx, std::string order, ran& r) {
    co_await ctx.run("call courier", [&] { r.steps.push_back("call"); });
    bool told = code_version >= 2 && ctx.patched("sms");
    if (told) co_await ctx.run("sms", [&] { r.steps.push_back("sms"); });
    co_await ctx.wait("/picked/" + order);
    co_return std::string(told ? "picked, told" : "picked");
}
durable<std::string> pick_up(context& ctx, std::string order, ran& r) {
    auto courier = ctx.spawn(collect(ctx, order, r));
    auto won = co_await ctx.race(courier, ctx.timer(24h, "pickup deadline"));
    co_return won.is(courier) ? won.get<0>() : std::string("missed");
}
inline constexpr auto pickups = define<pick_up>("/pickup/:order");

struct patches : ::testing::Test {
    patches() {
        code_version = 1;
        h.eng->add(shipping, deps);
        h.eng->add(paying, deps);
        h.eng->add(rounding, deps);
        h.eng->add(pickups, deps);
    }
    ~patches() override { code_version = 1; }

    std::vector<std::string> kinds(const std::string& id) {
        std::vector<std::string> out;
        for (const auto& e : h.snapshot(id).journal)
            out.push_back(std::string(to_string(e.kind)) + " " + e.name);
        return out;
    }
    template <class T>
    T result_of(const std::string& id) {
        auto snap = h.snapshot(id);
        EXPECT_EQ(snap.status, instance_status::completed) << snap.error.value_or("");
        return snap.result.value_or(nlohmann::json()).get<T>();
    }

    harness h{{.max_hot = 0}};
    ran deps;
};

TEST_F(patches, an_instance_that_passed_the_change_with_the_old_code_replays_the_old_branch) {
    auto old = h.sync(h.eng->start(shipping, std::string("o1")));
    code_version = 2;
    h.sync(h.eng->deliver(old.id(), "/delivered/o1", nullptr));
    EXPECT_EQ(result_of<std::string>(old.id()), "delivered via warehouse");
    EXPECT_EQ(deps.steps, (std::vector<std::string>{"pack", "warehouse"}));

    auto fresh = h.sync(h.eng->start(shipping, std::string("o2")));
    h.sync(h.eng->deliver(fresh.id(), "/delivered/o2", nullptr));  // replays the marker
    EXPECT_EQ(result_of<std::string>(fresh.id()), "delivered via carrier");
    EXPECT_EQ(kinds(fresh.id()),
              (std::vector<std::string>{"run pack", "patch carrier", "run book carrier",
                                        "signal /delivered/o2"}));
}

TEST_F(patches, without_the_patch_the_same_change_parks_the_old_instance) {
    auto old = h.sync(h.eng->start(shipping, std::string("o1")));
    code_version = 3;  // the new branch alone
    h.sync(h.eng->deliver(old.id(), "/delivered/o1", nullptr));
    auto snap = h.snapshot(old.id());
    EXPECT_TRUE(snap.parked);
    EXPECT_NE(snap.error.value_or("").find("journal mismatch"), std::string::npos);
}

TEST_F(patches, an_instance_waiting_where_the_change_goes_keeps_the_old_code) {
    auto old = h.sync(h.eng->start(paying, std::string("o1")));  // waits at operation #1
    code_version = 2;
    h.sync(h.eng->deliver(old.id(), "/paid/o1", nullptr));
    EXPECT_EQ(result_of<std::string>(old.id()), "unchecked");

    auto fresh = h.sync(h.eng->start(paying, std::string("o2")));
    h.sync(h.eng->deliver(fresh.id(), "/paid/o2", nullptr));
    EXPECT_EQ(result_of<std::string>(fresh.id()), "checked");
    EXPECT_EQ(deps.steps, (std::vector<std::string>{"reserve", "reserve", "check"}));
}

TEST_F(patches, an_old_instance_takes_the_new_branch_where_it_first_meets_the_patch) {
    auto id = h.sync(h.eng->start(rounding, std::string("1"))).id();
    code_version = 2;
    h.sync(h.eng->deliver(id, "/next/1", nullptr, "a"));
    h.sync(h.eng->deliver(id, "/next/1", nullptr, "b"));
    EXPECT_EQ(result_of<std::vector<std::string>>(id),
              (std::vector<std::string>{"v1", "v2", "v2"}));
    EXPECT_EQ(deps.steps, (std::vector<std::string>{"v1", "v2", "v2"}));
}

durable<int> versioned(context&, std::string) {
    co_return 1;
}
inline constexpr auto versioned_v2 = define<versioned>("/versioned/:n").version("v2");

TEST_F(patches, an_instance_records_the_version_of_the_definition_that_started_it) {
    h.eng->add(versioned_v2);
    auto id = h.sync(h.eng->start(versioned_v2, std::string("1"))).id();
    EXPECT_EQ(h.snapshot(id).version, "v2");
    auto unversioned = h.sync(h.eng->start(shipping, std::string("o9"))).id();
    EXPECT_EQ(h.snapshot(unversioned).version, "");
}

TEST_F(patches, a_patch_inside_a_branch_of_a_race_keeps_each_instance_on_its_side) {
    auto old = h.sync(h.eng->start(pickups, std::string("o1")));  // passed the point: v1
    code_version = 2;
    auto fresh = h.sync(h.eng->start(pickups, std::string("o2")));
    h.sync(h.eng->deliver(old.id(), "/picked/o1", nullptr));
    h.sync(h.eng->deliver(fresh.id(), "/picked/o2", nullptr));
    EXPECT_EQ(result_of<std::string>(old.id()), "picked");
    EXPECT_EQ(result_of<std::string>(fresh.id()), "picked, told");
    EXPECT_EQ(deps.steps, (std::vector<std::string>{"call", "call", "sms"}));
    EXPECT_TRUE(std::ranges::none_of(h.snapshot(old.id()).journal,
                                     [](auto& e) { return e.kind == op_kind::patch; }));
}

TEST_F(patches, deprecating_a_patch_replays_instances_that_recorded_it) {
    code_version = 2;
    auto patched = h.sync(h.eng->start(shipping, std::string("o1")));  // records the marker
    code_version = 3;
    h.sync(h.eng->deliver(patched.id(), "/delivered/o1", nullptr));
    EXPECT_EQ(result_of<std::string>(patched.id()), "delivered via carrier");

    auto fresh = h.sync(h.eng->start(shipping, std::string("o2")));
    h.sync(h.eng->deliver(fresh.id(), "/delivered/o2", nullptr));
    EXPECT_EQ(result_of<std::string>(fresh.id()), "delivered via carrier");
    EXPECT_EQ(kinds(fresh.id()),
              (std::vector<std::string>{"run pack", "run book carrier", "signal /delivered/o2"}));
}

}  // namespace
}  // namespace keel::process
