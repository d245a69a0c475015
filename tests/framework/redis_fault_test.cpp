// keel::redis::connection on a network that lies: a real redis-server behind
// keel::test::fault_proxy, which stalls (a half-open peer), resets or closes connections in
// the middle of a reply, adds latency and limits bandwidth. And replicate()'s session rule:
// a WAIT never answers for a write made on an earlier socket.

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <iostream>
#include <keel/framework/redis/connection.hpp>
#include <keel/test/fault_proxy.hpp>
#include <keel/test/redis_server.hpp>
#include <keel/test/run.hpp>
#include <string>
#include <vector>

namespace {

using namespace std::chrono_literals;
namespace asio = boost::asio;
namespace redis = keel::redis;
using keel::test::fault_proxy;
using keel::test::redis_server;
using clock_type = std::chrono::steady_clock;

long long ms(clock_type::duration d) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

asio::awaitable<void> pause(std::chrono::milliseconds d) {
    asio::steady_timer t(co_await asio::this_coro::executor, d);
    co_await t.async_wait(asio::use_awaitable);
}

// The bound a silent server must be noticed within, with connection_options' defaults:
// silence_timeout (3 s) while replies are awaited; when idle, health_check_interval (1 s)
// until the PING, then the same 3 s. Two seconds of slack: under a parallel ctest on two
// cores, timers fire late (without the bound, a busy connection never noticed and an idle
// one took 6 s, so the slack still separates the fixed from the broken).
constexpr auto busy_bound = 3s + 2s;
constexpr auto idle_bound = 4s + 2s;
// After the network heals: the attempt in flight may still time out (connect_timeout, 2 s),
// then one backoff (at most reconnect_max, 2 s), plus the same slack.
constexpr auto heal_bound = 2s + 2s + 2s;

class redis_fault : public ::testing::Test {
  protected:
    redis::connection connect(redis::connection_options opts = {}) {
        if (opts.url == redis::connection_options{}.url) opts.url = proxy.url();
        auto c = redis::connection::create(io.get_executor(), opts);
        if (!c) throw std::runtime_error(c.error().what());
        return std::move(*c);
    }

    template <class T>
    T run(asio::awaitable<T> task, std::chrono::milliseconds limit = 30s) {
        return keel::test::run(io, std::move(task), limit);
    }

    // Waits until `c.connected()` is `up`, at most `limit`; returns how long it took, or
    // nullopt when it did not happen.
    asio::awaitable<std::optional<clock_type::duration>> until_connected(
        redis::connection& c, bool up, std::chrono::milliseconds limit) {
        auto start = clock_type::now();
        while (c.connected() != up) {
            if (clock_type::now() - start > limit) co_return std::nullopt;
            co_await pause(5ms);
        }
        co_return clock_type::now() - start;
    }

