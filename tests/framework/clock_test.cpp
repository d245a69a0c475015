#include <gtest/gtest.h>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <keel/framework/clock.hpp>
#include <keel/test/run.hpp>

namespace {

using namespace std::chrono_literals;
namespace asio = boost::asio;

TEST(manual_clock, waits_complete_in_due_order_when_advanced) {
    asio::io_context io;
    keel::manual_clock clock;
    auto start = clock.now();
    std::vector<int> fired;
    for (int i : {3, 1, 2}) {
        clock.async_wait_until(io.get_executor(), start + std::chrono::hours(24 * i),
                               [&, i](keel::error_code ec) {
                                   EXPECT_FALSE(ec);
                                   fired.push_back(i);
                               });
    }
    EXPECT_EQ(clock.waiting(), 3u);
    EXPECT_EQ(clock.next_deadline(), start + 24h);
    clock.advance(48h);
    io.run();
    io.restart();
    EXPECT_EQ(fired, (std::vector<int>{1, 2}));
    EXPECT_EQ(clock.now(), start + 48h);
    clock.advance(72h);
    io.run();
    EXPECT_EQ(fired, (std::vector<int>{1, 2, 3}));
    EXPECT_EQ(clock.now(), start + 120h);
}

TEST(manual_clock, three_days_pass_instantly_for_a_coroutine) {
    asio::io_context io;
    keel::manual_clock clock;
    bool woke = false;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            co_await clock.sleep_for(72h);
            woke = true;
        },
        asio::detached);
    io.poll();
    EXPECT_FALSE(woke);
    clock.advance(71h);
    io.poll();
    EXPECT_FALSE(woke);
    clock.advance(1h);
    io.poll();
    EXPECT_TRUE(woke);
}

TEST(manual_clock, cancellation_completes_with_operation_aborted) {
    asio::io_context io;
    keel::manual_clock clock;
    asio::cancellation_signal signal;
    keel::error_code result;
    bool done = false;
    clock.async_wait_until(io.get_executor(), clock.now() + 1h,
                           asio::bind_cancellation_slot(signal.slot(), [&](keel::error_code ec) {
                               result = ec;
                               done = true;
                           }));
    signal.emit(asio::cancellation_type::terminal);
    io.run();
    EXPECT_TRUE(done);
    EXPECT_EQ(result, asio::error::operation_aborted);
    EXPECT_EQ(clock.waiting(), 0u);
}

TEST(manual_clock, past_due_wait_completes_at_once) {
    asio::io_context io;
    keel::manual_clock clock;
    bool done = false;
    clock.async_wait_until(io.get_executor(), clock.now() - 1s, [&](keel::error_code ec) {
        EXPECT_FALSE(ec);
        done = true;
    });
    io.run();
    EXPECT_TRUE(done);
}

TEST(system_clock, sleeps_roughly_as_long_as_asked) {
    asio::io_context io;
    keel::system_clock clock;
    auto before = std::chrono::steady_clock::now();
    keel::test::run(io, clock.sleep_for(20ms));
    EXPECT_GE(std::chrono::steady_clock::now() - before, 20ms);
}

TEST(system_clock, sleep_is_cancellable) {
    asio::io_context io;
    keel::system_clock clock;
    asio::cancellation_signal signal;
    keel::error_code result;
    clock.async_wait_until(
        io.get_executor(), clock.now() + 1h,
        asio::bind_cancellation_slot(signal.slot(), [&](keel::error_code ec) { result = ec; }));
    io.poll();
    signal.emit(asio::cancellation_type::terminal);
    io.run();
    EXPECT_EQ(result, asio::error::operation_aborted);
}

}  // namespace
