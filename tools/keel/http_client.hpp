#pragma once

// A small synchronous HTTP/1.1 client for a command line tool that makes a few requests
// and exits: one keep-alive connection, every request under one deadline (resolving,
// connecting, sending and reading included). Plain http:// only; for a service behind
// TLS, reach its admin port through a tunnel or a proxy on this machine. Beast stays in
// the .cpp (compiled once by keel::http).

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace keel::cli {

// http://host[:port][/base]: requests go to base + target.
struct url {
    std::string host;  // IPv6 addresses without their brackets
    std::string port = "80";
    std::string base_path;  // "" or "/prefix", without a trailing '/'
    std::string text;       // as given, for messages
};

// Throws usage_error for anything else: https:// (not supported), user info, a query or
// fragment, a missing host or a bad port.
url parse_url(std::string_view text);

using header_list = std::vector<std::pair<std::string, std::string>>;

struct http_request {
    std::string method = "GET";
    std::string target;  // "/admin/instances?limit=5", already encoded
    header_list headers;
    std::string body;
};

struct http_response {
    int status = 0;
    std::string content_type;
    std::string body;
};

class http_client {
  public:
    http_client(url base, std::chrono::milliseconds timeout);
    ~http_client();
    http_client(http_client&&) noexcept;
    http_client& operator=(http_client&&) noexcept;

    // Sends the request and reads the whole answer. Throws transport_error, naming the
    // URL, when the service cannot be reached or does not answer within the timeout.
    http_response send(const http_request& request);
    const url& base() const;

  private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

}  // namespace keel::cli
