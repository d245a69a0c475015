// Limits on steps (ctx.run(...).limited(l)): a rate and a concurrency shared by every
// instance, waiting that is not an attempt, the limit a step waits for shown in flight, a
// dead holder's permit back after its hold, and bad declarations refused by name. On the
// memory, Redis and cluster stores, in virtual time (the store is told the engine's clock).

#include <gtest/gtest.h>

#include <chrono>
#include <keel/process/limiter.hpp>
#include <thread>

#include "harness.hpp"

namespace keel::process {
namespace {

using namespace std::chrono_literals;
using test::harness;

const limit partner{.name = "partner", .rate = 2, .per = 1s};
const limit carrier{.name = "carrier", .concurrency = 1, .max_hold = 1min};

struct tally {
    keel::clock* clock = nullptr;
    std::vector<time_point> calls;  // when each partner call began
    int running = 0;                // carrier bookings in progress
    int most = 0;                   // the most at once
    int bookings = 0;
};
struct tally_deps {
    tally book;
    template <class T>
    T& get() {
        return book;
    }
};

retry_policy once() {
    retry_policy p;
    p.max_attempts = 1;
    return p;
}

durable<int> call_partner(context& ctx, std::string, tally& t) {
    co_return co_await ctx
        .run("call",
             [&t] {
                 t.calls.push_back(t.clock->now());
                 return static_cast<int>(t.calls.size());
             })
        .limited(partner);
}
// One attempt only: waiting for the limit must not use it up.
inline constexpr auto calling = define<call_partner>("/partner/:n").retry(once);

durable<int> book_carrier(context& ctx, std::string, tally& t) {
    co_return co_await ctx
        .run("book",
             [&t]() -> asio::awaitable<int> {
                 t.most = std::max(t.most, ++t.running);
                 co_await t.clock->sleep_for(1s);
                 --t.running;
                 co_return ++t.bookings;
             })
        .limited(carrier);
}
inline constexpr auto booking = define<book_carrier>("/carrier/:n");

struct limits_test : ::testing::TestWithParam<std::size_t> {
    harness h{{.max_hot = GetParam()}};
    tally_deps deps;
    void SetUp() override {
        deps.book.clock = &h.clock;
        h.eng->add(calling, deps);
        h.eng->add(booking, deps);
    }
    std::size_t completed(std::string_view prefix, int n) {
        std::size_t done = 0;
        for (int i = 0; i < n; ++i)
            done += h.status(std::string(prefix) + std::to_string(i)) == instance_status::completed;
        return done;
    }
};

TEST_P(limits_test, a_rate_limit_spreads_attempts_over_its_window) {
    for (int i = 0; i < 5; ++i) h.sync(h.eng->start(calling, std::to_string(i)));
    auto t0 = h.clock.now();
    EXPECT_EQ(deps.book.calls.size(), 2u);
    h.advance(500ms);
    EXPECT_EQ(deps.book.calls.size(), 2u) << "a third call within the first second";
    h.advance(500ms);
    EXPECT_EQ(deps.book.calls.size(), 4u);
    h.advance(1s);
    ASSERT_EQ(deps.book.calls.size(), 5u);
    EXPECT_EQ(completed("partner/", 5), 5u) << "waiting used up no attempt";
    // No window of one second holds more than two calls.
    for (std::size_t i = 2; i < deps.book.calls.size(); ++i)
        EXPECT_GE(deps.book.calls[i] - deps.book.calls[i - 2], 1s) << "call " << i;
    EXPECT_EQ(deps.book.calls.front(), t0);
}

TEST_P(limits_test, a_concurrency_limit_runs_one_attempt_at_a_time) {
    for (int i = 0; i < 3; ++i) h.sync(h.eng->start(booking, std::to_string(i)));
    EXPECT_EQ(deps.book.running, 1);
    for (int tick = 0; tick < 50 && completed("carrier/", 3) < 3; ++tick) h.advance(100ms);
    EXPECT_EQ(completed("carrier/", 3), 3u);
    EXPECT_EQ(deps.book.most, 1);
    EXPECT_EQ(deps.book.bookings, 3);
}

TEST_P(limits_test, a_step_waiting_for_a_permit_shows_the_limit) {
    for (int i = 0; i < 3; ++i) h.sync(h.eng->start(calling, std::to_string(i)));
    // Two calls have their permits; the third waits (which one depends on the order the
    // steps asked in).
    std::vector<std::string> waiting;
    for (int i = 0; i < 3; ++i) {
        auto id = "partner/" + std::to_string(i);
        for (const auto& step : h.sync(h.eng->steps_in_flight(id))) {
            EXPECT_EQ(step.name, "call");
            if (!step.waiting_for.empty()) waiting.push_back(id);
            if (!step.waiting_for.empty()) {
                EXPECT_EQ(step.waiting_for, "partner: 2 per 1000 ms");
            }
        }
    }
    ASSERT_EQ(waiting.size(), 1u);
    h.advance(1s);
    EXPECT_EQ(h.status(waiting[0]), instance_status::completed);
    EXPECT_TRUE(h.sync(h.eng->steps_in_flight(waiting[0])).empty());
}

TEST_P(limits_test, a_dead_holders_permit_is_free_again_after_its_hold) {
    auto t0 = h.clock.now();
    auto first = h.sync(h.store.acquire_permit(carrier, "gone/1#0", t0));
    EXPECT_TRUE(first.granted);
    auto second = h.sync(h.store.acquire_permit(carrier, "next/1#0", t0 + 30s));
    EXPECT_FALSE(second.granted);
    EXPECT_GE(second.retry_after, 1ms);
    // The holder asking again (its step run again after its worker died) has it still.
    EXPECT_TRUE(h.sync(h.store.acquire_permit(carrier, "gone/1#0", t0 + 31s)).granted);
    EXPECT_TRUE(h.sync(h.store.acquire_permit(carrier, "next/1#0", t0 + 31s + 1min)).granted);
    h.sync(h.store.release_permit("carrier", "next/1#0"));
    EXPECT_TRUE(h.sync(h.store.acquire_permit(carrier, "third/1#0", t0 + 32s + 1min)).granted);
}

TEST_P(limits_test, a_rate_limits_store_answer_says_when_to_ask_again) {
    auto t0 = h.clock.now();
    EXPECT_TRUE(h.sync(h.store.acquire_permit(partner, "a#0", t0)).granted);
    EXPECT_TRUE(h.sync(h.store.acquire_permit(partner, "b#0", t0 + 100ms)).granted);
    auto third = h.sync(h.store.acquire_permit(partner, "c#0", t0 + 400ms));
    EXPECT_FALSE(third.granted);
    EXPECT_EQ(third.retry_after, 600ms);
    EXPECT_TRUE(h.sync(h.store.acquire_permit(partner, "c#0", t0 + 1s)).granted);
}

// The window is the caller's clock, not the store's: in virtual time (or on a worker whose
// clock runs apart) the counts of a window must not expire early in real time. On Redis
// the keys' TTLs are real time; 300 ms of it pass inside 100 ms of the caller's.
TEST_P(limits_test, the_window_follows_the_callers_clock_not_the_stores) {
    const limit quick{.name = "quick", .rate = 1, .per = 200ms};
    auto t0 = h.clock.now();
    EXPECT_TRUE(h.sync(h.store.acquire_permit(quick, "a#0", t0)).granted);
    std::this_thread::sleep_for(300ms);
    auto second = h.sync(h.store.acquire_permit(quick, "b#0", t0 + 100ms));
    EXPECT_FALSE(second.granted) << "the window's counts expired in real time";
    EXPECT_EQ(second.retry_after, 100ms);
}

// Three workers offered 60 calls a second, limited to 50 a second, for 30 virtual seconds:
// every one-second window holds at most 50 calls, and the limit is used to within 5%.
const limit busy_partner{.name = "busy-partner", .rate = 50, .per = 1s};

durable<int> call_busy(context& ctx, std::string, tally& t) {
    co_return co_await ctx
        .run("call",
             [&t] {
                 t.calls.push_back(t.clock->now());
                 return 1;
             })
        .limited(busy_partner);
}
inline constexpr auto busy_calling = define<call_busy>("/busy/:n");

TEST_P(limits_test, three_workers_hold_a_rate_of_fifty_a_second_for_thirty_seconds) {
    h.eng->add(busy_calling, deps);
    std::vector<std::unique_ptr<engine>> others;
    for (const char* w : {"w2", "w3"}) {
        others.push_back(std::make_unique<engine>(
            h.io.get_executor(), h.store, h.clock,
            engine_options{.worker = w, .max_hot = GetParam(), .seed = 11}));
        others.back()->add(busy_calling, deps);
        others.back()->run();
    }
    std::vector<engine*> workers{&*h.eng, others[0].get(), others[1].get()};
    auto t0 = h.clock.now();
    int n = 0;
    for (int second = 0; second < 30; ++second) {
        for (int i = 0; i < 60; ++i, ++n)
            h.sync(
                workers[static_cast<std::size_t>(n % 3)]->start(busy_calling, std::to_string(n)));
        for (int tick = 0; tick < 10; ++tick) h.advance(100ms);
    }
    auto& calls = deps.book.calls;
    std::sort(calls.begin(), calls.end());
    for (std::size_t i = 50; i < calls.size(); ++i)
        ASSERT_GE(calls[i] - calls[i - 50], 1s) << "51 calls within a second, ending at " << i;
    auto in_run =
        std::count_if(calls.begin(), calls.end(), [&](time_point t) { return t < t0 + 30s; });
    EXPECT_GE(in_run, 1425) << "the limit is used to within 5%";
    EXPECT_LE(in_run, 1500);
    for (auto& e : others) e->stop();
    h.settle();
}

durable<int> call_unlimited(context& ctx, std::string) {
    const limit nothing{.name = "nothing"};  // neither a rate nor a concurrency
    co_return co_await ctx.run("call", [] { return 1; }).limited(nothing);
}
inline constexpr auto misdeclared = define<call_unlimited>("/misdeclared/:n");

TEST_P(limits_test, a_bad_limit_fails_the_step_for_good_naming_the_field) {
    h.eng->add(misdeclared);
    auto instance = h.sync(h.eng->start(misdeclared, std::string("1")));
    auto r = h.sync(instance.wait());
    ASSERT_FALSE(r.has_value());
    EXPECT_NE(r.error().message.find("limit 'nothing': rate"), std::string::npos)
        << r.error().message;
}

INSTANTIATE_TEST_SUITE_P(hot_and_evicted, limits_test, ::testing::Values(100, 0));

TEST(limit_check, bad_declarations_are_refused_naming_the_field) {
    auto refused = [](limit l) {
        try {
            check(l);
        } catch (const std::invalid_argument& e) {
            return std::string(e.what());
        }
        return std::string("accepted");
    };
    EXPECT_EQ(refused({.name = "ok", .rate = 1}), "accepted");
    EXPECT_EQ(refused({.name = "ok", .concurrency = 2}), "accepted");
    EXPECT_NE(refused({.name = "", .rate = 1}).find("name"), std::string::npos);
    EXPECT_NE(refused({.name = "a b", .rate = 1}).find("name"), std::string::npos);
    EXPECT_NE(refused({.name = "none"}).find("rate"), std::string::npos);
    EXPECT_NE(refused({.name = "fast", .rate = 1, .per = 0s}).find("per"), std::string::npos);
    EXPECT_NE(refused({.name = "held", .concurrency = 1, .max_hold = 0s}).find("max_hold"),
              std::string::npos);
    EXPECT_EQ(describe({.name = "p", .rate = 20, .per = 1s, .concurrency = 5}),
              "p: 20 per 1000 ms, 5 at once");
}

}  // namespace
}  // namespace keel::process
