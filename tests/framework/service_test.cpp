#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <keel/framework/service.hpp>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
namespace asio = boost::asio;

asio::awaitable<void> sleep(std::chrono::milliseconds d) {
    asio::steady_timer t(co_await asio::this_coro::executor, d);
    co_await t.async_wait(asio::use_awaitable);
}

TEST(service, runs_one_context_per_thread) {
    keel::service svc({.threads = 3, .handle_signals = false});
    EXPECT_EQ(svc.thread_count(), 3u);
    std::atomic<int> ran{0};
    for (std::size_t i = 0; i < 3; ++i) {
        svc.spawn(i, "probe", [&]() -> asio::awaitable<void> {
            ++ran;
            co_return;
        });
    }
    std::jthread stopper([&] {
        while (ran < 3) std::this_thread::sleep_for(1ms);
        svc.stop();
    });
    EXPECT_EQ(svc.run(), 0);
    EXPECT_EQ(ran, 3);
}

TEST(service, shutdown_lets_in_flight_work_finish_before_the_deadline) {
    keel::service svc({.threads = 1, .drain_timeout = 5s, .handle_signals = false});
    std::atomic<bool> finished{false}, hook_ran{false};
    svc.on_shutdown([&] { hook_ran = true; });
    svc.spawn(0, "slow request", [&]() -> asio::awaitable<void> {
        co_await sleep(200ms);
        finished = true;
    });
    std::jthread stopper([&] {
        std::this_thread::sleep_for(20ms);
        svc.stop();
    });
    EXPECT_EQ(svc.run(), 0);
    EXPECT_TRUE(hook_ran);
    EXPECT_TRUE(finished);
}

TEST(service, drained_hooks_run_on_their_thread_after_the_work_in_flight) {
    keel::service svc({.threads = 2, .drain_timeout = 5s, .handle_signals = false});
    std::atomic<bool> finished{false};
    std::vector<std::string> order;  // written by the hooks, one after the other
    std::thread::id hook_thread, worker_thread;
    svc.spawn(1, "slow request", [&]() -> asio::awaitable<void> {
        co_await sleep(100ms);
        finished = true;
    });
    svc.spawn(1, "probe", [&]() -> asio::awaitable<void> {
        worker_thread = std::this_thread::get_id();
        co_return;
    });
    svc.on_drained(1, [&] {
        order.push_back(finished ? "engine stopped after the request" : "too early");
        hook_thread = std::this_thread::get_id();
    });
    svc.on_drained(0, [&] { order.push_back("redis closed"); });
    EXPECT_THROW(svc.on_drained(2, [] {}), std::out_of_range);
    std::jthread stopper([&] {
        std::this_thread::sleep_for(20ms);
        svc.stop();
    });
    EXPECT_EQ(svc.run(), 0);
    EXPECT_EQ(order,
              (std::vector<std::string>{"engine stopped after the request", "redis closed"}));
    EXPECT_EQ(hook_thread, worker_thread);
}

TEST(service, work_past_the_drain_deadline_is_cancelled) {
    keel::service svc({.threads = 1, .drain_timeout = 50ms, .handle_signals = false});
    std::atomic<bool> cancelled{false};
    svc.spawn(0, "endless", [&]() -> asio::awaitable<void> {
        try {
            co_await sleep(1h);
        } catch (const boost::system::system_error& e) {
            cancelled = e.code() == asio::error::operation_aborted;
            throw;
        }
    });
    std::jthread stopper([&] { svc.stop(); });
    auto before = std::chrono::steady_clock::now();
    EXPECT_EQ(svc.run(), 0);
    EXPECT_TRUE(cancelled);
    EXPECT_LT(std::chrono::steady_clock::now() - before, 5s);
    EXPECT_EQ(svc.active_tasks(), 0u);
}

TEST(service, sigterm_begins_graceful_shutdown) {
    keel::service svc({.threads = 2});
    std::atomic<bool> finished{false};
    svc.spawn(1, "in flight", [&]() -> asio::awaitable<void> {
        co_await sleep(100ms);
        finished = true;
    });
    std::jthread killer([] {
        std::this_thread::sleep_for(20ms);
        ::kill(::getpid(), SIGTERM);
    });
    EXPECT_EQ(svc.run(), 0);
    EXPECT_TRUE(finished);
}

TEST(service, a_failing_task_is_logged_not_fatal) {
    keel::service svc({.threads = 1, .handle_signals = false});
    svc.spawn(0, "broken", []() -> asio::awaitable<void> {
        throw std::runtime_error("boom");
        co_return;
    });
    std::jthread stopper([&] {
        std::this_thread::sleep_for(20ms);
        svc.stop();
    });
    EXPECT_EQ(svc.run(), 0);
}

TEST(service, options_come_from_config) {
    keel::config::schema schema;
    keel::add_service_options(schema);
    std::vector<std::string_view> args{"--threads", "2", "--drain-timeout", "3s"};
    auto values = keel::config::load(schema, args, {});
    ASSERT_TRUE(values) << values.error().what();
    auto opts = keel::service_options_from(*values);
    EXPECT_EQ(opts.threads, 2u);
    EXPECT_EQ(opts.drain_timeout, 3s);

    std::vector<std::string_view> bad{"--log-level", "loud"};
    auto loud = keel::config::load(schema, bad, {});
    ASSERT_TRUE(loud);
    EXPECT_THROW(keel::service_options_from(*loud), std::invalid_argument);
}

}  // namespace
