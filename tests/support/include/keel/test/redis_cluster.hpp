#pragma once

// A real Redis Cluster for tests: 3 primaries and 3 replicas (by default) on free loopback
// ports, each redis-server in its own directory under one temporary directory, joined with
// `redis-cli --cluster create --cluster-replicas 1`; killed and removed at the end. Starting
// one takes about 2 s (Redis keeps a new primary unwritable for its first 2 s), so a test
// binary shares one between its cases.
//
// Tests kill, restart and fail over nodes, and move slots: whole (a reshard, as MOVED
// sees it), or by hand, a slot left MIGRATING/IMPORTING with some of its keys moved (as ASK
// and TRYAGAIN see it). Nodes are named by their port; the roles are read from the cluster
// each time, since failovers change them.

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <keel/framework/redis/connection.hpp>
#include <string>
#include <utility>
#include <vector>

namespace keel::test {

struct redis_cluster_options {
    int primaries = 3;
    int replicas = 1;  // per primary
    // cluster-node-timeout: a primary unreachable this long is failed over.
    std::chrono::milliseconds node_timeout{1'000};
};

class redis_cluster {
  public:
    explicit redis_cluster(redis_cluster_options options = {});
    ~redis_cluster();
    redis_cluster(const redis_cluster&) = delete;
    redis_cluster& operator=(const redis_cluster&) = delete;

    // redis-cluster://127.0.0.1:<port>,... naming every node.
    std::string url() const;
    std::vector<std::uint16_t> ports() const;

    // The current roles, as a running node sees them.
    std::vector<std::uint16_t> primaries() const;  // by their first slot
    std::uint16_t primary_of(std::uint16_t slot) const;
    std::uint16_t replica_of(std::uint16_t primary) const;
    std::vector<std::pair<std::uint16_t, std::uint16_t>> slots_of(std::uint16_t primary) const;
    std::string node_id(std::uint16_t port) const;

    // Runs redis-cli against one node (no -c: no redirections) and returns its trimmed
    // output.
    std::string cli(std::uint16_t port, const std::vector<std::string>& args) const;

    void kill(std::uint16_t port);   // SIGKILL, waits for the exit
    void start(std::uint16_t port);  // again on its directory and nodes.conf; waits for PING
    bool running(std::uint16_t port) const;
    // CLUSTER FAILOVER on a replica; waits until the cluster is healthy with it as primary.
    void failover(std::uint16_t replica);
    // Every running node sees cluster_state:ok and the same primaries, and every replica's
    // link to its primary is up. Throws std::runtime_error after `limit`.
    void wait_healthy(std::chrono::milliseconds limit = std::chrono::seconds(20)) const;
    // Every replica has every write its primary had when this was called (its replication
    // offset caught up): a test that kills a primary to lose writes loses only those made
    // after. Throws std::runtime_error after `limit`.
    void wait_replicated(std::chrono::milliseconds limit = std::chrono::seconds(20)) const;

    // A reshard of one slot: its keys, then the slot, to the primary `to`.
    void move_slot(std::uint16_t slot, std::uint16_t to);
    // The same in steps: the slot IMPORTING on `to` and MIGRATING on its owner; keys moved
    // one by one; then the rest of its keys and the slot itself.
    void begin_migration(std::uint16_t slot, std::uint16_t to);
    void migrate_key(const std::string& key, std::uint16_t to);
    void end_migration(std::uint16_t slot, std::uint16_t to);

    // FLUSHALL on every primary.
    void flush_all();

  private:
    struct node {
        std::uint16_t port = 0;
        std::uint16_t bus_port = 0;
        std::string dir;
        pid_t pid = -1;
    };
    node& at(std::uint16_t port);
    const node& at(std::uint16_t port) const;
    void launch(node& n);
    void wait_ping(const node& n) const;
    std::uint16_t any_running() const;
    std::string cluster_nodes() const;

    redis_cluster_options options_;
    std::string dir_;
    std::vector<node> nodes_;
};

// One cluster for the whole test binary, started on first use and stopped at exit: for
// suites whose cases each want an empty cluster (FLUSHALL) rather than a new one.
redis_cluster& shared_redis_cluster();

// A connection on `io` to shared_redis_cluster() (options.url is set here), after emptying
// it (FLUSHALL on every primary): what a case that wants an empty cluster starts from.
// Throws std::runtime_error when the cluster cannot be emptied.
redis::connection connect_to_empty_shared_cluster(boost::asio::io_context& io,
                                                  redis::connection_options options = {});

}  // namespace keel::test
