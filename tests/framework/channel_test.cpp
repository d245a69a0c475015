// Semantics of channel<T> and select, on the deterministic test scheduler.

#include <gtest/gtest.h>

#include <keel/framework/concurrency.hpp>
#include <keel/framework/concurrency/test_executor.hpp>
#include <keel/test/run.hpp>
#include <optional>
#include <string>
#include <vector>

namespace {

using namespace std::chrono_literals;
namespace asio = boost::asio;
namespace kc = keel::concurrency;
using asio::awaitable;
using kc::channel;
using kc::nursery;

class channels : public ::testing::Test {
  protected:
    keel::time_point now() { return sched.clock().now(); }

    kc::test_scheduler sched{7};
};

awaitable<void> send_all(channel<int> ch, std::vector<int> values) {
    for (int v : values) co_await ch.send(v);
}

awaitable<std::vector<int>> drain(channel<int> ch) {
    std::vector<int> got;
    while (auto v = co_await ch.recv()) got.push_back(*v);
    co_return got;
}

TEST_F(channels, rendezvous_send_waits_for_a_receiver) {
    channel<int> ch;
    keel::time_point sent_at{}, start = now();
    sched.run(kc::open_nursery([&](nursery& n) -> awaitable<void> {
        n.spawn([&]() -> awaitable<void> {
            co_await ch.send(1);
            sent_at = now();
        });
        co_await kc::sleep_for(5s);
        CO_ASSERT_TRUE(!ch.try_send(2));  // nobody is receiving: a rendezvous cannot buffer
        auto v = co_await ch.recv();
        CO_ASSERT_TRUE(v == 1);
    }));
    EXPECT_EQ(sent_at - start, 5s);
}

TEST_F(channels, buffered_send_suspends_only_when_full_and_keeps_order) {
    channel<int> ch(2);
    std::vector<int> got;
    sched.run(kc::open_nursery([&](nursery& n) -> awaitable<void> {
        co_await ch.send(1);
        co_await ch.send(2);
        CO_ASSERT_TRUE(ch.size() == 2);
        auto third = n.spawn(ch.send(3));
        co_await kc::sleep_for(1s);
        CO_ASSERT_TRUE(!third.done());  // full: the third send waits
        got.push_back(*co_await ch.recv());
        co_await third.join();
        got.push_back(*co_await ch.recv());
        got.push_back(*co_await ch.recv());
    }));
    EXPECT_EQ(got, (std::vector<int>{1, 2, 3}));
}

TEST_F(channels, try_send_and_try_recv_never_suspend) {
    channel<std::string> ch(1);
    EXPECT_FALSE(ch.try_recv());
    std::string value = "a";
    EXPECT_TRUE(ch.try_send(std::move(value)));
    std::string second = "b";
    EXPECT_FALSE(ch.try_send(std::move(second)));
    EXPECT_EQ(second, "b");  // a refused value is left untouched
    EXPECT_EQ(ch.try_recv(), "a");
    EXPECT_FALSE(ch.try_recv());
}

TEST_F(channels, close_keeps_buffered_values_and_wakes_blocked_senders) {
    channel<int> ch(2);
    bool sender_saw_close = false;
    std::vector<int> got;
    sched.run(kc::open_nursery([&](nursery& n) -> awaitable<void> {
        co_await ch.send(1);
        co_await ch.send(2);
        n.spawn([&]() -> awaitable<void> {
            try {
                co_await ch.send(3);  // blocked: the buffer is full
            } catch (const kc::channel_closed_error&) {
                sender_saw_close = true;
            }
        });
        co_await kc::sleep_for(1s);
        ch.close();
        ch.close();  // idempotent
        got = co_await drain(ch);
    }));
    EXPECT_TRUE(sender_saw_close);
    EXPECT_EQ(got, (std::vector<int>{1, 2}));
    EXPECT_THROW(ch.try_send(4), kc::channel_closed_error);
    EXPECT_THROW(sched.run(ch.send(4)), kc::channel_closed_error);
    EXPECT_EQ(sched.run(ch.recv()), std::nullopt);
}

TEST_F(channels, close_wakes_every_blocked_receiver) {
    channel<int> ch;
    int woken = 0;
    sched.run(kc::open_nursery([&](nursery& n) -> awaitable<void> {
        for (int i = 0; i < 3; ++i) {
            n.spawn([&]() -> awaitable<void> {
                auto v = co_await ch.recv();
                if (!v) ++woken;
            });
        }
        co_await kc::sleep_for(1s);
        ch.close();
    }));
    EXPECT_EQ(woken, 3);
}

TEST_F(channels, cancelled_operations_take_and_deliver_nothing) {
    channel<int> ch;
    sched.run(kc::open_nursery([&](nursery& n) -> awaitable<void> {
        auto recv = n.spawn(ch.recv());
        auto send = n.spawn(channel<int>(0).send(5));
        co_await kc::sleep_for(1s);
        recv.cancel();
        send.cancel();
        co_await kc::sleep_for(1s);
        CO_ASSERT_TRUE(recv.status() == kc::task_status::cancelled);
        CO_ASSERT_TRUE(send.status() == kc::task_status::cancelled);
        // The cancelled receiver is gone: a new one gets the next value.
        auto again = n.spawn(ch.recv());
        co_await ch.send(6);
        auto v = co_await again.join();
        CO_ASSERT_TRUE(v == 6);
    }));
}

TEST_F(channels, many_producers_one_consumer) {
    channel<int> ch(3);
    std::vector<int> got;
    sched.run(kc::open_nursery([&](nursery& n) -> awaitable<void> {
        auto consumer = n.spawn(drain(ch));
        co_await kc::open_nursery([&](nursery& producers) -> awaitable<void> {
            for (int p = 0; p < 4; ++p)
                producers.spawn(send_all(ch, {p * 10, p * 10 + 1, p * 10 + 2}));
            co_return;
        });
        ch.close();
        got = co_await consumer.join();
    }));
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, (std::vector<int>{0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32}));
}

