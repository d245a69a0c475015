#pragma once

// The floor of keel-orders' order flow: the Redis work that create -> pay -> ship -> deliver
// cannot avoid, issued by a raw loop on Keel's own Redis client (keel::redis::connection),
// one round trip per durable transition, with the payloads keel-orders writes (the same keys,
// order documents, journal entries, wait sets and signals, byte for byte in shape). Run by
// keel_orders_load beside keel-orders, against a redis-server of its own with the same fsync
// policy. Per flow, in order (11 round trips, each awaited before the next):
//
//   1  SET NX  order document, "created"                    POST /orders: the order written
//   2  script  start: instance hash (definition, params,    the process start, already
//              status suspended, wait set, payment timer)   waiting for the payment, its
//              + ZADD of the timer on the shard's index     timer where a restart finds it
//   3  SET     order document with the payment              POST /webhooks/payment
//   4  HSETNX  the payment signal into the inbox, under     the signal delivery; its
//              its idempotency key                          idempotency is HSETNX's answer
//   5  SET     order document, "paid"                       step "record payment": effect
//   6  script  commit: journal += signal, race, step;       ...and commit (the signal
//              inbox entry removed, timer unindexed,        consumed with it)
//              status running, wait set cleared
//   7  SET     order document, "shipped"                    step "dispatch": effect
//   8  script  commit: journal += step; status suspended,   ...and commit, suspending for
//              wait set (delivered)                         the delivery
//   9  HSETNX  the delivered signal into the inbox          POST /webhooks/delivered
//  10  SET     order document, "delivered"                  step "mark delivered": effect
//  11  script  final commit: journal += signal, step;       ...and the final commit
//              inbox entry removed; status completed, result
//
// Why this is the floor: each transition the flow must survive a crash at is written once,
// with its payload, before the next begins, and nothing is read back. A signal's consumption
// travels with the commit of the step that follows it (until then the signal stays in the
// inbox, so a crash in between replays it), and the last step's commit is the final commit.
//
// What the floor does not do, and Keel does: entity locks with fencing tokens, process
// leases and their fencing, finding the instances a signal reaches by subscription (the floor
// knows the instance), the operators' index and counts, retention of finished instances, and
// reading an instance back when it resumes (the floor's one worker keeps it in memory).

#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <keel/framework/redis/connection.hpp>
#include <optional>
#include <string>

namespace keel::bench {

struct floor_options {
    std::string redis_url;
    int flows = 1000;
    int concurrency = 32;
    // Flows started per second, evenly spaced (flow n not before n / pace seconds after the
    // start), at most `concurrency` at a time; 0: each client starts its next flow at once.
    double pace = 0;
};

struct floor_outcome {
    int completed = 0;
    int failed = 0;
    double wall_seconds = 0;
    std::uint64_t requests = 0;  // commands sent (the client's count)
    std::uint64_t writes = 0;    // socket writes (requests / writes: the pipelining factor)
    std::string first_error;
};

// Connects (and loads the two scripts) when made; run() then sends `flows` flows,
// `concurrency` at a time (at `pace` flows per second when set), on one io_context on the
// calling thread.
class flow_floor {
  public:
    explicit flow_floor(floor_options options);
    ~flow_floor();
    flow_floor(const flow_floor&) = delete;
    flow_floor& operator=(const flow_floor&) = delete;

    floor_outcome run();

  private:
    floor_options options_;
    boost::asio::io_context io_;
    std::optional<redis::connection> connection_;
};

inline constexpr int floor_round_trips_per_flow = 11;

}  // namespace keel::bench