    asio::io_context io;
    redis_server server{{.tcp = true}};
    fault_proxy proxy{server.port()};
};

// What a caller can be answered with: the reply it asked for, or an error. Never another's.
struct tally {
    int ok = 0, failed = 0, wrong = 0;
};

// SET then GET of its own key, every 10 ms until `stop`; a GET answered with another value
// is counted as wrong. A SET that failed with connection_lost may have run ("the command may
// or may not have run"), so its GET may rightly find the value: failed, not wrong.
asio::awaitable<void> traffic(redis::connection& c, std::string name, const bool& stop,
                              tally& out) {
    for (int i = 0; !stop; ++i) {
        auto key = name + ":" + std::to_string(i);
        auto set = co_await c.exec("SET", key, key);
        auto get = co_await c.exec("GET", key);
        bool own_value = get && get->as_string() && *get->as_string() == key;
        if (own_value && set)
            ++out.ok;
        else if (get && !get->is_nil() && !own_value)
            ++out.wrong;
        else
            ++out.failed;
        co_await pause(10ms);
    }
}

// A stall with requests outstanding: today's requests time out one by one (request_timeout),
// but the connection itself must notice that the server went silent and reconnect, within
// the silence bound; once the network heals, the same connection serves again.
TEST_F(redis_fault, a_silent_server_under_traffic_is_noticed_within_the_silence_bound) {
    auto c = connect();
    bool stop = false;
    tally t;
    asio::co_spawn(io, traffic(c, "busy", stop, t), asio::detached);
    run([&]() -> asio::awaitable<void> {
        CO_ASSERT_TRUE(co_await until_connected(c, true, 5s));
        co_await pause(300ms);
        CO_ASSERT_TRUE(t.ok > 0);
        proxy.stall();
        auto noticed = co_await until_connected(c, false, 10s);
        CO_ASSERT_TRUE(noticed.has_value());
        std::cout << "silent server noticed under traffic after " << ms(*noticed) << " ms\n";
        EXPECT_LT(*noticed, busy_bound);
        proxy.heal();
        auto back = co_await until_connected(c, true, heal_bound);
        CO_ASSERT_TRUE(back.has_value());
        std::cout << "reconnected " << ms(*back) << " ms after the network healed\n";
        auto ok_before = t.ok;
        // A request queued while the network was stalled may wait out its request_timeout.
        for (int i = 0; i < 600 && t.ok == ok_before; ++i) co_await pause(10ms);
        EXPECT_GT(t.ok, ok_before);
        stop = true;
        co_await pause(50ms);
    }());
    EXPECT_EQ(t.wrong, 0);
}

// An idle connection notices through its health-check PING.
TEST_F(redis_fault, an_idle_connection_to_a_silent_server_is_noticed_by_its_ping) {
    auto c = connect();
    run([&]() -> asio::awaitable<void> {
        CO_ASSERT_TRUE(co_await c.exec("PING"));
        co_await pause(50ms);
        proxy.stall();
        auto noticed = co_await until_connected(c, false, 10s);
        CO_ASSERT_TRUE(noticed.has_value());
        std::cout << "silent server noticed when idle after " << ms(*noticed) << " ms\n";
        EXPECT_LT(*noticed, idle_bound);
        proxy.heal();
        EXPECT_TRUE(co_await until_connected(c, true, heal_bound));
        EXPECT_TRUE(co_await c.exec("PING"));
    }());
}

// Large replies cut in the middle, again and again, with RST or FIN: every caller gets its
// own value whole, or an error; never a part, never another caller's value.
class redis_fault_cut : public redis_fault, public ::testing::WithParamInterface<bool> {};

TEST_P(redis_fault_cut, cuts_mid_reply_never_hand_a_caller_a_wrong_or_half_reply) {
    bool reset = GetParam();
    auto c = connect({.reconnect_min = 5ms, .reconnect_max = 50ms});
    constexpr int keys = 16;
    auto value_of = [](int k) { return std::string(100'000 + k * 1'000, char('a' + k)); };
    run([&]() -> asio::awaitable<void> {
        for (int k = 0; k < keys; ++k) {
            auto value = value_of(k);
            CO_ASSERT_TRUE(co_await c.exec("SET", "big:" + std::to_string(k), value));
        }
    }());
    bool stop = false;
    int ok = 0, lost = 0, other = 0, wrong = 0;
    auto reader = [&](int first) -> asio::awaitable<void> {
        for (int n = first; !stop; ++n) {
            auto k = n % keys;
            auto r = co_await c.exec("GET", "big:" + std::to_string(k));
            if (r && r->as_string() && *r->as_string() == value_of(k))
                ++ok;
            else if (r)
                ++wrong;
            else if (r.error().code == redis::errc::connection_lost ||
                     r.error().code == redis::errc::not_connected)
                ++lost;
            else
                ++other;
        }
    };
    for (int i = 0; i < 6; ++i) asio::co_spawn(io, reader(i * 3), asio::detached);
    run([&]() -> asio::awaitable<void> {
        for (int round = 0; round < 12; ++round) {
            co_await pause(150ms);
            reset ? proxy.reset_mid_reply() : proxy.close_mid_reply();
        }
        co_await pause(300ms);
        auto ok_before = ok;
        co_await pause(300ms);
        EXPECT_GT(ok, ok_before);  // serving again
        stop = true;
        co_await pause(200ms);
    }());
    EXPECT_EQ(wrong, 0);
    EXPECT_EQ(other, 0);
    EXPECT_GT(lost, 0);
    EXPECT_GE(proxy.stats().cuts, 6u);
    EXPECT_GE(c.stats().connects, 7u);
}
INSTANTIATE_TEST_SUITE_P(how, redis_fault_cut, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "reset" : "close"; });

