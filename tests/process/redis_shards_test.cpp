// The Redis store's shard count is the store's: recorded by the first worker that opens it,
// one shard for a new store on one server, the earlier builds' 16 for a store they made, and
// a configured count that is not the store's refused. On a redis-server started per test.

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <keel/framework/clock.hpp>
#include <keel/process/engine.hpp>
#include <keel/process/redis_store.hpp>
#include <keel/test/redis_server.hpp>
#include <keel/test/run.hpp>
#include <map>
#include <string>

namespace keel::process {
namespace {

using namespace std::chrono_literals;

const time_point now = time_point(std::chrono::hours(24 * 365 * 50));

struct redis_shards : ::testing::Test {
    template <class T>
    T sync(asio::awaitable<T> task) {
        return keel::test::run(io, std::move(task));
    }
    redis::connection connect() {
        return std::move(
            redis::connection::create(io.get_executor(), {.url = server.url()}).value());
    }
    std::string get(const std::string& key) {
        auto r = sync(admin.exec("GET", key));
        return r && !r->is_nil() ? r->as_string().value() : "(nil)";
    }
    long long exists(const std::string& key) {
        return sync(admin.exec("EXISTS", key))->as_integer().value();
    }
    void start(redis_store& store, const std::string& id) {
        auto r =
            sync(store.start(start_request{id, "/def", nlohmann::json::array(), "w1", now, 30s}));
        ASSERT_TRUE(r.created);
    }

