// Integration tests of keel::redis::connection against a real redis-server that each test
// starts on a unix socket in its own temporary directory.

#include <gtest/gtest.h>
#include <malloc.h>
#include <signal.h>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <filesystem>
#include <functional>
#include <future>
#include <keel/framework/redis/connection.hpp>
#include <keel/test/redis_server.hpp>
#include <keel/test/run.hpp>
#include <thread>

#include "../../framework/src/redis/reply_reader.hpp"

namespace {

using namespace std::chrono_literals;
namespace asio = boost::asio;
namespace redis = keel::redis;
using keel::test::redis_server;

asio::awaitable<void> pause(std::chrono::milliseconds d) {
    asio::steady_timer t(co_await asio::this_coro::executor, d);
    co_await t.async_wait(asio::use_awaitable);
}

class redis_connection : public ::testing::Test {
  protected:
    redis::connection connect(redis::connection_options opts = {}) {
        if (opts.url == redis::connection_options{}.url) opts.url = server.url();
        auto c = redis::connection::create(io.get_executor(), opts);
        if (!c) throw std::runtime_error(c.error().what());
        return std::move(*c);
    }

    template <class T>
    T run(asio::awaitable<T> task) {
        return keel::test::run(io, std::move(task));
    }

    asio::io_context io;
    redis_server server;
};

TEST_F(redis_connection, set_get_and_typed_replies) {
    auto c = connect();
    run([&]() -> asio::awaitable<void> {
        auto set = co_await c.exec("SET", "k", "v");
        EXPECT_TRUE(set) << set.error().what();
        EXPECT_EQ(set->type(), redis::reply_type::status);
        auto get = co_await c.exec("GET", "k");
        EXPECT_EQ(get->as_string().value(), "v");
        auto incr = co_await c.exec("INCRBY", "n", 42);
        EXPECT_EQ(incr->as_integer().value(), 42);
        auto missing = co_await c.exec("GET", "absent");
        EXPECT_TRUE(missing->is_nil());
        EXPECT_FALSE(missing->as_string());
        EXPECT_EQ(missing->as_string().error().code, redis::errc::unexpected_reply);
    }());
}

// The replica wait (connection_options::wait_replicas): replicate() returns once enough
// replicas have every write this connection made, and says so when fewer acknowledge in time.
TEST_F(redis_connection, replicate_waits_for_replicas_and_reports_when_they_fall_short) {
    redis_server primary({.tcp = true});
    auto replica = keel::test::start_replica(primary);
    auto none = connect({.url = primary.url()});
    auto one = connect({.url = primary.url(), .wait_replicas = 1, .replica_timeout = 5s});
    auto two = connect({.url = primary.url(), .wait_replicas = 2, .replica_timeout = 100ms});
    run([&]() -> asio::awaitable<void> {
        CO_ASSERT_TRUE((co_await one.exec("SET", "k", "v")).has_value());
        auto replicated = co_await one.replicate("k");
        EXPECT_TRUE(replicated) << replicated.error().what();
        CO_ASSERT_TRUE((co_await two.exec("SET", "k2", "v")).has_value());
        auto short_of_two = co_await two.replicate("k2");
        CO_ASSERT_TRUE(!short_of_two);
        EXPECT_EQ(short_of_two.error().code, redis::errc::not_replicated);
        EXPECT_NE(short_of_two.error().message.find("1 of 2 replicas"), std::string::npos)
            << short_of_two.error().message;
        auto unconfigured = co_await none.replicate("k");
        EXPECT_TRUE(unconfigured);
    }());
    EXPECT_EQ(replica->cli({"GET", "k"}), "v");
}

// Redis that answers but refuses writes, for each of its reasons: OOM (maxmemory reached
// under noeviction), MISCONF (an RDB save failed: its directory is gone), READONLY (the
// server was made a replica). write_refusal() gives Redis's reason from the first refused
// write until a write of a kind that was refused succeeds; a read meanwhile ends nothing;
// stats() count each kind.
TEST_F(redis_connection, refused_writes_are_named_counted_and_end_when_writes_work_again) {
    redis_server server({.extra_args = {"--enable-protected-configs", "yes"}});  // CONFIG SET dir
    auto c = connect({.url = server.url()});
    auto refused_then_recovered = [&](std::string_view code, const std::function<void()>& refuse,
                                      const std::function<void()>& accept) {
        SCOPED_TRACE(std::string(code));
        run([&]() -> asio::awaitable<void> {
            CO_ASSERT_TRUE((co_await c.exec("SET", "before", "1")).has_value());
            refuse();
            auto refused = co_await c.exec("SET", "k", "v");
            CO_ASSERT_TRUE(!refused);
            EXPECT_EQ(refused.error().server_code(), code) << refused.error().what();
            auto why = c.write_refusal();
            CO_ASSERT_TRUE(why.has_value());
            EXPECT_TRUE(why->starts_with(code)) << *why;
            auto read = co_await c.exec("EXISTS", "before");
            EXPECT_TRUE(read) << read.error().what();
            EXPECT_TRUE(c.write_refusal()) << "a read proves nothing about writes";
            accept();
            auto written = co_await c.exec("SET", "k", "v");
            EXPECT_TRUE(written) << written.error().what();
            EXPECT_FALSE(c.write_refusal());
        }());
    };

    refused_then_recovered(
        "OOM",
        [&] {
            server.cli({"CONFIG", "SET", "maxmemory", "1"});
        },
        [&] {
            server.cli({"CONFIG", "SET", "maxmemory", "0"});
        });

    auto gone = server.dir() + "/gone";
    refused_then_recovered(
        "MISCONF",
        [&] {
            std::filesystem::create_directory(gone);
            server.cli({"CONFIG", "SET", "save", "3600 1"});
            server.cli({"CONFIG", "SET", "dir", gone});
            std::filesystem::remove(gone);
            server.cli({"BGSAVE"});
            for (int i = 0; i < 200; ++i) {  // the child fails at once: no directory
                if (server.cli({"INFO", "persistence"}).find("rdb_last_bgsave_status:err") !=
                    std::string::npos)
                    break;
                std::this_thread::sleep_for(10ms);
            }
        },
        [&] {
            server.cli({"CONFIG", "SET", "dir", server.dir()});
            server.cli({"CONFIG", "SET", "save", ""});
            server.cli({"CONFIG", "SET", "stop-writes-on-bgsave-error", "no"});
        });

    redis_server primary({.tcp = true});
    refused_then_recovered(
        "READONLY",
        [&] {
            server.cli({"REPLICAOF", "127.0.0.1", std::to_string(primary.port())});
        },
        [&] {
            server.cli({"REPLICAOF", "NO", "ONE"});
        });

    auto stats = c.stats();
    EXPECT_EQ(stats.refused_oom, 1u);
    EXPECT_EQ(stats.refused_misconf, 1u);
    EXPECT_EQ(stats.refused_readonly, 1u);
}

TEST_F(redis_connection, error_replies_arrive_as_values_with_redis_message) {
    auto c = connect();
    run([&]() -> asio::awaitable<void> {
        co_await c.exec("SET", "str", "x");
        auto r = co_await c.exec("LPUSH", "str", "y");
        EXPECT_FALSE(r);
        EXPECT_EQ(r.error().code, redis::errc::server_error);
        EXPECT_EQ(r.error().server_code(), "WRONGTYPE");
        auto unknown = co_await c.exec("NOSUCHCOMMAND");
        EXPECT_FALSE(unknown);
        EXPECT_NE(unknown.error().message.find("unknown command"), std::string::npos);
        // The connection is still fine afterwards.
        auto ok = co_await c.exec("PING");
        EXPECT_TRUE(ok);
    }());
}

TEST_F(redis_connection, thousand_concurrent_coroutines_get_their_own_replies) {
    auto c = connect();
    constexpr int n = 1000;
    int matched = 0;
    keel::test::run_concurrently(io, n, [&](int i) {
        return [&, i]() -> asio::awaitable<void> {
            auto key = "key:" + std::to_string(i);
            auto value = "value:" + std::to_string(i * 7);
            auto set = co_await c.exec("SET", key, value);
            auto get = co_await c.exec("GET", key);
            auto echo = co_await c.exec("ECHO", i);
            if (set && get && echo && get->as_string().value() == value &&
                echo->as_string().value() == std::to_string(i))
                ++matched;
        };
    });
    EXPECT_EQ(matched, n);
    auto stats = c.stats();
    EXPECT_EQ(stats.replies, stats.requests);
    // Automatic pipelining: far fewer writes than requests.
    EXPECT_LT(stats.writes * 4, stats.requests) << "writes=" << stats.writes;
}

// One read that brings many replies does not hold back what their callers ask next until
// every one of them has run: the writer sends between turns, so Redis works on the first
// callers' next requests while the connection completes the rest. (Sending them all in one
// write after the last caller ran lets a service and Redis fall into taking turns with one
// batch between them, each idle while the other works: docs/architecture.md, "Redis
// client".)
TEST_F(redis_connection, callers_woken_by_one_read_send_their_next_requests_in_turns) {
    auto c = connect();
    ASSERT_TRUE(run(c.exec("PING")));  // connected: the first requests go out in one write
    constexpr int callers = 64;
    auto before = c.stats();
    std::vector<std::uint64_t> writes_when_answered;
    keel::test::run_concurrently(io, callers, [&](int i) {
        return [&, i]() -> asio::awaitable<void> {
            auto first = co_await c.exec("INCR", "first");
            writes_when_answered.push_back(c.stats().writes);
            auto next = co_await c.exec("ECHO", i);
            EXPECT_TRUE(first && next);
        };
    });
    // The first requests went out together and were answered together (Redis answers what
    // one read brought in one write): every caller ran after the same write.
    ASSERT_EQ(writes_when_answered.size(), std::size_t(callers));
    EXPECT_EQ(writes_when_answered.front(), before.writes + 1);
    // Their next requests did not wait for the last of them.
    EXPECT_GT(writes_when_answered.back(), writes_when_answered.front());
    EXPECT_GE(c.stats().writes - before.writes, 3u) << "writes=" << c.stats().writes;
}

TEST_F(redis_connection, nested_array_replies) {
    auto c = connect();
    run([&]() -> asio::awaitable<void> {
        co_await c.exec("HSET", "h", "a", "1", "b", "2");
        auto r = co_await c.exec(
            "EVAL", "return {1, {'x', {2, 'y'}}, redis.call('HGET', KEYS[1], 'b')}", 1, "h");
        EXPECT_TRUE(r) << r.error().what();
        EXPECT_EQ(r->to_debug_string(), R"([(integer) 1, ["x", [(integer) 2, "y"]], "2"])");
        auto scan = co_await c.exec("SCAN", 0, "COUNT", 100);
        CO_ASSERT_TRUE(scan->is_array());
        EXPECT_EQ(scan->elements().size(), 2u);
        EXPECT_TRUE(scan->elements()[1].is_array());
    }());
}

TEST_F(redis_connection, ten_megabyte_value_round_trips) {
    auto c = connect();
    std::string big(10 * 1024 * 1024, '\0');
    for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 31 + 7);
    run([&]() -> asio::awaitable<void> {
        auto set = co_await c.exec("SET", "big", big);
        EXPECT_TRUE(set) << set.error().what();
        auto small = co_await c.exec("SET", "after", "ok");  // pipelined behind it
        EXPECT_TRUE(small);
        auto get = co_await c.exec("GET", "big");
        CO_ASSERT_TRUE(get);
        EXPECT_TRUE(get->as_string().value() == big);
    }());
}

