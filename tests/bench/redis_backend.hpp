#pragma once

// The Redis a benchmark runs on: its own redis-server, or (a bench's --cluster 1) a Redis
// Cluster of 3 primaries without replicas (keel::test::redis_cluster: loopback TCP, no
// persistence). Counters, CPU and memory are read from the server, or summed over the
// cluster's primaries.

#include <cstdint>
#include <keel/test/redis_cluster.hpp>
#include <keel/test/redis_server.hpp>
#include <optional>
#include <string>
#include <vector>

#include "redis_counts.hpp"

namespace keel::bench {

class redis_backend {
  public:
    explicit redis_backend(bool cluster, keel::test::redis_server_options server = {}) {
        if (!cluster) {
            server_.emplace(std::move(server));
            return;
        }
        cluster_.emplace(keel::test::redis_cluster_options{.replicas = 0});
        primaries_ = cluster_->primaries();
    }

    bool is_cluster() const { return cluster_.has_value(); }
    std::string url() const { return cluster_ ? cluster_->url() : server_->url(); }
    redis_counts counts() const {
        return cluster_ ? read_counts(*cluster_, primaries_) : read_counts(*server_);
    }
    // The server, or the primaries: nodes() of them, each reachable by cli() and at its own
    // URL (a plain connection, not a cluster one: for INFO and the like).
    std::size_t nodes() const { return cluster_ ? primaries_.size() : 1; }
    std::string cli(std::size_t node, const std::vector<std::string>& args) const {
        return cluster_ ? cluster_->cli(primaries_.at(node), args) : server_->cli(args);
    }
    std::string node_url(std::size_t node) const {
        return cluster_ ? "redis://127.0.0.1:" + std::to_string(primaries_.at(node))
                        : server_->url();
    }
    void on_every_node(const std::vector<std::string>& args) const {
        for (std::size_t node = 0; node < nodes(); ++node) cli(node, args);
    }

  private:
    std::optional<keel::test::redis_server> server_;
    std::optional<keel::test::redis_cluster> cluster_;
    std::vector<std::uint16_t> primaries_;
};

}  // namespace keel::bench
