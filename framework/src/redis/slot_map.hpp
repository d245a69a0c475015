#pragma once

// The slot map of a Redis Cluster (internal): which primary serves each hash slot, read
// from CLUSTER SHARDS (Redis 7) or CLUSTER SLOTS (older servers), and the redirections
// (MOVED, ASK) that correct it between refreshes.

#include <cstdint>
#include <keel/framework/expected.hpp>
#include <keel/framework/redis/reply.hpp>
#include <keel/framework/redis/url.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace keel::redis::detail {

struct slot_range {
    std::uint16_t first = 0;
    std::uint16_t last = 0;  // inclusive
    std::string primary;     // "host:port"
};

struct slot_map {
    std::vector<slot_range> ranges;  // sorted by first slot
    std::vector<std::string> nodes;  // every node the reply named, primaries first

    // Slots no primary serves, as "first-last" ranges ("" when the map covers all).
    std::string gaps() const;
};

// `asked` is the host the reply came from: it stands in for a node whose address the
// cluster does not know ("" or "?").
expected<slot_map, std::string> parse_cluster_shards(const reply& r, std::string_view asked);
expected<slot_map, std::string> parse_cluster_slots(const reply& r, std::string_view asked);

// "MOVED 3999 127.0.0.1:6381" or "ASK 3999 127.0.0.1:6381".
struct redirection {
    bool ask = false;
    std::uint16_t slot = 0;
    std::string address;
};
std::optional<redirection> parse_redirection(std::string_view message);

// "host:port" for an endpoint, and back (the port after the last colon: IPv6 needs no brackets).
std::string address_of(std::string_view host, std::uint16_t port);
std::optional<endpoint> endpoint_of(std::string_view address, const endpoint& credentials);

}  // namespace keel::redis::detail
