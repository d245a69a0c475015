// keel::redis::connection on a Redis Cluster: the slot and routing rules on their own, then
// a real cluster (3 primaries, 3 replicas) that every case of this binary shares, reshards,
// migrates, takes down and fails over. The cases run in one process, in this order; each
// starts from a healthy, empty cluster whatever roles the previous ones left.

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cstdio>
#include <keel/framework/redis/connection.hpp>
#include <keel/framework/redis/slot.hpp>
#include <keel/test/redis_cluster.hpp>
#include <keel/test/run.hpp>
#include <map>
#include <memory>
#include <thread>

#include "../../framework/src/redis/routing.hpp"
#include "../../framework/src/redis/slot_map.hpp"

namespace {

using namespace std::chrono_literals;
namespace asio = boost::asio;
namespace redis = keel::redis;
using redis::detail::route;
using steady = std::chrono::steady_clock;

asio::awaitable<void> pause(std::chrono::milliseconds d) {
    asio::steady_timer t(co_await asio::this_coro::executor, d);
    co_await t.async_wait(asio::use_awaitable);
}

std::int64_t ms_since(steady::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - t).count();
}

// Runs `f` (harness calls, which block) on another thread after `delay`, while the test's
// io_context runs the client; join() rethrows what it threw.
class later {
  public:
    template <class F>
    later(std::chrono::milliseconds delay, F f)
        : thread_([this, delay, f] {
              std::this_thread::sleep_for(delay);
              try {
                  f();
              } catch (...) {
                  error_ = std::current_exception();
              }
          }) {}
    ~later() {
        if (thread_.joinable()) thread_.join();
    }
    void join() {
        thread_.join();
        if (error_) std::rethrow_exception(error_);
    }

  private:
    std::exception_ptr error_;
    std::thread thread_;
};

// --- slots and routing, without a server ------------------------------------------------

TEST(redis_slot, crc16_of_the_key_or_its_hash_tag) {
    EXPECT_EQ(redis::key_slot("123456789"), 0x31C3 % 16384);  // the spec's check value
    EXPECT_EQ(redis::key_slot("{user1000}.following"), redis::key_slot("{user1000}.followers"));
    EXPECT_EQ(redis::hash_tag("{user1000}.following"), "user1000");
    EXPECT_EQ(redis::hash_tag("foo{}{bar}"), "foo{}{bar}");  // an empty tag: the whole key
    EXPECT_EQ(redis::hash_tag("foo{{bar}}zap"), "{bar");
    EXPECT_EQ(redis::hash_tag("foo{bar}{zap}"), "bar");
    EXPECT_EQ(redis::hash_tag("{unclosed"), "{unclosed");
    EXPECT_EQ(redis::key_slot("keel:{7}:wake"), redis::key_slot("keel:{7}:i:o-1:meta"));
}

route route_of(const redis::command& c) {
    return redis::detail::route_of(c.payload());
}

TEST(redis_routing, keys_found_by_the_command_table) {
    auto slot = [](std::string_view key) { return redis::key_slot(key); };
    auto get = route_of(redis::command("get", "k1"));
    EXPECT_EQ(get.what, route::kind::slot);
    EXPECT_EQ(get.slot, slot("k1"));
    auto mset = route_of(redis::command("MSET", "{a}1", "x", "{a}2", "y"));
    EXPECT_EQ(mset.what, route::kind::slot);
    EXPECT_EQ(mset.slot, slot("a"));
    // EVALSHA: numkeys, then the keys; the arguments after them are not keys.
    auto eval = route_of(redis::command("EVALSHA", "sha", 2, "{s}:a", "{s}:b", "not-a-key"));
    EXPECT_EQ(eval.what, route::kind::slot);
    EXPECT_EQ(eval.slot, slot("s"));
    EXPECT_EQ(route_of(redis::command("EVALSHA", "sha", 0, "arg")).what, route::kind::any);
    auto zunion = route_of(redis::command("ZUNIONSTORE", "{z}d", 2, "{z}a", "b"));
    EXPECT_EQ(zunion.what, route::kind::cross_slot);
    auto xread = route_of(redis::command("XREAD", "COUNT", 1, "STREAMS", "{x}1", "{x}2", 0, 0));
    EXPECT_EQ(xread.what, route::kind::slot);
    EXPECT_EQ(xread.slot, slot("x"));
    auto blpop = route_of(redis::command("BLPOP", "{q}a", "{q}b", 5));
    EXPECT_EQ(blpop.slot, slot("q"));  // the timeout is not a key
    // Not in the table: the first argument is taken for the key.
    auto unknown = route_of(redis::command("SOMEMODULE.GET", "k9"));
    EXPECT_EQ(unknown.what, route::kind::slot);
    EXPECT_EQ(unknown.slot, slot("k9"));
    EXPECT_EQ(route_of(redis::command("PING")).what, route::kind::any);
    EXPECT_EQ(route_of(redis::command("WAIT", 1, 100)).what, route::kind::any);
    EXPECT_EQ(route_of(redis::command("SCRIPT", "LOAD", "return 1")).what, route::kind::all);
    EXPECT_EQ(route_of(redis::command("FLUSHALL")).what, route::kind::all);
    EXPECT_EQ(route_of(redis::command("MULTI")).what, route::kind::unsupported);
    auto cross = route_of(redis::command("MGET", "a", "b"));
    EXPECT_EQ(cross.what, route::kind::cross_slot);
    EXPECT_NE(cross.why.find("'a'"), std::string::npos) << cross.why;
}

