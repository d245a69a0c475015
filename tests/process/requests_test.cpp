// Requests answered by a running instance (engine::ask, ctx.receive, ctx.reply, ctx.refuse)
// and published state (ctx.publish, engine::published): answered once, refused without
// ending the flow, retried by id, timed out, and what the outside reads across evictions,
// replays and restarts of the worker.

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <chrono>
#include <keel/process/request.hpp>

#include "harness.hpp"

namespace keel::process {
namespace {

using namespace std::chrono_literals;
using test::harness;

// ---- typed emits from handlers (ctx.emit) ----

struct pallet {
    static constexpr std::string_view model_name = "pallet";
};
struct pallet_signals : signal_group {
    signal<int, pallet> loaded{this, "/pallet/:pallet/loaded"};
};

// Waits for its pallet to be loaded: the weight.
durable<int> await_loading(context& ctx, ref<pallet>, pallet_signals& signals) {
    co_return co_await ctx.wait(signals.loaded);
}
inline constexpr auto awaiting = define<await_loading>("/pallet/:pallet/await");

// Emits /pallet/<id>/loaded twice, as two steps: each reaches the waiting instance once.
durable<std::size_t> load_pallet(context& ctx, std::string id, pallet_signals& signals) {
    auto first = co_await ctx.emit(signals.loaded, ref<pallet>(id), 40);
    auto second = co_await ctx.emit(signals.loaded, ref<pallet>(id), 41);
    co_return first * 10 + second;
}
inline constexpr auto loading = define<load_pallet>("/load/:id");

struct counts {
    int executions = 0;  // how often the subscription's handler began (live or replayed)
};
struct counts_deps {
    counts book;
    pallet_signals pallets;
    template <class T>
    T& get() {
        if constexpr (std::is_same_v<T, pallet_signals>)
            return pallets;
        else
            return book;
    }
};

// Answers a cancellation with a refund; refuses one "too early" and waits for the next.
durable<std::string> subscription(context& ctx, std::string name, counts& book) {
    ctx.publish("executions", ++book.executions);  // replayed: not written again
    ctx.publish("state", "active");
    for (int round = 1;; ++round) {
        ctx.publish("round", round);
        auto req = co_await ctx.receive("/cancel");
        auto reason = req.body.value("reason", std::string());
        if (reason == "too early") {
            co_await ctx.refuse(req, "not within the first year");
            continue;
        }
        nlohmann::json refund{{"refund", 500}, {"reason", reason}};
        co_await ctx.reply(req, refund);
        ctx.publish("state", "cancelled");
        co_return name + " cancelled: " + reason;
    }
}
inline constexpr auto subscriptions = define<subscription>("/sub/:name");

// Takes a request and ends without answering it.
durable<void> drop_request(context& ctx, std::string) {
    co_await ctx.receive("/cancel");
}
inline constexpr auto dropping = define<drop_request>("/drop/:name");

struct requests_test : ::testing::TestWithParam<std::size_t> {
    harness h{{.max_hot = GetParam()}};
    counts_deps deps;
    void SetUp() override { add_all(); }
    void add_all() {
        h.eng->add(subscriptions, deps);
        h.eng->add(dropping);
        h.eng->add(awaiting, deps);
        h.eng->add(loading, deps);
    }
    expected<nlohmann::json, ask_error> ask(const std::string& id, nlohmann::json body,
                                            ask_options options = {}) {
        return h.sync(h.eng->ask(id, "/cancel", std::move(body), std::move(options)));
    }
    using outcome = std::shared_ptr<std::optional<expected<nlohmann::json, ask_error>>>;
    // Parameters, not captures: the coroutine outlives the call that starts it.
    static asio::awaitable<void> ask_into(engine& e, std::string id, std::string path,
                                          ask_options options, outcome out) {
        out->emplace(co_await e.ask(std::move(id), std::move(path), nullptr, std::move(options)));
    }
    // An ask left running while the test advances the clock.
    outcome ask_later(const std::string& id, std::string path, ask_options options) {
        auto out = std::make_shared<outcome::element_type>();
        asio::co_spawn(h.io, ask_into(*h.eng, id, std::move(path), std::move(options), out),
                       asio::detached);
        h.settle();
        return out;
    }
    nlohmann::json published(const std::string& id, const std::string& name) {
        return h.sync(h.eng->published(id, name)).value_or(nlohmann::json("(none)"));
    }
};

TEST_P(requests_test, a_request_is_answered_by_the_running_instance) {
    auto sub = h.sync(h.eng->start(subscriptions, std::string("ann")));
    EXPECT_EQ(h.status(sub.id()), instance_status::suspended);
    auto answer = ask(sub.id(), {{"reason", "moving"}});
    ASSERT_TRUE(answer.has_value()) << answer.error().message;
    EXPECT_EQ(*answer, (nlohmann::json{{"refund", 500}, {"reason", "moving"}}));
    auto r = h.sync(sub.wait());
    ASSERT_TRUE(r.has_value()) << r.error().message;
    EXPECT_EQ(*r, "ann cancelled: moving");
    EXPECT_EQ(published(sub.id(), "state"), "cancelled");
    EXPECT_TRUE(h.snapshot(sub.id()).inbox.empty());
}

TEST_P(requests_test, a_refused_request_leaves_the_flow_waiting_for_the_next) {
    auto sub = h.sync(h.eng->start(subscriptions, std::string("bob")));
    auto refused = ask(sub.id(), {{"reason", "too early"}});
    ASSERT_FALSE(refused.has_value());
    EXPECT_EQ(refused.error().why, ask_error::reason::refused);
    EXPECT_EQ(http_status(refused.error()), 422);
    EXPECT_NE(refused.error().message.find("not within the first year"), std::string::npos)
        << refused.error().message;
    EXPECT_EQ(h.status(sub.id()), instance_status::suspended);
    EXPECT_EQ(published(sub.id(), "round"), 2);
    auto answer = ask(sub.id(), {{"reason", "later"}});
    ASSERT_TRUE(answer.has_value()) << answer.error().message;
    EXPECT_EQ((*answer)["reason"], "later");
    EXPECT_EQ(h.status(sub.id()), instance_status::completed);
}

TEST_P(requests_test, an_ask_repeated_with_its_id_gets_the_same_answer_once_asked) {
    auto sub = h.sync(h.eng->start(subscriptions, std::string("cy")));
    auto first = ask(sub.id(), {{"reason", "price"}}, {.id = "client-key-1"});
    ASSERT_TRUE(first.has_value()) << first.error().message;
    ASSERT_EQ(h.status(sub.id()), instance_status::completed);
    // The instance is final now; the retry still gets the answer, and asks nothing again.
    auto again = ask(sub.id(), {{"reason", "something else"}}, {.id = "client-key-1"});
    ASSERT_TRUE(again.has_value()) << again.error().message;
    EXPECT_EQ(*again, *first);
    // A new request to the final instance is refused as such.
    auto other = ask(sub.id(), {{"reason", "price"}});
    ASSERT_FALSE(other.has_value());
    EXPECT_EQ(other.error().why, ask_error::reason::final);
    EXPECT_EQ(http_status(other.error()), 409);
    EXPECT_NE(other.error().message.find(sub.id()), std::string::npos);
}

TEST_P(requests_test, asking_an_instance_that_does_not_exist_is_not_found) {
    auto r = ask("sub/nobody", {{"reason", "x"}});
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().why, ask_error::reason::not_found);
    EXPECT_EQ(http_status(r.error()), 404);
    EXPECT_EQ(r.error().instance, "sub/nobody");
}

TEST_P(requests_test, an_unanswered_request_times_out_and_stays_for_the_handler) {
    // A subscription waits for /cancel; a request to another path is never taken.
    auto sub = h.sync(h.eng->start(subscriptions, std::string("dee")));
    auto out = ask_later(sub.id(), "/pause", {.timeout = 2s});
    EXPECT_FALSE(out->has_value());
    h.advance(1s);
    EXPECT_FALSE(out->has_value()) << "answered or given up before its timeout";
    h.advance(1500ms);
    ASSERT_TRUE(out->has_value());
    ASSERT_FALSE(out->value().has_value());
    EXPECT_EQ(out->value().error().why, ask_error::reason::timeout);
    EXPECT_EQ(http_status(out->value().error()), 504);
    EXPECT_EQ(h.snapshot(sub.id()).inbox.size(), 1u);
}

TEST_P(requests_test, an_instance_that_ends_without_answering_fails_the_ask) {
    auto drop = h.sync(h.eng->start(dropping, std::string("eve")));
    auto out = ask_later(drop.id(), "/cancel", {.timeout = 1min});
    EXPECT_EQ(h.status(drop.id()), instance_status::completed);
    h.advance(1s);
    ASSERT_TRUE(out->has_value());
    ASSERT_FALSE(out->value().has_value());
    EXPECT_EQ(out->value().error().why, ask_error::reason::final);
    EXPECT_NE(out->value().error().message.find("without answering"), std::string::npos)
        << out->value().error().message;
}

TEST_P(requests_test, published_values_are_the_latest_and_replays_write_none) {
    auto sub = h.sync(h.eng->start(subscriptions, std::string("fay")));
    EXPECT_EQ(published(sub.id(), "state"), "active");
    EXPECT_EQ(published(sub.id(), "round"), 1);
    EXPECT_EQ(published(sub.id(), "nothing"), "(none)");
    EXPECT_EQ(published("sub/nobody", "state"), "(none)");
    ASSERT_FALSE(ask(sub.id(), {{"reason", "too early"}}).has_value());
    ASSERT_FALSE(ask(sub.id(), {{"reason", "too early"}}).has_value());
    EXPECT_EQ(published(sub.id(), "round"), 3);
    // The handler's code before its first step ran once per execution, and published only
    // the first time: an evicted instance replays it.
    EXPECT_EQ(published(sub.id(), "executions"), 1);
    if (GetParam() == 0) {
        EXPECT_GE(deps.book.executions, 2) << "no replay happened";
    }
    EXPECT_EQ(h.snapshot(sub.id()).published.size(), 3u);
}

TEST_P(requests_test, requests_and_published_state_survive_a_restart_of_the_worker) {
    auto sub = h.sync(h.eng->start(subscriptions, std::string("gus")));
    ASSERT_FALSE(ask(sub.id(), {{"reason", "too early"}}).has_value());
    h.eng.reset();  // the worker goes away with everything in memory
    h.settle();
    h.eng.emplace(h.io.get_executor(), h.store, h.clock,
                  engine_options{.worker = "w2", .max_hot = GetParam(), .seed = 7});
    add_all();
    h.eng->run();
    h.settle();
    EXPECT_EQ(published(sub.id(), "round"), 2);
    auto answer = ask(sub.id(), {{"reason", "after restart"}});
    ASSERT_TRUE(answer.has_value()) << answer.error().message;
    EXPECT_EQ((*answer)["reason"], "after restart");
    EXPECT_EQ(published(sub.id(), "state"), "cancelled");
    EXPECT_EQ(published(sub.id(), "executions"), 1);
}

TEST_P(requests_test, a_handler_emits_a_typed_signal_once_per_step) {
    auto waiting = h.sync(h.eng->start(awaiting, ref<pallet>("p-1")));
    auto loader = h.sync(h.eng->start(loading, std::string("p-1")));
    auto r = h.sync(loader.wait());
    ASSERT_TRUE(r.has_value()) << r.error().message;
    // The first reached the waiting instance; the second reaches it only if it has not ended.
    EXPECT_EQ(*r / 10, 1u);
    auto w = h.sync(waiting.wait());
    ASSERT_TRUE(w.has_value()) << w.error().message;
    EXPECT_EQ(*w, 40);
    // Each emit is a step of its own, keyed by the sender's id and the step's number.
    auto journal = h.snapshot(loader.id()).journal;
    ASSERT_EQ(journal.size(), 2u);
    EXPECT_EQ(journal[0].name, "emit /pallet/:pallet/loaded");
    EXPECT_EQ(journal[1].name, "emit /pallet/:pallet/loaded");
}

TEST_P(requests_test, an_emit_step_run_again_is_a_duplicate) {
    // The same instance's step key again (as after a crash between the emit and the step's
    // commit): the emitter drops it.
    auto waiting = h.sync(h.eng->start(awaiting, ref<pallet>("p-2")));
    signals::emit_options again{.key = "load/p-2#0"};
    auto first = h.sync(deps.pallets.loaded.emit(ref<pallet>("p-2"), 7, again));
    EXPECT_EQ(first.reached, 1u);
    auto loader = h.sync(h.eng->start(loading, std::string("p-2")));
    auto r = h.sync(loader.wait());
    ASSERT_TRUE(r.has_value()) << r.error().message;
    EXPECT_EQ(*r / 10, 1u) << "the step's emit is the duplicate of the first: its reach";
    EXPECT_EQ(h.sync(waiting.wait()).value(), 7);
}

INSTANTIATE_TEST_SUITE_P(hot_and_evicted, requests_test, ::testing::Values(100, 0));

}  // namespace
}  // namespace keel::process
