#pragma once

// Where a Redis server is: `redis://[user:password@]host[:port][/db]` (port 6379, db 0 by
// default; IPv6 hosts in brackets) or `unix:///path/to/redis.sock[?db=N]` (credentials as
// `unix://user:password@/path`).

#include <cstdint>
#include <keel/framework/expected.hpp>
#include <keel/framework/redis/error.hpp>
#include <string>
#include <string_view>

namespace keel::redis {

struct endpoint {
    enum class transport { tcp, unix_socket } kind = transport::tcp;
    std::string host = "127.0.0.1";
    std::uint16_t port = 6379;
    std::string path;  // unix socket
    std::string user;
    std::string password;
    int db = 0;

    // The URL without the password, for messages and logs.
    std::string display() const;
};

expected<endpoint, error> parse_url(std::string_view url);

}  // namespace keel::redis