TEST_F(redis_connection, request_timeout_then_connection_still_usable) {
    auto c = connect({.request_timeout = 5s});
    run([&]() -> asio::awaitable<void> {
        auto slow = co_await c.execute(redis::command("DEBUG", "SLEEP", "0.3"), 50ms);
        EXPECT_FALSE(slow);
        EXPECT_EQ(slow.error().code, redis::errc::timeout);
        // The late reply to DEBUG SLEEP is read and discarded; the next reply is ours.
        auto next = co_await c.exec("ECHO", "after");
        EXPECT_TRUE(next) << next.error().what();
        EXPECT_EQ(next->as_string().value(), "after");
    }());
}

TEST_F(redis_connection, cancellation_answers_at_once_and_keeps_order) {
    auto c = connect();
    run([&]() -> asio::awaitable<void> {
        asio::cancellation_signal signal;
        auto ex = co_await asio::this_coro::executor;
        std::optional<redis::result> cancelled;
        c.async_execute(redis::command("DEBUG", "SLEEP", "0.2"), 0ms,
                        asio::bind_cancellation_slot(signal.slot(), [&](redis::result r) {
                            cancelled.emplace(std::move(r));
                        }));
        co_await pause(10ms);
        auto before = std::chrono::steady_clock::now();
        signal.emit(asio::cancellation_type::terminal);
        while (!cancelled) co_await pause(1ms);
        EXPECT_LT(std::chrono::steady_clock::now() - before, 100ms);
        EXPECT_EQ(cancelled->error().code, redis::errc::cancelled);
        auto next = co_await c.exec("ECHO", "still-in-order");
        EXPECT_EQ(next->as_string().value(), "still-in-order");
        (void)ex;
    }());
}

