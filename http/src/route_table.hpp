#pragma once

// The routing trie (internal to the router). One node per path segment position; each
// node has static children, at most one parameter child and at most one wildcard child,
// and a route per method.

#include <array>
#include <deque>
#include <keel/http/router.hpp>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace keel::http::detail {

enum class param_kind { string, integer, uuid, rest };

struct route_entry : route_info {
    handler fn;
    std::vector<http::middleware> middleware;
    std::vector<std::pair<std::string, param_kind>> params;  // in path order
};

struct node {
    std::vector<std::pair<std::string, std::unique_ptr<node>>> statics;
    std::unique_ptr<node> param;
    std::string param_name;
    param_kind kind = param_kind::string;
    std::unique_ptr<node> wildcard;
    std::string wildcard_name;
    std::string origin;  // the pattern that created this parameter/wildcard position
    std::array<route_entry*, routable_method_count> routes{};

    bool has_routes() const;
};

class route_table {
  public:
    // Throws route_error on an invalid pattern, a duplicate or a conflicting parameter.
    route_entry& insert(method m, std::string_view pattern, handler fn, route_options options);

    struct found {
        const node* at = nullptr;
        std::vector<std::string> values;  // parameter values, in path order
        bool malformed = false;           // bad percent-encoding or not an absolute path
    };
    found find(std::string_view path) const;

    const std::deque<route_entry>& entries() const { return entries_; }

  private:
    node root_;
    std::deque<route_entry> entries_;
};

bool is_integer(std::string_view s);
bool is_uuid(std::string_view s);

}  // namespace keel::http::detail