    asio::io_context io;
    keel::test::redis_server server;
    redis::connection admin = connect();
};

TEST_F(redis_shards, a_new_store_on_one_server_records_one_shard_and_keeps_its_instances_there) {
    auto conn = connect();
    redis_store store(conn);
    EXPECT_THROW(store.shard_of("order/1"), store_unavailable);  // the count is not known yet
    EXPECT_EQ(sync(store.open()), 1u);
    EXPECT_EQ(get("keel:shards"), "1");
    for (auto id : {"order/1", "order/2", "order/3"}) {
        start(store, id);
        EXPECT_EQ(exists(std::string("keel:{0}:i:") + id + ":meta"), 1) << id;
    }
}

// The store is opened once, by its owner; a call before that is refused as an unavailable
// store's are (503), with what to do, and writes nothing.
TEST_F(redis_shards, a_call_before_the_store_is_open_is_refused_and_opening_once_serves) {
    auto conn = connect();
    redis_store store(conn, {.shards = 2});  // a configured count: keys are known before
    EXPECT_EQ(store.state(), redis_store::store_state::closed);
    try {
        start(store, "order/1");
        ADD_FAILURE() << "a start on a store that is not open went through";
    } catch (const store_unavailable& e) {
        EXPECT_NE(std::string(e.what()).find("not open yet"), std::string::npos) << e.what();
    }
    EXPECT_EQ(exists("keel:shards"), 0);
    EXPECT_EQ(exists("keel:{0}:i:order/1:meta") + exists("keel:{1}:i:order/1:meta"), 0);
    EXPECT_EQ(sync(store.open()), 2u);
    EXPECT_EQ(store.state(), redis_store::store_state::open);
    start(store, "order/1");
    EXPECT_EQ(get("keel:shards"), "2");
    EXPECT_TRUE(sync(store.load("order/1", false)).has_value());
    EXPECT_EQ(sync(store.open()), 2u);  // once open, at once
}

// An engine opens its store when it runs: a service's first calls are served without an
// open() of the caller's, once Redis answers.
TEST_F(redis_shards, an_engine_opens_its_store_when_it_runs) {
    auto conn = connect();
    redis_store store(conn);
    system_clock clock;
    engine eng(io.get_executor(), store, clock, {.worker = "w1"});
    EXPECT_FALSE(eng.store_open());
    eng.run();
    auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!eng.store_open() && std::chrono::steady_clock::now() < deadline) io.run_one_for(10ms);
    EXPECT_TRUE(eng.store_open());
    EXPECT_EQ(store.state(), redis_store::store_state::open);
    EXPECT_EQ(get("keel:shards"), "1");
    eng.stop();
}

// What Keel's builds before the record leave: 16 shards and no record.
void make_unrecorded_store(redis_shards& t, const std::string& id) {
    auto conn = t.connect();
    redis_store earlier(conn, {.shards = 16});
    t.sync(earlier.open());
    t.start(earlier, id);
    ASSERT_TRUE(t.sync(t.admin.exec("DEL", "keel:shards")));
}

TEST_F(redis_shards, a_store_that_earlier_builds_made_keeps_their_sixteen_shards) {
    make_unrecorded_store(*this, "order/old");
    auto conn = connect();
    redis_store store(conn);
    EXPECT_EQ(sync(store.open()), 16u);
    EXPECT_EQ(get("keel:shards"), "16");
    auto found = sync(store.load("order/old", false));
    ASSERT_TRUE(found.has_value());
    EXPECT_EQ(found->definition, "/def");
}

TEST_F(redis_shards, a_store_where_an_earlier_build_announced_itself_keeps_sixteen_shards) {
    // An earlier build announces itself before it starts anything.
    ASSERT_TRUE(sync(admin.exec("HSET", "keel:workers", "old-worker", "99999999999999 {}")));
    auto conn = connect();
    redis_store store(conn);
    EXPECT_EQ(sync(store.open()), 16u);
}

TEST_F(redis_shards, a_configured_count_is_recorded_for_a_new_store_and_used_by_the_others) {
    auto a = connect();
    redis_store configured(a, {.shards = 4});
    EXPECT_EQ(sync(configured.open()), 4u);
    start(configured, "order/1");
    EXPECT_EQ(get("keel:shards"), "4");
    auto b = connect();
    redis_store other(b);
    EXPECT_EQ(sync(other.open()), 4u);
    EXPECT_TRUE(sync(other.load("order/1", false)).has_value());
}

TEST_F(redis_shards, a_configured_count_that_is_not_the_stores_is_refused_for_good) {
    auto a = connect();
    redis_store store(a);
    sync(store.open());
    start(store, "order/1");
    auto b = connect();
    redis_store misconfigured(b, {.shards = 4});
    // store_refused, a store_unavailable (HTTP 503) that says waiting will not help.
    EXPECT_THROW(sync(misconfigured.open()), store_refused);
    EXPECT_EQ(misconfigured.state(), redis_store::store_state::refused);
    for (int attempt = 0; attempt < 2; ++attempt) {
        try {
            sync(misconfigured.start(
                start_request{"order/2", "/def", nlohmann::json::array(), "w2", now, 30s}));
            ADD_FAILURE() << "a start on a store of another shard count went through";
        } catch (const store_refused& e) {
            std::string what = e.what();
            EXPECT_NE(what.find("has 1 shards, but this service is configured with 4"),
                      std::string::npos)
                << what;
        }
    }
    EXPECT_THROW(sync(misconfigured.load("order/1", false)), store_refused);
    EXPECT_EQ(sync(admin.exec("KEYS", "keel:*order/2*"))->elements().size(), 0u);
    EXPECT_EQ(get("keel:shards"), "1");
    EXPECT_TRUE(sync(store.load("order/1", false)).has_value());  // the store still serves
}

// A signal key's subscribers in 16 shards, some written as sets (beside a worker of a build
// before store level 4) and some as hashes: one emit reaches them all, whichever form each
// shard's key has, and their completions leave no key behind.
TEST_F(redis_shards, an_emit_reaches_subscribers_in_sets_and_hashes_alike) {
    auto conn = connect();
    redis_store store(conn, {.shards = 16});
    sync(store.open());
    std::vector<std::string> ids;
    std::map<std::string, lease_token> leases;
    for (int i = 0; i < 24; ++i) {
        start_request req{
            "order/" + std::to_string(i), "/def", nlohmann::json::array(), "w1", now, 30s};
        req.subscriptions = {"/promotion/ends"};
        req.compact_subscriptions = i >= 8;  // the first 8 beside an earlier build
        auto started = sync(store.start(std::move(req)));
        ASSERT_TRUE(started.created);
        ids.push_back("order/" + std::to_string(i));
        leases[ids.back()] = started.lease;
    }
    std::map<std::string, int> forms;
    for (std::size_t shard = 0; shard < 16; ++shard) {
        auto key = store.subscription_key(shard, "/promotion/ends");
        auto type = sync(admin.exec("TYPE", key))->as_string().value();
        ++forms[std::string(type)];
    }
    EXPECT_GT(forms["set"], 0);
    EXPECT_GT(forms["hash"], 0);
    fan_out_request emit{{"/promotion/ends"},
                         inbox_entry{0, "", "/promotion/ends", nlohmann::json{}, now + 1s}};
    auto reached = sync(store.fan_out(std::move(emit)));
    EXPECT_EQ(reached.reached, ids.size());
    EXPECT_EQ(reached.delivered.size(), ids.size());
    for (const auto& id : ids) {
        commit_request done;
        done.instance = id;
        done.lease = leases[id];
        done.status = instance_status::completed;
        done.result = nlohmann::json(true);
        done.now = now + 2s;
        ASSERT_TRUE(sync(store.commit(std::move(done))).has_value()) << id;
    }
    EXPECT_EQ(sync(admin.exec("KEYS", "keel:*:sub:*"))->elements().size(), 0u);
}

}  // namespace
}  // namespace keel::process