TEST_F(redis_connection, cancelling_a_queued_request_removes_it_before_it_is_sent) {
    auto c = connect();
    run([&]() -> asio::awaitable<void> {
        co_await c.exec("SET", "counter", 0);
        asio::cancellation_signal signal;
        std::optional<redis::result> out;
        // Issue and cancel within one handler: the request is still queued, so never sent.
        c.async_execute(redis::command("INCR", "counter"), 0ms,
                        asio::bind_cancellation_slot(
                            signal.slot(), [&](redis::result r) { out.emplace(std::move(r)); }));
        signal.emit(asio::cancellation_type::terminal);
        while (!out) co_await pause(1ms);
        EXPECT_EQ(out->error().code, redis::errc::cancelled);
        auto v = co_await c.exec("GET", "counter");
        EXPECT_EQ(v->as_string().value(), "0");
    }());
}

TEST_F(redis_connection, server_restart_mid_load_reconnects) {
    redis_server durable({.appendonly = true, .appendfsync = "always"});
    auto c = connect({.url = durable.url(), .request_timeout = 5s});
    int ok = 0, lost = 0, other = 0;
    bool restarted = false, done = false;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            for (int round = 0; round < 40; ++round) {
                auto r = co_await c.exec("INCR", "acknowledged");
                if (r)
                    ++ok;
                else if (r.error().code == redis::errc::connection_lost)
                    ++lost;
                else
                    ++other;
                if (round == 10) {
                    durable.restart();  // blocks this thread: the connection sees EOF
                    restarted = true;
                }
                co_await pause(2ms);
            }
            done = true;
        },
        asio::detached);
    keel::test::run_until(io, done, 30s);
    EXPECT_TRUE(restarted);
    EXPECT_EQ(other, 0);
    EXPECT_GE(c.stats().connects, 2u);
    // Every acknowledged INCR survived the restart (AOF, appendfsync always).
    auto count = run([&]() -> asio::awaitable<std::int64_t> {
        auto r = co_await c.exec("GET", "acknowledged");
        co_return std::stoll(r->as_string().value());
    }());
    EXPECT_GE(count, ok);
    EXPECT_LE(count, ok + lost);
}

