#pragma once

// A process engine on a manual clock, driven by a keel::process::testing::loop: virtual
// time passes only when a test advances it. The store is the in-memory one,
// or, with KEEL_PROCESS_STORE=redis in the environment, the Redis store on a redis-server
// started for the test, or with KEEL_PROCESS_STORE=cluster on a Redis Cluster shared by the
// test binary: the same cases then run against Redis (ctest runs all three).

#include <gtest/gtest.h>

#include <cstdlib>
#include <keel/framework/clock.hpp>
#include <keel/process/engine.hpp>
#include <keel/process/memory_store.hpp>
#include <keel/process/redis_store.hpp>
#include <keel/process/testing/loop.hpp>
#include <keel/test/redis_cluster.hpp>
#include <keel/test/redis_server.hpp>
#include <keel/test/run.hpp>
#include <memory>
#include <optional>
#include <string_view>

namespace keel::process::test {

// Where the harness keeps instances.
struct store_backend {
    virtual ~store_backend() = default;
    virtual process::store& get() = 0;
    // Nothing in flight to the store: no reply can still make a handler ready.
    virtual bool idle() const = 0;
    virtual memory_store* memory() { return nullptr; }
};

struct memory_backend final : store_backend {
    memory_store s;
    process::store& get() override { return s; }
    bool idle() const override { return true; }
    memory_store* memory() override { return &s; }
};

struct redis_backend final : store_backend {
    explicit redis_backend(asio::io_context& io)
        : conn(redis::connection::create(io.get_executor(),
                                         {.url = server.url(), .health_check_interval = {}})
                   .value()),
          s(conn, {.shards = 4}) {
        keel::test::run(io, s.open());
    }
    keel::test::redis_server server;
    redis::connection conn;
    redis_store s;
    process::store& get() override { return s; }
    bool idle() const override { return conn.stats().outstanding == 0; }
};

// The Redis store on the test binary's shared Redis Cluster, emptied first, with every
// durable transition waiting for its replica (wait_replicas = 1), as in production.
struct cluster_backend final : store_backend {
    explicit cluster_backend(asio::io_context& io)
        : conn(keel::test::connect_to_empty_shared_cluster(
              io, {.health_check_interval = {},
                   .wait_replicas = 1,
                   .replica_timeout = std::chrono::seconds(5)})),
          s(conn, {.shards = 4}) {
        keel::test::run(io, s.open());
    }
    redis::connection conn;
    redis_store s;
    process::store& get() override { return s; }
    bool idle() const override { return conn.stats().outstanding == 0; }
};

// KEEL_PROCESS_STORE: memory (unset), redis or cluster.
inline std::string_view store_kind() {
    const char* which = std::getenv("KEEL_PROCESS_STORE");
    return which ? std::string_view(which) : std::string_view("memory");
}
inline std::unique_ptr<store_backend> make_backend(asio::io_context& io) {
    if (store_kind() == "cluster") return std::make_unique<cluster_backend>(io);
    if (store_kind() == "redis") return std::make_unique<redis_backend>(io);
    return std::make_unique<memory_backend>();
}

struct harness {
    explicit harness(engine_options options = {})
        : backend(make_backend(io)), store(backend->get()) {
        loop.wait_for_io([b = backend.get()] { return !b->idle(); });
        if (options.worker.empty()) options.worker = "w1";
        if (!options.seed) options.seed = 42;
        eng.emplace(io.get_executor(), store, clock, options);
        eng->run();
        settle();
    }
    ~harness() {
        eng.reset();
        settle();
    }

    // Runs every ready handler until there is nothing left to do at this instant (on
    // Redis: also until every request to the store has its reply).
    void settle() { loop.settle(); }
    void advance(duration d) {
        clock.advance(d);
        settle();
    }

    // Runs a coroutine on the engine's io_context to completion (without advancing time).
    template <class T>
    T sync(asio::awaitable<T> task) {
        return loop.run(std::move(task));
    }

    instance_snapshot snapshot(const std::string& id) { return *sync(store.load(id, true)); }
    instance_status status(const std::string& id) { return sync(store.load(id, false))->status; }
    // The in-memory store, for checks only it can answer; null on Redis.
    memory_store* memory() { return backend->memory(); }

    testing::loop loop;
    asio::io_context& io = loop.io();
    manual_clock clock;
    std::unique_ptr<store_backend> backend;
    process::store& store;
    std::optional<engine> eng;
};

}  // namespace keel::process::test
