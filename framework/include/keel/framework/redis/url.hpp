#pragma once

/// @file
/// Where a Redis server is: `redis://[user:password@]host[:port][/db]` (port 6379, db 0 by
/// default; IPv6 hosts in brackets) or `unix:///path/to/redis.sock[?db=N]` (credentials as
/// `unix://user:password@/path`).
///
/// A Redis Cluster is `redis-cluster://[user:password@]host[:port][,host[:port]...]`: seed
/// nodes, any nodes of the cluster (primaries or replicas); the connection asks them for the
/// slot map and finds the others itself. The credentials apply to every node. A cluster has
/// one database, so no /db (`/0` is accepted).

#include <cstdint>
#include <keel/framework/expected.hpp>
#include <keel/framework/redis/error.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace keel::redis {

/// A server's address, parsed from its URL.
struct endpoint {
    /// How a server is reached.
    enum class transport { tcp, unix_socket };
    transport kind = transport::tcp;  ///< TCP or a unix socket
    /// TCP: the host name or IP address.
    std::string host = "127.0.0.1";
    /// TCP: the port.
    std::uint16_t port = 6379;
    std::string path;  ///< unix socket
    /// ACL user; empty: the default user.
    std::string user;
    /// Password for AUTH; empty: none.
    std::string password;
    /// The database selected on connect.
    int db = 0;

    /// The URL without the password, for messages and logs.
    std::string display() const;
};

/// Parses a redis:// or unix:// URL; errc::bad_url saying what is wrong.
expected<endpoint, error> parse_url(std::string_view url);

/// True when the URL names a cluster (redis-cluster://); parse it with parse_cluster_url.
bool is_cluster_url(std::string_view url);

/// The seed nodes of a redis-cluster:// URL, in the order given (TCP endpoints, db 0).
expected<std::vector<endpoint>, error> parse_cluster_url(std::string_view url);

}  // namespace keel::redis