TEST(redis_slot_map, redirections_and_addresses) {
    auto moved = redis::detail::parse_redirection("MOVED 3999 127.0.0.1:6381");
    ASSERT_TRUE(moved);
    EXPECT_FALSE(moved->ask);
    EXPECT_EQ(moved->slot, 3999);
    EXPECT_EQ(moved->address, "127.0.0.1:6381");
    auto ask = redis::detail::parse_redirection("ASK 1 ::1:7000");
    ASSERT_TRUE(ask);
    EXPECT_TRUE(ask->ask);
    auto v6 = redis::detail::endpoint_of(ask->address, redis::endpoint{});
    ASSERT_TRUE(v6);
    EXPECT_EQ(v6->host, "::1");
    EXPECT_EQ(v6->port, 7000);
    EXPECT_FALSE(redis::detail::parse_redirection("MOVED 16384 h:1"));
    EXPECT_FALSE(redis::detail::parse_redirection("ERR MOVED 1 h:1"));
}

// --- on a real cluster ------------------------------------------------------------------

class redis_cluster_test : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        auto start = steady::now();
        cluster_ = std::make_unique<keel::test::redis_cluster>();
        std::printf("[ cluster  ] 3 primaries + 3 replicas ready in %lld ms\n",
                    static_cast<long long>(ms_since(start)));
    }
    static void TearDownTestSuite() { cluster_.reset(); }

    void SetUp() override {
        cluster().wait_healthy();
        cluster().flush_all();
    }

    // The test's connections closed on destruction by posting to `io`: let that run.
    void TearDown() override {
        io.restart();
        while (io.poll() > 0) {
        }
    }

    static keel::test::redis_cluster& cluster() { return *cluster_; }

    redis::connection connect(redis::connection_options opts = {}) {
        opts.url = cluster().url();
        auto c = redis::connection::create(io.get_executor(), opts);
        if (!c) throw std::runtime_error(c.error().what());
        return std::move(*c);
    }

    template <class T>
    T run(asio::awaitable<T> task, std::chrono::milliseconds limit = 30s) {
        return keel::test::run(io, std::move(task), limit);
    }

    // A key whose slot each primary serves, in the order of primaries().
    std::vector<std::string> key_per_primary(const std::string& prefix) {
        auto primaries = cluster().primaries();
        std::vector<std::string> keys(primaries.size());
        std::map<std::uint16_t, std::vector<std::pair<std::uint16_t, std::uint16_t>>> slots;
        for (auto p : primaries) slots[p] = cluster().slots_of(p);
        std::size_t found = 0;
        for (int i = 0; found < keys.size(); ++i) {
            auto key = prefix + std::to_string(i);
            auto slot = redis::key_slot(key);
            for (std::size_t p = 0; p < primaries.size(); ++p) {
                for (auto [first, last] : slots[primaries[p]]) {
                    if (first <= slot && slot <= last && keys[p].empty()) {
                        keys[p] = key;
                        ++found;
                    }
                }
            }
        }
        return keys;
    }

    // A primary other than the one serving `slot`.
    std::uint16_t other_primary(std::uint16_t slot) {
        auto owner = cluster().primary_of(slot);
        for (auto p : cluster().primaries())
            if (p != owner) return p;
        throw std::runtime_error("a single primary");
    }

    asio::io_context io;
    static std::unique_ptr<keel::test::redis_cluster> cluster_;
};

