// The admin API on processes that work together: a parent's children (the instance view,
// ?parent= on the listing, what a cancel goes on to cancel), published state, and requests
// sent with POST /admin/ask (answered, refused, unknown, malformed); and the same requests
// sent by a client through the service's ask route (keel/process/ask_route.hpp).

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <keel/admin/admin.hpp>
#include <keel/http/router.hpp>
#include <keel/process/ask_route.hpp>
#include <keel/process/child.hpp>
#include <keel/process/schedule.hpp>

#include "harness.hpp"

namespace keel::process {
namespace {

using namespace std::chrono_literals;
using test::harness;

durable<std::string> wait_go(context& ctx, std::string name) {
    co_await ctx.wait("/go");
    co_return name;
}
inline constexpr auto waiting = define<wait_go>("/kid/:name");

durable<int> quick(context&, std::string name) {
    co_return static_cast<int>(name.size());
}
inline constexpr auto quickly = define<quick>("/quick/:name");

// Starts a quick child, a waiting one that is cancelled with it and one that lives on;
// answers /ask requests with their body doubled, refusing negative ones.
durable<void> parent(context& ctx, std::string name) {
    ctx.publish("progress", "starting");
    auto q = co_await ctx.start(quickly, name + "-q");
    co_await ctx.join(q);
    co_await ctx.start(waiting, name + "-w");
    co_await ctx.start(child_options{.on_parent_close = parent_close::abandon}, waiting,
                       name + "-free");
    nlohmann::json started{{"started", 3}};
    ctx.publish("progress", started);
    for (;;) {
        auto req = co_await ctx.receive("/ask");
        if (req.as<int>() < 0)
            co_await ctx.refuse(req, "negative numbers are not asked");
        else
            co_await ctx.reply(req, req.as<int>() * 2);
    }
}
inline constexpr auto parenting = define<parent>("/parent/:name");

struct composition_admin : ::testing::Test {
    harness h;
    http::router router;
    void SetUp() override {
        h.eng->add(waiting);
        h.eng->add(quickly);
        h.eng->add(parenting);
        admin::mount(router, *h.eng, h.store, {.token = "t0ken"});
        add_ask_route(router, *h.eng, {"/ask"}, {.prefix = "/requests"});
        h.sync(h.eng->start(parenting, std::string("p")));
    }
    http::response call(http::method m, std::string target, std::string body = {},
                        std::string key = {}) {
        http::request req(m, std::move(target), {{"Authorization", "Bearer t0ken"}},
                          std::move(body));
        if (!req.body().empty()) req.headers().set("Content-Type", "application/json");
        if (!key.empty()) req.headers().set("Idempotency-Key", key);
        return h.sync(router.handle(req));
    }
    std::size_t journal_size() { return h.snapshot("parent/p").journal.size(); }
    nlohmann::json json_of(const http::response& r) { return nlohmann::json::parse(r.body()); }
};

TEST_F(composition_admin, the_instance_view_shows_children_and_published_state) {
    auto r = call(http::method::get, "/admin/instances/parent/p");
    ASSERT_EQ(r.status(), http::status::ok) << r.body();
    auto view = json_of(r);
    EXPECT_EQ(view["published"]["progress"], (nlohmann::json{{"started", 3}}));
    EXPECT_EQ(view["children_total"], 3);
    auto kids = view["children"];
    ASSERT_EQ(kids.size(), 3u) << kids.dump();
    EXPECT_EQ(kids[0]["id"], "quick/p-q");
    EXPECT_EQ(kids[0]["status"], "completed");
    EXPECT_EQ(kids[1]["id"], "kid/p-w");
    EXPECT_EQ(kids[1]["status"], "suspended");
    EXPECT_EQ(kids[1]["on_parent_close"], "cancel");
    EXPECT_EQ(kids[2]["on_parent_close"], "abandon");
    auto child = json_of(call(http::method::get, "/admin/instances/kid/p-w"));
    EXPECT_EQ(child["parent"], "parent/p");
    EXPECT_TRUE(child["children"].empty());
}

TEST_F(composition_admin, the_listing_filters_by_parent) {
    auto all = json_of(call(http::method::get, "/admin/instances?parent=parent/p"));
    EXPECT_EQ(all["instances"].size(), 3u);
    EXPECT_TRUE(all["next"].is_null());
    auto done =
        json_of(call(http::method::get, "/admin/instances?parent=parent/p&status=completed"));
    ASSERT_EQ(done["instances"].size(), 1u);
    EXPECT_EQ(done["instances"][0]["id"], "quick/p-q");
    // The limit counts children that match: the first suspended one, past the completed one.
    auto first_waiting = json_of(
        call(http::method::get, "/admin/instances?parent=parent/p&status=suspended&limit=1"));
    ASSERT_EQ(first_waiting["instances"].size(), 1u) << first_waiting.dump();
    EXPECT_EQ(first_waiting["instances"][0]["id"], "kid/p-w");
    auto none = call(http::method::get, "/admin/instances?parent=parent/nobody");
    EXPECT_EQ(none.status(), http::status::not_found);
    auto paged = call(http::method::get, "/admin/instances?parent=parent/p&cursor=x");
    EXPECT_EQ(paged.status(), http::status::bad_request);
    EXPECT_NE(paged.body().find("cursor"), std::string::npos);
}

TEST_F(composition_admin, an_operator_asks_a_running_instance) {
    auto r = call(http::method::post, "/admin/ask/parent/p", R"({"path": "/ask", "body": 21})");
    ASSERT_EQ(r.status(), http::status::ok) << r.body();
    EXPECT_EQ(json_of(r)["answer"], 42);
    auto refused =
        call(http::method::post, "/admin/ask/parent/p", R"({"path": "/ask", "body": -1})");
    EXPECT_EQ(refused.status(), http::status::unprocessable_content) << refused.body();
    EXPECT_NE(refused.body().find("negative numbers"), std::string::npos);
    auto missing = call(http::method::post, "/admin/ask/parent/zz", R"({"path": "/ask"})");
    EXPECT_EQ(missing.status(), http::status::not_found);
    auto no_path = call(http::method::post, "/admin/ask/parent/p", R"({"body": 1})");
    EXPECT_EQ(no_path.status(), http::status::bad_request);
    auto bad_timeout =
        call(http::method::post, "/admin/ask/parent/p", R"({"path": "/ask", "timeout_ms": 0})");
    EXPECT_EQ(bad_timeout.status(), http::status::bad_request);
    EXPECT_NE(bad_timeout.body().find("timeout_ms"), std::string::npos);
}

TEST_F(composition_admin, a_client_asks_through_the_ask_route) {
    auto r = call(http::method::post, "/requests/ask?instance=parent/p", "21");
    ASSERT_EQ(r.status(), http::status::ok) << r.body();
    EXPECT_EQ(json_of(r), (nlohmann::json{{"instance", "parent/p"}, {"answer", 42}}));
    auto refused = call(http::method::post, "/requests/ask?instance=parent/p", "-1");
    EXPECT_EQ(refused.status(), http::status::unprocessable_content) << refused.body();
    EXPECT_NE(refused.body().find("negative numbers"), std::string::npos);
    EXPECT_NE(refused.body().find("parent/p"), std::string::npos);
}

TEST_F(composition_admin, the_ask_route_refuses_what_it_cannot_send) {
    auto expect = [&](std::string target, std::string body, http::status want,
                      std::string_view mention) {
        auto r = call(http::method::post, target, std::move(body));
        EXPECT_EQ(r.status(), want) << target << ": " << r.body();
        EXPECT_NE(r.body().find(mention), std::string::npos) << target << ": " << r.body();
    };
    expect("/requests/other?instance=parent/p", "1", http::status::not_found, "/other");
    expect("/requests/ask", "1", http::status::bad_request, "instance");
    expect("/requests/ask?instance=", "1", http::status::bad_request, "instance");
    expect("/requests/ask?instance=parent/zz", "1", http::status::not_found, "parent/zz");
    expect("/requests/ask?instance=parent/p&timeout_ms=0", "1", http::status::bad_request,
           "timeout_ms");
    expect("/requests/ask?instance=parent/p&timeout_ms=12x", "1", http::status::bad_request,
           "timeout_ms");
    expect("/requests/ask?instance=parent/p&timeout_ms=300001", "1", http::status::bad_request,
           "timeout_ms");
    expect("/requests/ask?instance=parent/p", "{not json", http::status::bad_request, "");
    EXPECT_THROW(add_ask_route(router, *h.eng, {}), std::invalid_argument);
    EXPECT_THROW(add_ask_route(router, *h.eng, {"ask"}), std::invalid_argument);
    EXPECT_THROW(add_ask_route(router, *h.eng, {"/ask"}, {.timeout = std::chrono::seconds(0)}),
                 std::invalid_argument);
}

// The Idempotency-Key names the request: a retry reads the first answer, even with another
// body, and delivers nothing (the handler's journal does not grow).
TEST_F(composition_admin, a_retried_ask_with_its_key_gets_the_first_answer) {
    auto first = call(http::method::post, "/requests/ask?instance=parent/p", "21", "k-1");
    ASSERT_EQ(first.status(), http::status::ok) << first.body();
    EXPECT_EQ(json_of(first)["answer"], 42);
    h.settle();
    auto entries = journal_size();
    auto retry = call(http::method::post, "/requests/ask?instance=parent/p", "5", "k-1");
    ASSERT_EQ(retry.status(), http::status::ok) << retry.body();
    EXPECT_EQ(json_of(retry)["answer"], 42);
    h.settle();
    EXPECT_EQ(journal_size(), entries);
    auto other = call(http::method::post, "/requests/ask?instance=parent/p", "5", "k-2");
    EXPECT_EQ(json_of(other)["answer"], 10) << other.body();
}

// An instance busy elsewhere does not answer: 504 after the asked timeout, in the engine's
// (virtual) time; the request stays in the inbox.
TEST_F(composition_admin, an_ask_not_answered_in_time_is_a_504_naming_the_instance) {
    h.sync(h.eng->start(waiting, std::string("slow")));
    std::optional<http::response> answer;
    http::request req(http::method::post, "/requests/ask?instance=kid/slow&timeout_ms=2000",
                      {{"Content-Type", "application/json"}}, "1");
    asio::co_spawn(h.io, router.handle(req), [&](std::exception_ptr e, http::response r) {
        if (!e) answer = std::move(r);
    });
    h.settle();
    h.advance(std::chrono::milliseconds(1500));
    EXPECT_FALSE(answer);
    for (int i = 0; i < 10 && !answer; ++i) h.advance(std::chrono::milliseconds(200));
    ASSERT_TRUE(answer);
    EXPECT_EQ(answer->status(), http::status::gateway_timeout) << answer->body();
    EXPECT_NE(answer->body().find("kid/slow"), std::string::npos) << answer->body();
    auto late = call(http::method::post, "/requests/ask?instance=quick/p-q", "1");
    EXPECT_EQ(late.status(), http::status::conflict) << late.body();
}

TEST_F(composition_admin, a_cancel_says_which_children_it_cancels) {
    auto r = call(http::method::post, "/admin/cancel/parent/p");
    ASSERT_EQ(r.status(), http::status::ok) << r.body();
    EXPECT_EQ(json_of(r)["cancelling"], nlohmann::json::array({"kid/p-w"}));
    h.settle();
    EXPECT_EQ(h.status("kid/p-w"), instance_status::cancelled);
    EXPECT_EQ(h.status("kid/p-free"), instance_status::suspended);
    auto late = call(http::method::post, "/admin/ask/parent/p", R"({"path": "/ask", "body": 1})");
    EXPECT_EQ(late.status(), http::status::conflict) << late.body();
}

durable<std::string> tick_job(context& ctx, std::string tick) {
    co_await ctx.now();
    co_return tick;
}
inline constexpr auto ticking = define<tick_job>("/tick/:tick");

TEST_F(composition_admin, schedules_are_listed_and_acted_on) {
    h.eng->add(ticking);
    h.sync(h.eng->schedule({.name = "hourly", .cron = "0 * * * *", .zone = "UTC"}, ticking));
    for (int i = 0; i < 4; ++i) h.advance(30min);  // two hours: two ticks
    auto r = call(http::method::get, "/admin/schedules");
    ASSERT_EQ(r.status(), http::status::ok) << r.body();
    auto list = json_of(r)["schedules"];
    ASSERT_EQ(list.size(), 1u) << list.dump();
    EXPECT_EQ(list[0]["name"], "hourly");
    EXPECT_EQ(list[0]["cron"], "0 * * * *");
    EXPECT_EQ(list[0]["started"], 2);
    EXPECT_EQ(list[0]["paused"], false);
    EXPECT_EQ(list[0]["deleted"], false);
    EXPECT_FALSE(list[0]["next"].is_null());
    EXPECT_EQ(list[0]["instance"], "keel/schedule/hourly");
    ASSERT_TRUE(list[0]["last_instance"].is_string()) << list.dump();
    auto last = list[0]["last_instance"].get<std::string>();
    EXPECT_TRUE(last.starts_with("tick/")) << last;
    EXPECT_EQ(h.status(last), instance_status::completed);

    auto paused = call(http::method::post, "/admin/schedules/hourly/pause");
    ASSERT_EQ(paused.status(), http::status::ok) << paused.body();
    EXPECT_EQ(json_of(paused)["changed"], true);
    h.settle();
    EXPECT_EQ(json_of(call(http::method::get, "/admin/schedules"))["schedules"][0]["paused"], true);
    auto again = call(http::method::post, "/admin/schedules/hourly/pause");
    ASSERT_EQ(again.status(), http::status::ok) << again.body();
    EXPECT_EQ(json_of(again)["changed"], false) << again.body();
    EXPECT_EQ(json_of(again)["note"], "the schedule is paused already");
    auto resumed = call(http::method::post, "/admin/schedules/hourly/resume");
    EXPECT_EQ(json_of(resumed)["changed"], true) << resumed.body();
    h.settle();
    EXPECT_EQ(json_of(call(http::method::post, "/admin/schedules/hourly/resume"))["changed"],
              false);
    EXPECT_EQ(json_of(call(http::method::post, "/admin/schedules/hourly/pause"))["changed"], true);
    h.settle();
    EXPECT_EQ(call(http::method::post, "/admin/schedules/hourly/explode").status(),
              http::status::not_found);
    EXPECT_EQ(call(http::method::post, "/admin/schedules/nope/pause").status(),
              http::status::not_found);
    auto backfilled = call(http::method::post, "/admin/schedules/hourly/backfill",
                           R"({"from": "2026-01-01T00:00:00Z", "to": "2026-01-01T02:00:00Z"})");
    ASSERT_EQ(backfilled.status(), http::status::ok) << backfilled.body();
    h.settle();
    EXPECT_EQ(h.status("tick/20260101T020000Z"), instance_status::completed);
    EXPECT_EQ(json_of(call(http::method::get, "/admin/schedules"))["schedules"][0]["backfilled"],
              3);
    auto no_to = call(http::method::post, "/admin/schedules/hourly/backfill",
                      R"({"from": "2026-01-01T00:00:00Z"})");
    EXPECT_EQ(no_to.status(), http::status::bad_request);
    EXPECT_NE(no_to.body().find("\"to\""), std::string::npos) << no_to.body();
    auto reversed = call(http::method::post, "/admin/schedules/hourly/backfill",
                         R"({"from": "2026-01-02T00:00:00Z", "to": "2026-01-01T00:00:00Z"})");
    EXPECT_EQ(reversed.status(), http::status::bad_request);
    EXPECT_NE(reversed.body().find("from is after to"), std::string::npos) << reversed.body();
    auto deleted = call(http::method::post, "/admin/schedules/hourly/delete");
    ASSERT_EQ(deleted.status(), http::status::ok) << deleted.body();
    EXPECT_EQ(json_of(call(http::method::get, "/admin/schedules"))["schedules"][0]["deleted"],
              true);
    EXPECT_EQ(call(http::method::post, "/admin/schedules/hourly/trigger").status(),
              http::status::conflict);
}

}  // namespace
}  // namespace keel::process
