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
    std::vector<const http::middleware*> group_middleware;  // outermost group first
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
    };
    // Matches a request's decoded path segments (request::path_segments()).
    found find(const std::vector<std::string>& segments) const;

    const std::deque<route_entry>& entries() const { return entries_; }
    std::deque<route_entry>& entries() { return entries_; }

  private:
    node root_;
    std::deque<route_entry> entries_;
};

// A pattern in its normalised form ("/orders/:id<int>", no trailing slash); throws
// route_error when it is not a valid pattern.
std::string normalise_pattern(std::string_view pattern);
// prefix + pattern, with one '/' between them ("/" patterns add nothing).
std::string join_patterns(std::string_view prefix, std::string_view pattern);

bool is_integer(std::string_view s);
bool is_uuid(std::string_view s);

}  // namespace keel::http::detail
