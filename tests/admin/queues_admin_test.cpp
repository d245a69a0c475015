// The admin API on queues: the listing of every queue with its limits, depth and admitted,
// one queue's partitions, an unknown queue, a bad ?top=, an instance shown as queued (its
// view, the listing, the stats and /metrics), an admission forged through the signal action,
// and the queues' series on /metrics.

#include <gtest/gtest.h>

#include <keel/admin/admin.hpp>
#include <keel/http/router.hpp>
#include <keel/process/queue.hpp>

#include "harness.hpp"

namespace keel::process {
namespace {

using namespace std::chrono_literals;
using test::harness;

durable<void> hold(context& ctx, std::string) {
    co_await ctx.wait("/go");
}
inline constexpr auto holding = define<hold>("/hold/:n");

const queue tenants{.name = "tenants", .concurrency = 2, .partition_concurrency = 1};

// Starts a child on the queue, in acme's partition (which a1 holds), and waits.
durable<void> sponsor(context& ctx, std::string n) {
    child_options on_queue{.on_queue = &tenants, .partition = "acme"};
    co_await ctx.start(on_queue, holding, n + "-kid");
    co_await ctx.wait("/done");
}
inline constexpr auto sponsoring = define<sponsor>("/sponsor/:n");

struct queues_admin : ::testing::Test {
    harness h;
    http::router router;
    void SetUp() override {
        h.eng->add(holding);
        h.eng->add(sponsoring);
        h.eng->add_queue(tenants);
        admin::mount(router, *h.eng, h.store, {.token = "t0ken"});
        for (auto [n, tenant] : {std::pair{"a1", "acme"}, {"a2", "acme"}, {"b1", "bolt"}}) {
            enqueue_options as{.partition = tenant};
            h.sync(h.eng->enqueue(tenants, as, holding, std::string(n)));
        }
        h.settle();
    }
    http::response get(std::string target) {
        http::request req(http::method::get, std::move(target), {{"Authorization", "Bearer t0ken"}},
                          {});
        return h.sync(router.handle(req));
    }
    http::response post(std::string target, const nlohmann::json& body) {
        http::request req(http::method::post, std::move(target),
                          {{"Authorization", "Bearer t0ken"}, {"Content-Type", "application/json"}},
                          body.dump());
        return h.sync(router.handle(req));
    }
    nlohmann::json json_of(const http::response& r) { return nlohmann::json::parse(r.body()); }
};

TEST_F(queues_admin, the_listing_shows_each_queue_with_its_limits_and_counts) {
    auto r = get("/admin/queues");
    ASSERT_EQ(r.status(), http::status::ok) << r.body();
    auto all = json_of(r)["queues"];
    ASSERT_EQ(all.size(), 1u) << all.dump();
    EXPECT_EQ(all[0]["name"], "tenants");
    EXPECT_EQ(all[0]["concurrency"], 2);
    EXPECT_EQ(all[0]["partition_concurrency"], 1);
    EXPECT_TRUE(all[0]["worker_concurrency"].is_null());
    EXPECT_TRUE(all[0]["rate"].is_null());
    EXPECT_EQ(all[0]["waiting"], 1);
    EXPECT_EQ(all[0]["admitted"], 2);
}

TEST_F(queues_admin, one_queue_shows_its_partitions) {
    auto r = get("/admin/queues/tenants");
    ASSERT_EQ(r.status(), http::status::ok) << r.body();
    auto view = json_of(r);
    EXPECT_EQ(view["partitions"],
              (nlohmann::json::parse(R"([{"partition":"acme","waiting":1,"admitted":1},
                                         {"partition":"bolt","waiting":0,"admitted":1}])")));
    EXPECT_EQ(view["more_partitions"], false);
    auto one = json_of(get("/admin/queues/tenants?top=1"));
    EXPECT_EQ(one["partitions"].size(), 1u);
    EXPECT_EQ(one["more_partitions"], true);
}

TEST_F(queues_admin, an_unknown_queue_is_404_and_a_bad_top_is_400) {
    auto unknown = get("/admin/queues/nope");
    EXPECT_EQ(unknown.status(), http::status::not_found) << unknown.body();
    EXPECT_NE(unknown.body().find("no queue nope"), std::string::npos);
    auto bad = get("/admin/queues/tenants?top=lots");
    EXPECT_EQ(bad.status(), http::status::bad_request) << bad.body();
    EXPECT_NE(bad.body().find("top"), std::string::npos);
    EXPECT_EQ(get("/admin/queues/tenants?top=5000").status(), http::status::bad_request);
}

TEST_F(queues_admin, a_queued_instance_shows_as_queued_with_its_queue) {
    auto waiting = json_of(get("/admin/instances/hold/a2"));
    EXPECT_EQ(waiting["status"], "queued");
    EXPECT_EQ(waiting["queue"], "tenants");
    auto admitted = json_of(get("/admin/instances/hold/a1"));
    EXPECT_EQ(admitted["status"], "suspended");
    EXPECT_EQ(admitted["queue"], "tenants");
}

TEST_F(queues_admin, the_listing_stats_and_metrics_count_a_queued_instance_as_queued) {
    auto queued = json_of(get("/admin/instances?status=queued"));
    ASSERT_EQ(queued["instances"].size(), 1u) << queued.dump();
    EXPECT_EQ(queued["instances"][0]["id"], "hold/a2");
    EXPECT_EQ(queued["instances"][0]["status"], "queued");
    auto suspended = json_of(get("/admin/instances?status=suspended"));
    EXPECT_EQ(suspended["instances"].size(), 2u) << suspended.dump();
    auto stats = json_of(get("/admin/stats"));
    EXPECT_EQ(stats["total"]["queued"], 1) << stats.dump();
    EXPECT_EQ(stats["total"]["suspended"], 2) << stats.dump();
    auto text = h.sync(h.eng->render_metrics());
    EXPECT_NE(text.find("keel_process_instances{definition=\"/hold/:n\",status=\"queued\"} 1\n"),
              std::string::npos)
        << text;
    auto bad = get("/admin/instances?status=waiting");
    EXPECT_EQ(bad.status(), http::status::bad_request);
    EXPECT_NE(bad.body().find("queued"), std::string::npos) << bad.body();
}

// A child waiting for its queue says so where its parent's children are listed too.
TEST_F(queues_admin, a_queued_child_is_queued_among_its_parents_children) {
    h.sync(h.eng->start(sponsoring, std::string("s")));
    h.settle();
    auto parent = json_of(get("/admin/instances/sponsor/s"));
    ASSERT_EQ(parent["children"].size(), 1u) << parent.dump();
    EXPECT_EQ(parent["children"][0]["id"], "hold/s-kid");
    EXPECT_EQ(parent["children"][0]["status"], "queued");
    auto listed = json_of(get("/admin/instances?parent=sponsor/s&status=queued"));
    ASSERT_EQ(listed["instances"].size(), 1u) << listed.dump();
    EXPECT_EQ(listed["instances"][0]["status"], "queued");
}

TEST_F(queues_admin, an_admission_cannot_be_forged_through_the_signal_action) {
    auto forged = post("/admin/signal/hold/a2", {{"path", "/keel/admitted"}, {"payload", {}}});
    EXPECT_EQ(forged.status(), http::status::bad_request) << forged.body();
    EXPECT_NE(forged.body().find("/keel/"), std::string::npos) << forged.body();
    auto child_end = post("/admin/signal/hold/a1", {{"path", "/keel/child/x"}});
    EXPECT_EQ(child_end.status(), http::status::bad_request) << child_end.body();
    h.settle();
    EXPECT_EQ(json_of(get("/admin/instances/hold/a2"))["status"], "queued");
    EXPECT_EQ(json_of(get("/admin/queues/tenants"))["partitions"][0]["admitted"], 1);
}

TEST_F(queues_admin, metrics_carry_each_queues_waiting_and_admitted) {
    auto text = h.sync(h.eng->render_metrics());
    EXPECT_NE(text.find("keel_queue_waiting{queue=\"tenants\"} 1\n"), std::string::npos) << text;
    EXPECT_NE(text.find("keel_queue_admitted{queue=\"tenants\"} 2\n"), std::string::npos);
}

}  // namespace
}  // namespace keel::process