TEST_F(channels, select_takes_a_ready_case_at_once) {
    channel<int> a(1), b(1);
    b.try_send(2);
    auto r = sched.run(kc::select(kc::case_recv(a), kc::case_recv(b)));
    ASSERT_EQ(r.index(), 1u);
    EXPECT_EQ(std::get<1>(r), 2);
}

TEST_F(channels, select_waits_for_the_first_case_and_performs_only_it) {
    channel<int> a, b, out;
    auto start = now();
    sched.run(kc::open_nursery([&](nursery& n) -> awaitable<void> {
        n.spawn([&]() -> awaitable<void> {
            co_await kc::sleep_for(3s);
            co_await b.send(9);
        });
        auto r = co_await kc::select(kc::case_recv(a), kc::case_recv(b), kc::case_send(out, 1));
        CO_ASSERT_TRUE(r.index() == 1);
        CO_ASSERT_TRUE(std::get<1>(r) == 9);
        // The other cases were withdrawn: nothing waits on `a` or `out` any more.
        CO_ASSERT_TRUE(!out.try_recv());
        CO_ASSERT_TRUE(a.try_send(1) == false);
    }));
    EXPECT_EQ(now() - start, 3s);
}

TEST_F(channels, select_send_case_delivers_to_a_receiver) {
    channel<int> out;
    sched.run(kc::open_nursery([&](nursery& n) -> awaitable<void> {
        auto receiver = n.spawn(out.recv());
        auto r = co_await kc::select(kc::case_send(out, 4), kc::case_timeout(1s));
        CO_ASSERT_TRUE(r.index() == 0);
        auto v = co_await receiver.join();
        CO_ASSERT_TRUE(v == 4);
    }));
}

TEST_F(channels, select_default_and_timeout) {
    channel<int> a;
    auto r = sched.run(kc::select(kc::case_recv(a), kc::case_default()));
    EXPECT_EQ(r.index(), 1u);

    auto start = now();
    auto t = sched.run(kc::select(kc::case_recv(a), kc::case_timeout(2s)));
    ASSERT_EQ(t.index(), 1u);
    EXPECT_EQ(std::get<1>(t).after, 2s);
    EXPECT_EQ(now() - start, 2s);
    EXPECT_EQ(sched.clock().waiting(), 0u);
}

TEST_F(channels, select_sees_a_closed_channel) {
    channel<int> a, b;
    a.close();
    auto r = sched.run(kc::select(kc::case_recv(a), kc::case_recv(b)));
    ASSERT_EQ(r.index(), 0u);
    EXPECT_EQ(std::get<0>(r), std::nullopt);
    EXPECT_THROW(sched.run(kc::select(kc::case_send(a, 1))), kc::channel_closed_error);
}

TEST_F(channels, select_is_fair_over_many_rounds) {
    channel<int> a(1), b(1);
    int rounds = 10'000, from_a = 0;
    sched.run([&]() -> awaitable<void> {
        for (int i = 0; i < rounds; ++i) {
            a.try_send(1);
            b.try_send(2);
            auto r = co_await kc::select(kc::case_recv(a), kc::case_recv(b));
            if (r.index() == 0) ++from_a;
        }
    }());
    // Binomial(10000, 0.5): the standard deviation is 50; 400 is eight of them.
    EXPECT_GT(from_a, rounds / 2 - 400);
    EXPECT_LT(from_a, rounds / 2 + 400);
}

TEST_F(channels, cancelled_select_withdraws_every_case) {
    channel<int> a, b;
    sched.run(kc::open_nursery([&](nursery& n) -> awaitable<void> {
        auto waiting =
            n.spawn(kc::select(kc::case_recv(a), kc::case_recv(b), kc::case_timeout(1h)));
        co_await kc::sleep_for(1s);
        waiting.cancel();
        co_await kc::sleep_for(1s);
        CO_ASSERT_TRUE(waiting.status() == kc::task_status::cancelled);
        CO_ASSERT_TRUE(!a.try_send(1));                // no receiver left behind
        CO_ASSERT_TRUE(sched.clock().waiting() == 0);  // and no timer
    }));
}

}  // namespace