std::unique_ptr<keel::test::redis_cluster> redis_cluster_test::cluster_;

TEST_F(redis_cluster_test, key_slots_match_the_servers) {
    auto port = cluster().primaries().front();
    for (std::string key :
         {"", "a", "123456789", "{user1000}.following", "foo{}{bar}", "foo{{bar}}zap",
          "foo{bar}{zap}", "{", "}{", "keel:{7}:wake", "model:{order:o-1}:doc"}) {
        EXPECT_EQ(std::to_string(redis::key_slot(key)),
                  cluster().cli(port, {"CLUSTER", "KEYSLOT", key}))
            << "key '" << key << "'";
    }
}

TEST_F(redis_cluster_test, cluster_slots_and_cluster_shards_give_the_same_map) {
    auto c = connect();
    run([&]() -> asio::awaitable<void> {
        auto shards = co_await c.exec("CLUSTER", "SHARDS");
        auto slots = co_await c.exec("CLUSTER", "SLOTS");
        CO_ASSERT_TRUE(shards && slots);
        auto a = redis::detail::parse_cluster_shards(*shards, "127.0.0.1");
        auto b = redis::detail::parse_cluster_slots(*slots, "127.0.0.1");
        CO_ASSERT_TRUE(a && b);
        EXPECT_EQ(a->gaps(), "");
        EXPECT_EQ(b->gaps(), "");
        CO_ASSERT_TRUE(a->ranges.size() == b->ranges.size());
        for (std::size_t i = 0; i < a->ranges.size(); ++i) {
            EXPECT_EQ(a->ranges[i].first, b->ranges[i].first);
            EXPECT_EQ(a->ranges[i].last, b->ranges[i].last);
            EXPECT_EQ(a->ranges[i].primary, b->ranges[i].primary);
        }
        EXPECT_EQ(a->nodes.size(), 6u);  // primaries and replicas
    }());
}

TEST_F(redis_cluster_test, keys_go_to_the_primary_serving_their_slot) {
    auto keys = key_per_primary("route:");
    auto primaries = cluster().primaries();
    ASSERT_EQ(keys.size(), 3u);
    auto c = connect();
    run([&]() -> asio::awaitable<void> {
        for (const auto& key : keys) {
            auto set = co_await c.exec("SET", key, "v-" + key);
            EXPECT_TRUE(set) << key << ": " << set.error().what();
            auto get = co_await c.exec("GET", key);
            CO_ASSERT_TRUE(get);
            EXPECT_EQ(get->as_string().value_or(""), "v-" + key);
        }
    }());
    for (std::size_t i = 0; i < keys.size(); ++i)  // no -c: a key elsewhere answers MOVED
        EXPECT_EQ(cluster().cli(primaries[i], {"GET", keys[i]}), "v-" + keys[i]);
    EXPECT_EQ(c.stats().redirections, 0u);  // routed, not redirected
    EXPECT_TRUE(c.connected());
}

TEST_F(redis_cluster_test, hash_tags_keep_multi_key_commands_and_scripts_on_one_slot) {
    auto c = connect();
    redis::script both("return {redis.call('GET', KEYS[1]), redis.call('GET', KEYS[2])}");
    run([&]() -> asio::awaitable<void> {
        auto mset = co_await c.exec("MSET", "{user:1}:name", "ada", "{user:1}:mail", "a@x");
        EXPECT_TRUE(mset) << mset.error().what();
        auto mget = co_await c.exec("MGET", "{user:1}:name", "{user:1}:mail");
        CO_ASSERT_TRUE(mget);
        EXPECT_EQ(mget->to_debug_string(), R"(["ada", "a@x"])");
        std::vector<std::string> keys{"{user:1}:name", "{user:1}:mail"};
        std::vector<std::string> args;
        auto r = co_await c.eval(both, keys, args);
        CO_ASSERT_TRUE(r);
        EXPECT_EQ(r->to_debug_string(), R"(["ada", "a@x"])");
    }());
    auto owner = cluster().primary_of(redis::key_slot("user:1"));
    EXPECT_EQ(cluster().cli(owner, {"GET", "{user:1}:mail"}), "a@x");
}