TEST_F(redis_connection, written_but_unanswered_requests_fail_with_connection_lost) {
    auto c = connect({.request_timeout = 10s});
    run([&]() -> asio::awaitable<void> {
        EXPECT_TRUE(co_await c.exec("PING"));
        std::optional<redis::result> out;
        c.async_execute(redis::command("DEBUG", "SLEEP", "2"), 0ms,
                        [&](redis::result r) { out.emplace(std::move(r)); });
        co_await pause(100ms);
        server.kill();
        while (!out) co_await pause(5ms);
        EXPECT_EQ(out->error().code, redis::errc::connection_lost);
        EXPECT_NE(out->error().message.find("may or may not"), std::string::npos);
    }());
}

TEST_F(redis_connection, requests_queued_while_down_are_sent_after_reconnect) {
    auto c = connect({.request_timeout = 10s});
    run([&]() -> asio::awaitable<void> {
        EXPECT_TRUE(co_await c.exec("PING"));
        server.kill();
        co_await pause(50ms);
        std::optional<redis::result> out;
        c.async_execute(redis::command("SET", "queued", "yes"), 0ms,
                        [&](redis::result r) { out.emplace(std::move(r)); });
        co_await pause(100ms);
        EXPECT_FALSE(out);
        server.start();
        while (!out) co_await pause(5ms);
        EXPECT_TRUE(*out) << out->error().what();
        auto v = co_await c.exec("GET", "queued");
        EXPECT_EQ(v->as_string().value(), "yes");
    }());
}

