#pragma once

// One store under test (the in-memory store, or the Redis store on a redis-server started
// for the test), for the suites that check the store contract on every implementation.

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <cstdlib>
#include <keel/process/memory_store.hpp>
#include <keel/process/redis_store.hpp>
#include <keel/test/redis_cluster.hpp>
#include <keel/test/redis_server.hpp>
#include <keel/test/run.hpp>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace keel::process::testing_support {

using namespace std::chrono_literals;
namespace asio = boost::asio;

inline const keel::time_point t0 = keel::time_point(std::chrono::hours(24 * 365 * 50));
inline constexpr keel::duration ttl = 30s;

// One store under test, with whatever it needs to run.
struct store_fixture {
    virtual ~store_fixture() = default;
    virtual store& get() = 0;
};

struct memory_fixture : store_fixture {
    memory_store s;
    store& get() override { return s; }
};

struct redis_fixture : store_fixture {
    explicit redis_fixture(asio::io_context& io,
                           redis_store_options options = {.shards = 4, .audit_commits = true})
        : conn(std::move(
              keel::redis::connection::create(io.get_executor(), {.url = server.url()}).value())),
          s(conn, std::move(options)) {
        keel::test::run(io, s.open());
    }
    keel::test::redis_server server;
    keel::redis::connection conn;
    redis_store s;
    store& get() override { return s; }
};

// The Redis store on a Redis Cluster (3 primaries, 3 replicas). Starting a cluster takes
// seconds, so one serves every case of the test binary, emptied (FLUSHALL on every primary)
// before each. Durable transitions wait for their replica (wait_replicas = 1).
struct cluster_fixture : store_fixture {
    explicit cluster_fixture(asio::io_context& io)
        : conn(keel::test::connect_to_empty_shared_cluster(
              io, {.wait_replicas = 1, .replica_timeout = std::chrono::seconds(5)})),
          s(conn, {.shards = 4, .audit_commits = true}) {
        keel::test::run(io, s.open());
    }
    keel::redis::connection conn;
    redis_store s;
    store& get() override { return s; }
};

// The stores the parameterised suites run on: memory and Redis, or, with
// KEEL_PROCESS_STORE=cluster (the on_cluster ctest entry), the Redis store on a cluster.
inline std::vector<std::string> store_kinds() {
    const char* which = std::getenv("KEEL_PROCESS_STORE");
    if (which && std::string_view(which) == "cluster") return {"cluster"};
    return {"memory", "redis"};
}

class store_conformance : public ::testing::TestWithParam<std::string> {
  protected:
    void SetUp() override {
        if (GetParam() == "memory")
            fixture = std::make_unique<memory_fixture>();
        else if (GetParam() == "cluster")
            fixture = std::make_unique<cluster_fixture>(io);
        else
            fixture = std::make_unique<redis_fixture>(io);
    }
    store& st() { return fixture->get(); }

    template <class T>
    T run(asio::awaitable<T> task) {
        return keel::test::run(io, std::move(task));
    }

    start_result start(const std::string& id, const std::string& worker = "w1") {
        return run(st().start({id, "def", nlohmann::json{{"order", "o-1"}}, worker, t0, ttl}));
    }

    commit_request commit_of(const std::string& id, lease_token lease, std::uint64_t length) {
        commit_request c;
        c.instance = id;
        c.lease = std::move(lease);
        c.expected_length = length;
        return c;
    }

    asio::io_context io;
    std::unique_ptr<store_fixture> fixture;
};

}  // namespace keel::process::testing_support