TEST_F(redis_cluster_test, cross_slot_commands_are_refused_before_they_are_sent) {
    auto c = connect({.health_check_interval = {}});
    redis::script both("return redis.call('GET', KEYS[1])");
    run([&]() -> asio::awaitable<void> {
        auto warm = co_await c.exec("PING");
        CO_ASSERT_TRUE(warm);
        auto before = c.stats().writes;
        auto mget = co_await c.exec("MGET", "a", "b");
        CO_ASSERT_TRUE(!mget);
        EXPECT_EQ(mget.error().code, redis::errc::cross_slot) << mget.error().what();
        std::vector<std::string> keys{"{x}1", "{y}1"};
        std::vector<std::string> args;
        auto eval = co_await c.eval(both, keys, args);
        CO_ASSERT_TRUE(!eval);
        EXPECT_EQ(eval.error().code, redis::errc::cross_slot);
        auto multi = co_await c.exec("MULTI");
        CO_ASSERT_TRUE(!multi);
        EXPECT_EQ(multi.error().code, redis::errc::unsupported);
        EXPECT_EQ(c.stats().writes, before);  // nothing reached a server
    }());
}

TEST_F(redis_cluster_test, keyless_commands_reach_any_or_every_primary) {
    auto c = connect();
    auto keys = key_per_primary("flush:");
    run([&]() -> asio::awaitable<void> {
        for (const auto& key : keys) co_await c.exec("SET", key, "x");
        auto pong = co_await c.exec("PING");
        CO_ASSERT_TRUE(pong);
        EXPECT_EQ(pong->as_string().value_or(""), "PONG");
        auto ping = co_await c.ping();
        EXPECT_TRUE(ping) << ping.error().what();
        auto flush = co_await c.exec("FLUSHALL");  // every primary
        EXPECT_TRUE(flush) << flush.error().what();
        // execute_at: a keyless command to the node of a key.
        for (const auto& key : keys) {
            auto id = co_await c.execute_at(key, redis::command("CLUSTER", "MYID"));
            CO_ASSERT_TRUE(id);
            EXPECT_EQ(id->as_string().value_or(""),
                      cluster().node_id(cluster().primary_of(redis::key_slot(key))));
        }
    }());
    for (auto p : cluster().primaries()) EXPECT_EQ(cluster().cli(p, {"DBSIZE"}), "0") << p;
}

TEST_F(redis_cluster_test, moved_after_a_reshard_updates_the_slot_map) {
    const std::string key = "moving-key";
    auto slot = redis::key_slot(key);
    auto c = connect();
    run([&]() -> asio::awaitable<void> {
        auto set = co_await c.exec("SET", key, "v1");
        CO_ASSERT_TRUE(set);
    }());
    auto to = other_primary(slot);
    cluster().move_slot(slot, to);
    ASSERT_EQ(cluster().primary_of(slot), to);
    run([&]() -> asio::awaitable<void> {
        auto get = co_await c.exec("GET", key);  // MOVED, then to the new owner
        CO_ASSERT_TRUE(get);
        EXPECT_EQ(get->as_string().value_or(""), "v1");
        EXPECT_EQ(c.stats().redirections, 1u);
        auto again = co_await c.exec("SET", key, "v2");  // straight there now
        EXPECT_TRUE(again);
        EXPECT_EQ(c.stats().redirections, 1u);
        // The first map, and the one MOVED asked for.
        for (int i = 0; i < 200 && c.stats().refreshes < 2; ++i) co_await pause(10ms);
        EXPECT_EQ(c.stats().refreshes, 2u);
    }());
    EXPECT_EQ(cluster().cli(to, {"GET", key}), "v2");
}