// Thousands of requests queued while Redis is down, with deadlines out of queue order and
// cancellations in the middle of the queue, so that requests are answered from every
// position. Each caller gets exactly one answer, those still waiting are sent once Redis
// is back (and run once each), and the connection serves new requests.
TEST_F(redis_connection, thousands_expire_and_cancel_while_down_then_it_recovers) {
    redis_server durable({.appendonly = true, .appendfsync = "always"});
    auto c = connect({.url = durable.url(), .request_timeout = 60s});
    constexpr int count = 4000;
    constexpr int survivors_every = 10;  // every tenth request outlives the outage
    std::vector<int> answers(count, 0);
    std::vector<std::optional<redis::errc>> failures(count);
    std::vector<asio::cancellation_signal> signals(count);
    int answered = 0;
    keel::test::run(
        io,
        [&]() -> asio::awaitable<void> {
            EXPECT_TRUE(co_await c.exec("SET", "ran", 0));
            durable.stop();
            co_await pause(50ms);
            for (int i = 0; i < count; ++i) {
                bool survivor = i % survivors_every == 0;
                auto timeout =
                    survivor ? 60'000ms : std::chrono::milliseconds(20 + (i * 7919) % 400);
                c.async_execute(
                    redis::command("INCR", "ran"), timeout,
                    asio::bind_cancellation_slot(signals[i].slot(), [&, i](redis::result r) {
                        ++answers[i];
                        ++answered;
                        if (!r) failures[i] = r.error().code;
                    }));
            }
            for (int i = 3; i < count; i += 7)
                if (i % survivors_every != 0) signals[i].emit(asio::cancellation_type::terminal);
            while (answered < count - count / survivors_every) co_await pause(5ms);
            co_await pause(100ms);
            EXPECT_EQ(answered, count - count / survivors_every) << "a survivor was answered early";
            durable.start();
            while (answered < count) co_await pause(5ms);
            auto ran = co_await c.exec("GET", "ran");
            EXPECT_TRUE(ran) << ran.error().what();
            if (ran) {
                EXPECT_EQ(ran->as_string().value(), std::to_string(count / survivors_every));
            }
            auto ping = co_await c.exec("PING");
            EXPECT_TRUE(ping) << ping.error().what();
        }(),
        60s);
    for (int i = 0; i < count; ++i) {
        ASSERT_EQ(answers[i], 1) << "request " << i;
        if (i % survivors_every == 0) {
            EXPECT_FALSE(failures[i]) << "request " << i;
        } else {
            auto expected = i % 7 == 3 ? redis::errc::cancelled : redis::errc::not_connected;
            ASSERT_TRUE(failures[i]) << "request " << i;
            EXPECT_EQ(*failures[i], expected) << "request " << i;
        }
    }
    EXPECT_EQ(c.stats().outstanding, 0u);
}

