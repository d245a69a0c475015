#pragma once

// The Redis Cluster side of keel::redis::connection (internal).
//
// A slot map (CLUSTER SHARDS, or CLUSTER SLOTS before Redis 7) names the primary of each of
// the 16384 hash slots; each primary has one node connection (node.hpp: the single-node
// machinery, pipelined, reconnecting). A request is routed by its keys' slot (routing.hpp)
// and followed to its reply:
//
//   MOVED            the slot has moved: update that slot, refresh the map, resend there;
//   ASK              the key is migrating: send ASKING and the command to the target;
//   TRYAGAIN,        Redis refused before running it: wait (exponential backoff), resend;
//   CLUSTERDOWN,
//   LOADING
//   NOSCRIPT         resend as EVAL with the script's source;
//   not_connected    never written (its node is down): park it, refresh the map with
//                    backoff until a primary serves the slot (a replica promoted), resend;
//   connection_lost  written, then the node was lost: answered as is, never resent.
//
// Parked requests wait within their own deadline. At most 16 redirections per request.
// Everything runs on the executor the connection was created with, which the node
// connections share.

#include <atomic>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <deque>
#include <keel/framework/log.hpp>
#include <keel/framework/redis/connection.hpp>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "routing.hpp"
#include "slot_map.hpp"
#include "teardown.hpp"

namespace keel::redis::detail {

class connection_impl;

class cluster_impl : public std::enable_shared_from_this<cluster_impl>, public pending_owner {
  public:
    cluster_impl(asio::any_io_executor executor, connection_options options,
                 std::vector<endpoint> seeds, std::shared_ptr<write_refusals> refusals);
    void start();

    // Any thread. `to` replaces the route the command's keys give (execute_at, ping);
    // `session`, when nonzero, is the only node session it may be written on (replicate).
    void submit(std::string payload, std::chrono::milliseconds timeout, const script* s,
                connection::handler_type handler, std::optional<route> to,
                std::uint64_t session = 0);
    void add_script(const script& s);
    void close();
    void drop_pending() override;

    // Every slot has a primary and every primary's connection is up.
    bool connected() const;
    // The slots no primary serves, as ranges; empty when the map covers them all.
    std::string uncovered() const;
    connection_stats stats() const;
    const endpoint& where() const { return seeds_.front(); }
    const asio::any_io_executor& executor() const { return executor_; }

  private:
    using steady = std::chrono::steady_clock;
    struct node {
        std::string address;  // host:port
        std::shared_ptr<connection_impl> conn;
        bool primary = false;  // serves slots in the current map
    };
    struct request {
        request(std::string payload, connection::handler_type handler, steady::time_point deadline,
                const script* eval_script, route to)
            : payload(std::move(payload)),
              handler(std::move(handler)),
              deadline(deadline),
              eval_script(eval_script),
              to(std::move(to)) {}
        request(const request&) = delete;
        request& operator=(const request&) = delete;

        std::string payload;  // kept: a redirected or refused request is sent again
        connection::handler_type handler;
        steady::time_point deadline;
        const script* eval_script;  // EVALSHA: resend as EVAL on NOSCRIPT
        route to;
        std::string fixed_node;         // a part of a broadcast: this node only, never rerouted
        std::uint64_t parent = 0;       // a part of a broadcast: the broadcast's id
        std::size_t parts_left = 0;     // a broadcast: parts not answered yet
        std::optional<result> outcome;  // a broadcast: the first error, else the first reply
        std::string ask_address;        // next attempt: ASKING, then the command, there
        std::shared_ptr<connection_impl> at;  // where the current attempt was sent
        std::string at_address;
        std::uint64_t at_id = 0;
        std::uint64_t attempt = 0;
        int redirections = 0;
        int retries = 0;
        bool parked = false;
        steady::time_point retry_at = steady::time_point::max();  // parked: max = next refresh
        std::optional<error> last_error;       // the answer if the deadline passes while parked
        std::chrono::milliseconds patience{};  // the caller's own timeout, if it gave one
        std::uint64_t session = 0;             // replicate's WAIT: its write's node session
    };
    using request_map = std::unordered_map<std::uint64_t, request>;

    void start_request(std::uint64_t id, std::string payload, connection::handler_type handler,
                       steady::time_point deadline, const script* s, std::optional<route> to,
                       std::chrono::milliseconds patience, std::uint64_t session);
    void send(std::uint64_t id, request& rq);
    void fan_out(std::uint64_t id, request& rq);
    node* target_of(request& rq);
    node* pick_any();
    void on_reply(std::uint64_t id, std::uint64_t attempt, result r);
    void on_server_error(std::uint64_t id, request& rq, error e, std::string asked);
    void on_part_done(std::uint64_t parent, result r);
    void finish(std::uint64_t id, request& rq, result r);
    void expire(std::uint64_t id, request& rq);
    void cancel(std::uint64_t id);

    void park(std::uint64_t id, request& rq, steady::time_point retry_at);
    void arm_park(steady::time_point when);
    void resend_parked(bool refreshed);
    asio::awaitable<void> park_loop();

    void request_refresh();
    asio::awaitable<void> refresh_loop();
    asio::awaitable<bool> refresh();
    asio::awaitable<result> query(std::shared_ptr<connection_impl> conn, std::string payload,
                                  steady::time_point deadline);
    std::vector<std::string> refresh_candidates() const;
    bool apply(const slot_map& map);
    void moved(std::uint16_t slot, const std::string& address);
    node* ensure_node(const std::string& address);

    std::chrono::milliseconds backoff_cap() const;
    std::chrono::milliseconds retry_delay(int retries) const;
    void on_loop_end(std::exception_ptr e);

    asio::any_io_executor executor_;
    connection_options options_;
    std::vector<endpoint> seeds_;
    std::shared_ptr<write_refusals> refusals_;  // the connection's, given to every node
    log::logger log_;
    asio::steady_timer park_timer_;
    asio::steady_timer refresh_signal_;

    // On executor_. nodes_ changes under state_mutex_, which stats() and connected() take.
    std::unordered_map<std::string, node> nodes_;
    std::vector<node*> slots_;        // slot -> its primary; null: not served (or no map yet)
    std::vector<node*> primaries_;    // the primaries of slots_
    std::vector<std::string> known_;  // every node of the last map
    std::vector<script> scripts_;
    request_map requests_;
    std::deque<std::uint64_t> parked_;
    steady::time_point park_armed_ = steady::time_point::max();
    steady::time_point last_refresh_ = steady::time_point::min();
    std::string refresh_error_;
    std::size_t next_any_ = 0;
    bool refresh_wanted_ = true;
    bool closed_ = false;

    mutable std::mutex state_mutex_;
    std::string uncovered_ = "0-16383";
    std::atomic<std::uint64_t> next_id_{1};
    std::atomic<std::uint64_t> accepted_{0}, outstanding_{0}, redirections_{0}, refreshes_{0};
};

}  // namespace keel::redis::detail