// replicate()'s WAIT goes to the node whose socket made the write: a slot that moved
// between the write and the WAIT once sent it to the slot's new owner, whose socket made no
// write, and the write was reported not replicated (a webhook answered 503 for nothing).
TEST_F(redis_cluster_test, replicate_after_the_slot_moved_waits_on_the_node_that_wrote) {
    const std::string key = "replicated-then-moved";
    auto slot = redis::key_slot(key);
    auto c = connect({.wait_replicas = 1, .replica_timeout = 2s});
    run([&]() -> asio::awaitable<void> {
        auto set = co_await c.exec("SET", key, "v1");
        CO_ASSERT_TRUE(set);
        auto written = *set;
        cluster().move_slot(slot, other_primary(slot));
        auto get = co_await c.exec("GET", key);  // MOVED: the connection's map knows now
        CO_ASSERT_TRUE(get);
        EXPECT_EQ(c.stats().redirections, 1u);
        auto replicated = co_await c.replicate(key, written);
        EXPECT_TRUE(replicated) << replicated.error().what();
    }());
}

TEST_F(redis_cluster_test, ask_during_a_migration_reaches_the_importing_node) {
    auto slot = redis::key_slot("mig");
    auto from = cluster().primary_of(slot);
    auto to = other_primary(slot);
    auto c = connect();
    run([&]() -> asio::awaitable<void> {
        auto set = co_await c.exec("MSET", "{mig}:moved", "1", "{mig}:stays", "2");
        CO_ASSERT_TRUE(set);
    }());
    cluster().begin_migration(slot, to);
    cluster().migrate_key("{mig}:moved", to);
    run([&]() -> asio::awaitable<void> {
        auto moved = co_await c.exec("GET", "{mig}:moved");  // ASK: ASKING + GET on `to`
        CO_ASSERT_TRUE(moved);
        EXPECT_EQ(moved->as_string().value_or(""), "1");
        auto stays = co_await c.exec("GET", "{mig}:stays");
        CO_ASSERT_TRUE(stays);
        EXPECT_EQ(stays->as_string().value_or(""), "2");
        auto created = co_await c.exec("SET", "{mig}:new", "3");  // absent: created on `to`
        EXPECT_TRUE(created) << created.error().what();
        EXPECT_EQ(c.stats().redirections, 2u);
    }());
    EXPECT_EQ(cluster().cli(to, {"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot)}), "2");
    EXPECT_EQ(cluster().cli(from, {"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot)}), "1");
    cluster().end_migration(slot, to);
    run([&]() -> asio::awaitable<void> {
        auto all = co_await c.exec("MGET", "{mig}:moved", "{mig}:stays", "{mig}:new");
        CO_ASSERT_TRUE(all);
        EXPECT_EQ(all->to_debug_string(), R"(["1", "2", "3"])");
    }());
}

TEST_F(redis_cluster_test, tryagain_is_retried_until_the_migration_ends) {
    auto slot = redis::key_slot("try");
    auto to = other_primary(slot);
    auto c = connect();
    run([&]() -> asio::awaitable<void> {
        auto set = co_await c.exec("MSET", "{try}:a", "1", "{try}:b", "2");
        CO_ASSERT_TRUE(set);
    }());
    cluster().begin_migration(slot, to);
    cluster().migrate_key("{try}:a", to);  // the keys are split: MGET gets TRYAGAIN
    run([&]() -> asio::awaitable<void> {
        auto start = steady::now();
        auto split = co_await c.execute(redis::command("MGET", "{try}:a", "{try}:b"), 300ms);
        CO_ASSERT_TRUE(!split);
        // Retried until its deadline, not answered at once; the last attempt may have been
        // on its way then (a timeout).
        EXPECT_GE(ms_since(start), 290);
        EXPECT_TRUE(split.error().server_code() == "TRYAGAIN" ||
                    split.error().code == redis::errc::timeout)
            << split.error().what();
    }());
    later finisher(300ms, [&] { cluster().end_migration(slot, to); });
    run([&]() -> asio::awaitable<void> {
        auto both = co_await c.execute(redis::command("MGET", "{try}:a", "{try}:b"), 15s);
        EXPECT_TRUE(both) << both.error().what();
        if (both) {
            EXPECT_EQ(both->to_debug_string(), R"(["1", "2"])");
        }
    }());
    finisher.join();
}

TEST_F(redis_cluster_test, clusterdown_is_retried_until_the_slot_is_served_again) {
    const std::string key = "down-key";
    auto slot = redis::key_slot(key);
    auto owner = cluster().primary_of(slot);
    auto c = connect();
    run([&]() -> asio::awaitable<void> {
        auto set = co_await c.exec("SET", key, "v");
        CO_ASSERT_TRUE(set);
    }());
    auto s = std::to_string(slot);
    ASSERT_EQ(cluster().cli(owner, {"CLUSTER", "DELSLOTS", s}), "OK");
    ASSERT_EQ(cluster().cli(owner, {"GET", key}).substr(0, 11), "CLUSTERDOWN");
    later restorer(300ms, [&] { cluster().cli(owner, {"CLUSTER", "ADDSLOTS", s}); });
    run([&]() -> asio::awaitable<void> {
        auto start = steady::now();
        auto get = co_await c.execute(redis::command("GET", key), 15s);
        EXPECT_TRUE(get) << get.error().what();
        if (get) {
            EXPECT_EQ(get->as_string().value_or(""), "v");
        }
        EXPECT_GE(ms_since(start), 250);
    }());
    restorer.join();
}

TEST_F(redis_cluster_test, scripts_load_on_every_primary_and_recover_from_script_flush) {
    // A source of its own, so that no earlier run left it cached.
    redis::script s("return {KEYS[1], ARGV[1], '" +
                    std::to_string(steady::now().time_since_epoch().count()) + "'}");
    auto c = connect();
    c.add_script(s);
    auto keys = key_per_primary("script:");
    auto primaries = cluster().primaries();
    run([&]() -> asio::awaitable<void> {
        auto ping = co_await c.ping();  // behind each primary's SCRIPT LOAD
        EXPECT_TRUE(ping) << ping.error().what();
    }());
    for (auto p : primaries)
        EXPECT_EQ(cluster().cli(p, {"SCRIPT", "EXISTS", s.sha1()}), "1") << "primary " << p;
    cluster().cli(primaries[1], {"SCRIPT", "FLUSH"});
    run([&]() -> asio::awaitable<void> {
        for (const auto& key : keys) {
            std::vector<std::string> k{key};
            std::vector<std::string> args{"arg"};
            auto r = co_await c.eval(s, k, args);  // NOSCRIPT on primaries[1], then EVAL
            EXPECT_TRUE(r) << key << ": " << r.error().what();
        }
        auto load = co_await c.exec("SCRIPT", "LOAD", "return 'loaded everywhere'");
        EXPECT_TRUE(load) << load.error().what();
    }());
    redis::script other("return 'loaded everywhere'");
    for (auto p : primaries) {
        EXPECT_EQ(cluster().cli(p, {"SCRIPT", "EXISTS", s.sha1()}), "1") << "primary " << p;
        EXPECT_EQ(cluster().cli(p, {"SCRIPT", "EXISTS", other.sha1()}), "1") << "primary " << p;
    }
}

// A stream of writes; what succeeded, what failed and how.
struct write_log {
    std::vector<std::pair<std::string, std::string>> acknowledged;  // key, value
    std::map<redis::errc, int> failures;
    std::map<std::string, int> server_errors;
    int writes = 0;
};

TEST_F(redis_cluster_test, manual_failover_fails_no_request) {
    auto primary = cluster().primaries().front();
    auto replica = cluster().replica_of(primary);
    auto c = connect();
    write_log log;
    std::atomic<bool> done{false};
    later failover(200ms, [&] {
        struct mark_done {
            std::atomic<bool>& done;
            ~mark_done() { done = true; }
        } guard{done};
        cluster().failover(replica);
    });
    keel::test::run_concurrently(
        io, 4,
        [&](int w) {
            return [&, w]() -> asio::awaitable<void> {
                for (int n = 0; !done || n < 20; ++n) {
                    auto key = "mf:" + std::to_string(w) + ":" + std::to_string(n);
                    auto r = co_await c.exec("SET", key, "v");
                    ++log.writes;
                    if (!r) ++log.failures[r.error().code];
                    co_await pause(2ms);
                }
            };
        },
        60s);
    failover.join();
    for (auto [code, count] : log.failures)
        ADD_FAILURE() << count << " x " << redis::to_string(code);
    EXPECT_GT(c.stats().redirections, 0u);  // the demoted primary answered MOVED
    std::printf("[ failover ] manual: %d writes, %llu redirections, %zu kinds of failure\n",
                log.writes, static_cast<unsigned long long>(c.stats().redirections),
                log.failures.size());
}

TEST_F(redis_cluster_test, primary_killed_under_writes_fails_over_and_keeps_acknowledged_writes) {
    auto victim = cluster().primaries().front();
    auto promoted = cluster().replica_of(victim);
    auto victim_slots = cluster().slots_of(victim);
    auto on_victim = [&](const std::string& key) {
        auto slot = redis::key_slot(key);
        for (auto [first, last] : victim_slots)
            if (first <= slot && slot <= last) return true;
        return false;
    };
    auto c = connect({.request_timeout = 10s});
    write_log log;
    std::optional<steady::time_point> killed;
    std::optional<std::int64_t> first_write_after_kill;
    int victim_writes_after = 0;
    bool ping_failed_while_down = false;

    auto writer = [&](int w) -> asio::awaitable<void> {
        for (int n = 0; victim_writes_after < 100; ++n) {
            if (killed && ms_since(*killed) > 20'000) break;
            auto key = "fo:" + std::to_string(w) + ":" + std::to_string(n);
            auto value = "v" + std::to_string(n);
            bool promoted_owns_it = killed && on_victim(key);  // the victim cannot take it
            auto set = co_await c.exec("SET", key, value);
            ++log.writes;
            if (!set) {
                ++log.failures[set.error().code];
                if (set.error().code == redis::errc::server_error)
                    ++log.server_errors[set.error().message];
                continue;
            }
            if (promoted_owns_it) {
                // Its primary has no replica until the victim returns: nothing to WAIT for.
                log.acknowledged.emplace_back(key, value);
                if (!first_write_after_kill) first_write_after_kill = ms_since(*killed);
                ++victim_writes_after;
                continue;
            }
            // Acknowledged once a replica has it too (replication is asynchronous). Not when
            // the victim died meanwhile: WAIT would go to the promoted node, which has no
            // replica to wait for, and block its connection.
            if (killed && on_victim(key)) continue;
            auto wait = co_await c.execute_at(key, redis::command("WAIT", 1, 200));
            if (wait && wait->integer().value_or(0) >= 1) log.acknowledged.emplace_back(key, value);
        }
    };
    auto killer = [&]() -> asio::awaitable<void> {
        co_await pause(300ms);
        cluster().kill(victim);
        killed = steady::now();
        co_await pause(50ms);
        auto ping = co_await c.ping(500ms);
        ping_failed_while_down = !ping;
    };
    keel::test::run_concurrently(
        io, 9,
        [&](int i) {
            return [&, i]() -> asio::awaitable<void> {
                if (i == 8)
                    co_await killer();
                else
                    co_await writer(i);
            };
        },
        60s);

    ASSERT_TRUE(first_write_after_kill) << "no write reached the promoted replica";
    EXPECT_GE(victim_writes_after, 100);
    EXPECT_TRUE(ping_failed_while_down);
    // Only requests in flight at the kill may fail: the others waited for the new primary.
    for (auto [code, count] : log.failures)
        EXPECT_EQ(code, redis::errc::connection_lost) << count << " x " << redis::to_string(code);
    for (const auto& [message, count] : log.server_errors)
        ADD_FAILURE() << count << " x " << message;

    int lost = 0;
    run([&]() -> asio::awaitable<void> {
        auto ping = co_await c.ping();
        EXPECT_TRUE(ping) << ping.error().what();
        for (const auto& [key, value] : log.acknowledged) {
            auto get = co_await c.exec("GET", key);
            if (!get || get->as_string().value_or("") != value) ++lost;
        }
    }());
    EXPECT_EQ(cluster().primary_of(victim_slots.front().first), promoted);
    std::printf(
        "[ failover ] kill -9 of a primary to the first write on its promoted replica: "
        "%lld ms\n",
        static_cast<long long>(*first_write_after_kill));
    std::printf(
        "[ failover ] %d writes, %zu acknowledged (SET + WAIT 1), %d of them lost, "
        "%d failed (connection lost)\n",
        log.writes, log.acknowledged.size(), lost,
        log.failures.empty() ? 0 : log.failures.begin()->second);
    RecordProperty("kill_to_first_write_ms", static_cast<int>(*first_write_after_kill));
    RecordProperty("acknowledged_writes_lost", lost);
    if (lost > 0)  // replication is asynchronous: reported, not failed
        std::printf("[ failover ] WARNING: %d acknowledged writes were lost\n", lost);

    cluster().start(victim);  // it rejoins as a replica of the promoted one
    cluster().wait_healthy();
}

}  // namespace