// Slow is not silent: a reply that trickles in for longer than the silence bound, over a
// link with latency, arrives whole on the same socket.
TEST_F(redis_fault, a_slow_link_is_not_taken_for_a_silent_one) {
    auto c = connect({.request_timeout = 20s});
    std::string big(1'500'000, 'x');
    run([&]() -> asio::awaitable<void> {
        CO_ASSERT_TRUE(co_await c.exec("SET", "big", big));
        proxy.set_latency(fault_proxy::direction::to_server, 300ms);
        proxy.set_latency(fault_proxy::direction::to_client, 300ms);
        proxy.set_bandwidth(384 * 1024);
        auto start = clock_type::now();
        auto r = co_await c.exec("GET", "big");
        auto took = clock_type::now() - start;
        CO_ASSERT_TRUE(r.has_value());
        EXPECT_TRUE(r->as_string() && *r->as_string() == big);
        EXPECT_GT(took, 3500ms);  // longer than the silence bound
        EXPECT_EQ(c.stats().connects, 1u);
    }());
    EXPECT_LE(proxy.stats().buffered_peak, 2 * fault_proxy::max_buffered_bytes);
}

// replicate()'s session rule, on a real primary with a real replica.
class redis_replicate_session : public ::testing::Test {
  protected:
    redis_replicate_session() : replica(keel::test::start_replica(primary)) {}

    redis::connection connect() {
        auto c = redis::connection::create(
            io.get_executor(),
            {.url = primary.tcp_url(), .wait_replicas = 1, .replica_timeout = 2s});
        if (!c) throw std::runtime_error(c.error().what());
        return std::move(*c);
    }

    asio::io_context io;
    redis_server primary{{.tcp = true}};
    std::unique_ptr<redis_server> replica;
};

TEST_F(redis_replicate_session, a_write_and_its_wait_on_one_socket_are_replicated) {
    auto c = connect();
    keel::test::run(io, [&]() -> asio::awaitable<void> {
        auto set = co_await c.exec("SET", "k", "v");
        CO_ASSERT_TRUE(set.has_value());
        auto implicit = co_await c.replicate("k");
        EXPECT_TRUE(implicit) << implicit.error().what();
        auto explicit_ = co_await c.replicate("k", *set);
        EXPECT_TRUE(explicit_) << explicit_.error().what();
    }());
}

// The socket the write went out on is killed and the connection reconnects before the WAIT:
// on the new socket WAIT would count replicas for writes that socket never made and answer
// "1", so replicate() must refuse instead.
TEST_F(redis_replicate_session, a_reconnect_between_the_write_and_its_wait_is_not_replicated) {
    auto c = connect();
    keel::test::run(io, [&]() -> asio::awaitable<void> {
        auto id = co_await c.exec("CLIENT", "ID");
        CO_ASSERT_TRUE(id && id->integer());
        auto set = co_await c.exec("SET", "k", "v");
        CO_ASSERT_TRUE(set.has_value());
        auto killed = primary.cli({"CLIENT", "KILL", "ID", std::to_string(*id->integer())});
        EXPECT_EQ(killed, "1");
        for (int i = 0; i < 400 && c.stats().connects < 2; ++i) co_await pause(5ms);
        CO_ASSERT_TRUE(c.stats().connects == 2 && c.connected());
        auto explicit_ = co_await c.replicate("k", *set);
        CO_ASSERT_TRUE(!explicit_);
        EXPECT_EQ(explicit_.error().code, redis::errc::not_replicated);
        EXPECT_NE(explicit_.error().message.find("reconnected"), std::string::npos)
            << explicit_.error().message;
        // The form without the reply, right after the write, follows the same rule.
        auto id2 = co_await c.exec("CLIENT", "ID");
        CO_ASSERT_TRUE(id2 && id2->integer());
        auto again = co_await c.exec("SET", "k2", "v");
        CO_ASSERT_TRUE(again.has_value());
        primary.cli({"CLIENT", "KILL", "ID", std::to_string(*id2->integer())});
        for (int i = 0; i < 400 && c.stats().connects < 3; ++i) co_await pause(5ms);
        CO_ASSERT_TRUE(c.stats().connects == 3 && c.connected());
        auto implicit = co_await c.replicate("k2");
        CO_ASSERT_TRUE(!implicit);
        EXPECT_EQ(implicit.error().code, redis::errc::not_replicated);
        // A write on the new socket replicates as usual.
        auto fresh = co_await c.exec("SET", "k3", "v");
        CO_ASSERT_TRUE(fresh.has_value());
        auto ok = co_await c.replicate("k3");
        EXPECT_TRUE(ok) << ok.error().what();
    }());
}

}  // namespace