// Found by fuzzing: a reply announcing 100,000,000 elements made the builder size a vector
// for them (7 GB) before the first arrived. Arrays now grow as their elements arrive.
TEST(reply_reader, an_announced_array_costs_what_arrives) {
    keel::redis::detail::reply_reader reader;
    auto before = mallinfo2();
    ASSERT_TRUE(reader.feed("*100000000\r\n:1\r\n:2\r\n"));
    auto next = reader.next();
    ASSERT_TRUE(next);
    EXPECT_FALSE(*next) << "incomplete";
    auto after = mallinfo2();
#if !defined(__SANITIZE_ADDRESS__)
    EXPECT_LT(after.uordblks + after.hblkhd, before.uordblks + before.hblkhd + (1u << 20));
#endif
    keel::redis::detail::reply_reader whole;
    ASSERT_TRUE(whole.feed("*3\r\n:1\r\n*1\r\n$1\r\nx\r\n$-1\r\n"));
    auto r = whole.next();
    ASSERT_TRUE(r && *r);
    ASSERT_EQ((*r)->elements().size(), 3u);
    EXPECT_EQ((*r)->elements()[1].elements()[0].as_string().value(), "x");
    EXPECT_TRUE((*r)->elements()[2].is_nil());
}

TEST_F(redis_connection, server_absent_at_start_reports_where_and_why) {
    auto path = server.dir() + "/nobody-here.sock";
    auto c = connect({.url = "unix://" + path, .request_timeout = 200ms});
    run([&]() -> asio::awaitable<void> {
        auto r = co_await c.exec("PING");
        EXPECT_FALSE(r);
        EXPECT_EQ(r.error().code, redis::errc::not_connected);
        EXPECT_NE(r.error().message.find(path), std::string::npos) << r.error().message;
        auto p = co_await c.ping(100ms);
        EXPECT_FALSE(p);
    }());
}

TEST_F(redis_connection, tcp_refused_names_host_and_port) {
    auto c = connect({.url = "redis://127.0.0.1:1", .request_timeout = 200ms});
    run([&]() -> asio::awaitable<void> {
        auto r = co_await c.exec("PING");
        EXPECT_FALSE(r);
        EXPECT_EQ(r.error().code, redis::errc::not_connected);
        EXPECT_NE(r.error().message.find("127.0.0.1:1"), std::string::npos) << r.error().message;
    }());
}

TEST_F(redis_connection, bad_url_is_rejected_at_create) {
    auto c = redis::connection::create(io.get_executor(), {.url = "redis://host:notaport"});
    ASSERT_FALSE(c);
    EXPECT_EQ(c.error().code, redis::errc::bad_url);
}

TEST_F(redis_connection, auth_and_select_on_connect_over_tcp) {
    redis_server secured({.tcp = true, .extra_args = {"--requirepass", "s3cret"}});
    auto url = "redis://:s3cret@127.0.0.1:" + std::to_string(secured.port()) + "/5";
    auto c = connect({.url = url});
    run([&]() -> asio::awaitable<void> {
        auto set = co_await c.exec("SET", "in-db-5", "yes");
        EXPECT_TRUE(set) << set.error().what();
    }());
    EXPECT_EQ(secured.cli({"-a", "s3cret", "--no-auth-warning", "-n", "5", "GET", "in-db-5"}),
              "yes");

    auto wrong = connect({.url = "redis://:wrong@127.0.0.1:" + std::to_string(secured.port()),
                          .request_timeout = 300ms});
    run([&]() -> asio::awaitable<void> {
        auto r = co_await wrong.exec("PING");
        EXPECT_FALSE(r);
        EXPECT_EQ(r.error().code, redis::errc::not_connected);
        EXPECT_NE(r.error().message.find("AUTH"), std::string::npos) << r.error().message;
    }());
}

