// The deterministic test scheduler, and cancellation reaching real I/O: socket reads and
// Redis requests stopped by timeout().

#include <gtest/gtest.h>

#include <array>
#include <boost/asio/local/connect_pair.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <keel/framework/concurrency.hpp>
#include <keel/framework/concurrency/test_executor.hpp>
#include <keel/framework/redis/connection.hpp>
#include <keel/framework/service.hpp>
#include <keel/test/redis_server.hpp>
#include <keel/test/run.hpp>
#include <string>

namespace {

using namespace std::chrono_literals;
namespace asio = boost::asio;
namespace kc = keel::concurrency;
using asio::awaitable;
using kc::nursery;
using socket_type = asio::local::stream_protocol::socket;

// Workers exchange messages through a channel and sleep for seed-dependent times; every
// event is noted in the trace.
awaitable<void> workload(kc::test_scheduler& sched) {
    kc::channel<int> ch(2);
    co_await kc::open_nursery([&](nursery& n) -> awaitable<void> {
        for (int w = 0; w < 4; ++w) {
            n.spawn([&sched, ch, w]() mutable -> awaitable<void> {
                for (int i = 0; i < 5; ++i) {
                    co_await ch.send(w * 100 + i);
                    sched.note("sent " + std::to_string(w * 100 + i));
                }
            });
        }
        n.spawn([&sched, ch]() mutable -> awaitable<void> {
            for (int i = 0; i < 20; ++i) {
                auto v = co_await ch.recv();
                sched.note("got " + std::to_string(*v));
                if (i % 3 == 0) co_await kc::sleep_for(std::chrono::milliseconds(1 + *v % 7));
            }
        });
        co_return;
    });
}

struct trace {
    std::uint64_t hash;
    std::vector<std::string> notes;
};

trace run_workload(std::uint64_t seed) {
    kc::test_scheduler sched(seed);
    sched.run(workload(sched));
    return {sched.trace_hash(), sched.notes()};
}

TEST(test_scheduler, same_seed_gives_the_same_trace) {
    auto first = run_workload(1234), second = run_workload(1234);
    EXPECT_EQ(first.hash, second.hash);
    EXPECT_EQ(first.notes, second.notes);
    EXPECT_EQ(first.notes.size(), 40u);

    auto other = run_workload(99);
    EXPECT_NE(first.hash, other.hash);
    EXPECT_NE(first.notes, other.notes);  // the seed really changes the interleaving
}

TEST(test_scheduler, virtual_clock_jumps_to_the_next_deadline) {
    kc::test_scheduler sched(1);
    auto start = sched.clock().now();
    sched.run(kc::sleep_for(std::chrono::hours(72)));
    EXPECT_EQ(sched.clock().now() - start, std::chrono::hours(72));
}

TEST(test_scheduler, run_until_idle) {
    kc::test_scheduler sched(1);
    int ran = 0;
    for (int i = 0; i < 3; ++i) asio::post(sched.get_executor(), [&] { ++ran; });
    EXPECT_EQ(sched.run(), 3u);
    EXPECT_EQ(ran, 3);
    EXPECT_EQ(sched.run(), 0u);
}

TEST(test_scheduler, reports_a_deadlock) {
    kc::test_scheduler sched(1);
    kc::channel<int> nobody_sends;
    EXPECT_THROW(sched.run(nobody_sends.recv()), std::runtime_error);
    nobody_sends.close();  // unblock the receiver so that it finishes
    EXPECT_GT(sched.run(), 0u);
}

awaitable<void> read_timeout_then_reuse(socket_type& a, socket_type& b, keel::duration limit) {
    std::array<char, 4> buffer{};
    auto r =
        co_await kc::timeout(limit, asio::async_read(a, asio::buffer(buffer), asio::use_awaitable));
    CO_ASSERT_TRUE(!r.has_value());
    // The cancelled read left the socket usable.
    co_await asio::async_write(b, asio::buffer(std::string("ping")), asio::use_awaitable);
    auto n =
        co_await kc::timeout(5s, asio::async_read(a, asio::buffer(buffer), asio::use_awaitable));
    CO_ASSERT_TRUE(n.has_value() && *n == 4);
    CO_ASSERT_TRUE(std::string(buffer.data(), 4) == "ping");
}

TEST(test_scheduler, timeout_of_a_socket_read_in_virtual_time) {
    kc::test_scheduler sched(3);
    socket_type a(sched.get_executor()), b(sched.get_executor());
    asio::local::connect_pair(a, b);
    auto start = sched.clock().now();
    sched.run(read_timeout_then_reuse(a, b, 5s));
    EXPECT_EQ(sched.clock().now() - start, 5s);
}

TEST(real_io, timeout_of_a_socket_read) {
    asio::io_context io;
    socket_type a(io), b(io);
    asio::local::connect_pair(a, b);
    keel::test::run(io, read_timeout_then_reuse(a, b, 20ms));
}

TEST(real_io, timeout_of_a_redis_request) {
    keel::test::redis_server server;
    asio::io_context io;
    auto conn = keel::redis::connection::create(io.get_executor(), {.url = server.url()});
    ASSERT_TRUE(conn);
    keel::test::run(io, [&]() -> awaitable<void> {
        auto slow = conn->exec("DEBUG", "SLEEP", "0.5");
        auto r = co_await kc::timeout(50ms, std::move(slow));
        CO_ASSERT_TRUE(!r.has_value());
        // The connection stays in sync: the next request gets its own reply.
        auto pong = co_await conn->exec("PING");
        CO_ASSERT_TRUE(pong && pong->as_string().value() == "PONG");
    }());
}

TEST(real_io, service_installs_its_clock_for_sleeps) {
    auto clock = std::make_shared<keel::manual_clock>();
    keel::service svc({.threads = 1, .handle_signals = false, .clock = clock});
    EXPECT_EQ(&kc::clock_of(svc.executor(0)), clock.get());
}

}  // namespace
