// Durable steps on one Redis node and on a Redis Cluster, with and without the replica wait,
// in one run: M instances each doing K `ctx.run` steps on one engine and one connection (the
// throughput figure of keel_process_redis_bench), on
//
//   1. one node with one replica attached (the baseline of every ratio),
//   2. the same with wait_replicas = 1 (every durable transition waits for the replica),
//   3. a cluster of 3 primaries, each with one replica (keel::test::redis_cluster),
//   4. the same with wait_replicas = 1.
//
// Rounds alternate the four; each ratio is taken within its round and the median over the
// rounds is printed with its range. The single node is fresh each round; the cluster is
// started once (its instances differ by id from round to round).
//
//   keel_cluster_bench [--instances M] [--steps K] [--rounds R]

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <keel/framework/log.hpp>
#include <keel/process/engine.hpp>
#include <keel/process/redis_store.hpp>
#include <keel/test/redis_cluster.hpp>
#include <keel/test/redis_server.hpp>
#include <keel/test/run.hpp>
#include <string>
#include <vector>

#include "rounds.hpp"
#include "stepping.hpp"

namespace asio = boost::asio;
namespace redis = keel::redis;
using namespace keel::process;
using steady = std::chrono::steady_clock;

namespace {

struct options {
    int instances = 200;
    int steps = 20;
    int rounds = 5;
};

options parse(int argc, char** argv) {
    options o;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string flag = argv[i];
        int value = std::stoi(argv[i + 1]);
        if (flag == "--instances")
            o.instances = value;
        else if (flag == "--steps")
            o.steps = value;
        else if (flag == "--rounds")
            o.rounds = std::max(1, value);
        else
            throw std::invalid_argument("unknown flag " + flag);
    }
    return o;
}

using keel::bench::median_and_range;
using keel::bench::percentile;
using keel::bench::stepping;

// Steps/s of `instances` x `k` steps on the Redis at `url`.
double steps_per_second(const std::string& url, int wait_replicas, int instances, int k, int base) {
    asio::io_context io{1};
    keel::system_clock clock;
    auto conn =
        redis::connection::create(io.get_executor(), {.url = url,
                                                      .wait_replicas = wait_replicas,
                                                      .replica_timeout = std::chrono::seconds(5)})
            .value();
    redis_store store(conn);
    keel::test::run(io, store.open());
    engine eng(io.get_executor(), store, clock, {.worker = "bench"});
    eng.add(stepping);
    eng.run();
    int done = 0;
    std::exception_ptr failure;
    auto t0 = steady::now();
    for (int i = 0; i < instances; ++i) {
        asio::co_spawn(
            io,
            [&, i]() -> asio::awaitable<void> {
                auto h = co_await eng.start(stepping, std::to_string(base + i), k);
                auto r = co_await h.wait();
                if (!r) throw std::runtime_error("instance failed: " + r.error().message);
            },
            [&](std::exception_ptr e) {
                if (e && !failure) failure = e;
                if (++done == instances) {
                    eng.stop();
                    conn.close();
                }
            });
    }
    io.run();
    if (failure) std::rethrow_exception(failure);
    return instances * double(k) / std::chrono::duration<double>(steady::now() - t0).count();
}

// A node with one replica attached, fresh for each use.
struct replicated_node {
    keel::test::redis_server primary{{.tcp = true}};
    std::unique_ptr<keel::test::redis_server> replica = keel::test::start_replica(primary);
};

}  // namespace

int main(int argc, char** argv) {
    keel::log::configure({.min_level = keel::log::level::warn});
    try {
        auto o = parse(argc, argv);
        std::printf("instances %d, steps %d, rounds %d\n\n", o.instances, o.steps, o.rounds);
        keel::test::redis_cluster cluster;  // 3 primaries, 3 replicas
        const char* labels[] = {"one node (+1 replica), no wait", "one node (+1 replica), WAIT 1",
                                "cluster, 3 primaries (+1 replica each), no wait",
                                "cluster, 3 primaries (+1 replica each), WAIT 1"};
        std::vector<double> rate[4], ratio[4];
        for (int round = 0; round < o.rounds; ++round) {
            int base = round * 100'000;
            for (int which = 0; which < 4; ++which) {
                int wait = which % 2;
                double r;
                if (which < 2) {
                    replicated_node node;
                    r = steps_per_second(node.primary.url(), wait, o.instances, o.steps, base);
                } else {
                    r = steps_per_second(cluster.url(), wait, o.instances, o.steps,
                                         base + which * 10'000);
                }
                rate[which].push_back(r);
            }
            for (int which = 0; which < 4; ++which)
                ratio[which].push_back(rate[which].back() / rate[0].back());
        }
        std::printf(
            "| durable steps/s, %d instances x %d steps | steps/s (median) | ratio to "
            "one node, no wait: median (range) |\n|---|---:|---:|\n",
            o.instances, o.steps);
        for (int which = 0; which < 4; ++which)
            std::printf("| %s | %.0f | %s |\n", labels[which], percentile(rate[which], 0.5),
                        median_and_range(ratio[which]).c_str());
        return 0;
    } catch (const std::exception& e) {
        std::cerr << "keel_cluster_bench: " << e.what() << "\n";
        return 1;
    }
}