TEST_F(redis_connection, scripts_survive_script_flush) {
    static const redis::script incr_by_two("return redis.call('INCRBY', KEYS[1], 2)");
    auto c = connect();
    c.add_script(incr_by_two);
    run([&]() -> asio::awaitable<void> {
        std::vector<std::string> keys{"s"};
        auto a = co_await c.eval(incr_by_two, keys, {});
        EXPECT_EQ(a->as_integer().value(), 2);
        co_await c.exec("SCRIPT", "FLUSH");
        auto b = co_await c.eval(incr_by_two, keys, {});  // NOSCRIPT, resent as EVAL
        EXPECT_TRUE(b) << b.error().what();
        EXPECT_EQ(b->as_integer().value(), 4);
        auto exists = co_await c.exec("SCRIPT", "EXISTS", incr_by_two.sha1());
        EXPECT_EQ(exists->elements()[0].as_integer().value(), 1);
    }());
}

TEST_F(redis_connection, scripts_are_loaded_again_after_a_restart) {
    static const redis::script get_key("return redis.call('GET', KEYS[1])");
    auto c = connect();
    c.add_script(get_key);
    run([&]() -> asio::awaitable<void> {
        EXPECT_TRUE(co_await c.exec("PING"));
        server.restart();  // empty script cache
        for (int i = 0; i < 200 && !c.connected(); ++i) co_await pause(5ms);
        co_await pause(50ms);
        auto exists = co_await c.exec("SCRIPT", "EXISTS", get_key.sha1());
        CO_ASSERT_TRUE(exists);
        EXPECT_EQ(exists->elements()[0].as_integer().value(), 1);
    }());
}

TEST_F(redis_connection, health_check_detects_a_frozen_server) {
    auto c = connect({.request_timeout = 200ms, .health_check_interval = 50ms});
    run([&]() -> asio::awaitable<void> {
        EXPECT_TRUE(co_await c.exec("PING"));
        auto pid = std::stoi(server.cli({"INFO", "server"})
                                 .substr(server.cli({"INFO", "server"}).find("process_id:") + 11));
        ::kill(pid, SIGSTOP);
        for (int i = 0; i < 200 && c.connected(); ++i) co_await pause(5ms);
        EXPECT_FALSE(c.connected());  // the unanswered PING dropped the connection
        ::kill(pid, SIGCONT);
        for (int i = 0; i < 400 && !c.connected(); ++i) co_await pause(5ms);
        EXPECT_TRUE(c.connected());
        EXPECT_TRUE(co_await c.exec("PING"));
    }());
}

TEST_F(redis_connection, close_fails_pending_requests) {
    auto c = connect();
    run([&]() -> asio::awaitable<void> {
        EXPECT_TRUE(co_await c.exec("PING"));
        std::optional<redis::result> out;
        c.async_execute(redis::command("DEBUG", "SLEEP", "0.2"), 0ms,
                        [&](redis::result r) { out.emplace(std::move(r)); });
        c.close();
        while (!out) co_await pause(1ms);
        EXPECT_EQ(out->error().code, redis::errc::closed);
        auto after = co_await c.exec("PING");
        EXPECT_EQ(after.error().code, redis::errc::closed);
    }());
}

