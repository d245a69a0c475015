#pragma once

// The single-node connection as one node of a cluster connection (internal). The cluster
// opens one per primary and drives it with these functions, on the connections' shared
// executor. A node connection fails fast: while it is down (after a lost connection or a
// failed connect), requests not yet written fail at once with not_connected instead of
// waiting for the reconnect, so the cluster can route them by a fresh slot map.

#include <chrono>
#include <cstdint>
#include <keel/framework/redis/connection.hpp>
#include <memory>
#include <string>
#include <vector>

namespace keel::redis::detail {

class connection_impl;

class write_refusals;

std::shared_ptr<connection_impl> open_node(asio::any_io_executor executor,
                                           const connection_options& options, endpoint where,
                                           const std::vector<script>& scripts,
                                           std::shared_ptr<write_refusals> refusals);

// Queues a request (preceded by ASKING when `asking`, the two never separated) and returns
// its id for cancel_on_node. The handler gets the reply, NOSCRIPT included. `patience`: the
// caller's own timeout (see connection_options::silence_timeout); `session`: nonzero for a
// WAIT that may only go out on that session (connection::replicate).
std::uint64_t send_to_node(connection_impl& node, std::string payload,
                           std::chrono::steady_clock::time_point deadline,
                           connection::handler_type handler, bool asking,
                           std::chrono::milliseconds patience = {}, std::uint64_t session = 0);
void cancel_on_node(connection_impl& node, std::uint64_t id);
void add_node_script(connection_impl& node, const script& s);
void close_node(connection_impl& node);
bool node_connected(const connection_impl& node);
// The number of the node's current socket (connection::replicate's session), 0 while down.
std::uint64_t node_session(const connection_impl& node);
connection_stats node_stats(const connection_impl& node);

// An encoded EVALSHA rewritten as EVAL with the script's source, keys and args kept.
std::string evalsha_to_eval(const std::string& payload, const script& s);

}  // namespace keel::redis::detail