// A connection with a lane per thread sends each thread's requests on that thread's own
// socket (CLIENT ID names the socket a request came on), and a thread it has no lane for on
// the first. `io` runs on this thread only while a step waits for its answer.
TEST_F(redis_connection, a_lane_per_thread_sends_each_threads_requests_on_its_own_socket) {
    asio::io_context other;
    auto guard = asio::make_work_guard(other);
    std::thread runner([&] { other.run(); });
    asio::any_io_executor threads[] = {io.get_executor(), other.get_executor(),
                                       io.get_executor()};  // a repeat adds no lane
    auto c = redis::connection::create(threads, {.url = server.url()}).value();
    EXPECT_EQ(c.lanes(), 2u);
    // CLIENT ID sent from a coroutine on `on`; this thread runs io (and `on`) until it is in.
    auto client_id = [&](asio::io_context& on) {
        std::atomic<std::int64_t> id{0};
        asio::co_spawn(on, c.exec("CLIENT", "ID"), [&](std::exception_ptr, redis::result r) {
            id = r ? r->integer().value_or(-1) : -1;
        });
        while (id == 0) {
            io.restart();
            io.run_for(1ms);
            if (&on != &io && &on != &other) {
                on.restart();
                on.run_for(1ms);
            }
        }
        return id.load();
    };
    auto first = client_id(io);
    auto second = client_id(other);
    EXPECT_GT(first, 0);
    EXPECT_GT(second, 0);
    EXPECT_NE(first, second);
    EXPECT_EQ(client_id(io), first);
    EXPECT_EQ(client_id(other), second);
    asio::io_context outside;
    EXPECT_EQ(client_id(outside), first);
    c.close();
    guard.reset();
    runner.join();
}

// A coroutine that owns the connection it waits on holds it through the connection's queue;
// a cluster connection's map refresh also waits on a node connection the cluster owns.
// Destroying the io_context mid-request, with a server that accepts and never answers, must
// free all of it. Parameter: the URL scheme (one node, a cluster).
asio::awaitable<void> wait_owning(redis::connection conn,
                                  [[maybe_unused]] std::shared_ptr<int> held) {
    co_await conn.exec("GET", "k");
}

struct redis_connection_teardown : ::testing::TestWithParam<std::string> {};

TEST_P(redis_connection_teardown, destroying_the_io_context_mid_request_frees_the_connection) {
    std::weak_ptr<int> held;
    {
        asio::io_context io;
        asio::ip::tcp::acceptor silent(io, {asio::ip::make_address("127.0.0.1"), 0});
        asio::ip::tcp::socket peer(io);
        silent.async_accept(peer, [](boost::system::error_code) {});
        auto conn = redis::connection::create(
            io.get_executor(),
            {.url = GetParam() + "127.0.0.1:" + std::to_string(silent.local_endpoint().port()),
             .connect_timeout = 60s,
             .request_timeout = 60s});
        ASSERT_TRUE(conn);
        auto sentinel = std::make_shared<int>(0);
        held = sentinel;
        asio::co_spawn(io, wait_owning(std::move(*conn), std::move(sentinel)), asio::detached);
        io.run_for(200ms);
        ASSERT_TRUE(peer.is_open());
        ASSERT_FALSE(held.expired());
    }
    EXPECT_TRUE(held.expired());
}
INSTANTIATE_TEST_SUITE_P(scheme, redis_connection_teardown,
                         ::testing::Values("redis://", "redis-cluster://"));

TEST_F(redis_connection, usable_from_another_thread) {
    auto c = connect();
    asio::io_context other;  // the caller's thread, not the connection's; outlives `runner`
    auto guard = asio::make_work_guard(io);
    std::jthread runner([&] { io.run(); });
    auto r = keel::test::run(
        other,
        [&]() -> asio::awaitable<redis::result> {
            co_return co_await c.exec("ECHO", "cross-thread");
        }(),
        10s);
    EXPECT_TRUE(r && r->as_string().value() == "cross-thread");
    guard.reset();
    io.stop();
    runner.join();  // the connection's thread may still hold work on `other` until here
}

}  // namespace
