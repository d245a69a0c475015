#pragma once

// keel_scale_bench's store side (scale_bench.cpp): one waiting order as keel-orders left it
// in Redis, read back key by key, and written again under other order ids, so that a store
// holds a million waiting orders without a million requests; the same order laid out in the
// least Redis needs to keep it (the floor of its memory); and Redis's memory by key kind.
//
// A clone is the template's writes with the template's order id replaced by the clone's in
// every key name, field, member and value, and every time in it (a run of exactly 13 digits:
// milliseconds since the epoch, scores included) moved `shift` ms earlier. The template is
// read while it is the only order in the store, so every key that holds an entry of it and
// not its id in the name (the wake and operators' index sets) is found by scanning them all.
// describe() prints an order's keys with ids and times masked, to check that a clone is what
// the service itself writes (scale_bench.cpp compares a clone with an order made over HTTP).

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "flow_measure.hpp"

namespace keel::bench {

using argv_list = std::vector<std::vector<std::string>>;

// "w-0001234": every waiting order's id has the same length, so clones and orders made over
// HTTP take the same bytes.
std::string waiting_order_id(long n);

class order_template {
  public:
    // Reads order `id`: its own keys (names holding the id) and its entries in the others.
    order_template(redis_probe& probe, std::string id);

    // The writes that make order `id` as the template is, its times `shift_ms` earlier: its
    // own keys first, its entries in the shared keys last.
    argv_list writes_for(const std::string& id, std::int64_t shift_ms) const;

    // The floor: the order document as keel-orders wrote it, the instance's state (the
    // meta hash's definition, params, status, waits, timers, created) as one JSON string, one
    // entry per wait (signal path -> instance) in a hash and one per timer (due -> instance)
    // in a sorted set, the last two shared by all orders.
    argv_list floor_writes_for(const std::string& id, std::int64_t shift_ms) const;
    // The bytes of the floor's payloads, without Redis: the document, the state, each index
    // entry's path or due time (8 bytes) and instance id.
    std::size_t floor_payload_bytes() const { return floor_payload_; }

    // The template's own keys with the id shown as "<id>" ("keel:{order:<id>}:doc", ...).
    std::vector<std::string> own_kinds() const;
    std::string own_key(std::size_t kind, const std::string& id) const;
    // The shared keys that hold one entry per order (the wake set, the operators' index).
    struct shared_entry {
        std::string key;
        std::string type;
    };
    const std::vector<shared_entry>& shared() const { return shared_; }

    // Order `id`'s keys and shared entries as text, ids shown as "<id>" and times as "<ms>":
    // equal for two orders in the same state, whoever wrote them.
    std::string describe(redis_probe& probe, const std::string& id) const;

    const std::string& id() const { return id_; }
    const std::string& instance() const { return instance_; }

  private:
    std::string with_id(const std::string& text, const std::string& id,
                        std::int64_t shift_ms) const;

    std::string id_;
    std::string instance_;  // the fulfilment's id, "order/<id>/fulfillment"
    struct own_key_content {
        std::string name;
        std::string type;
        argv_list writes;
    };
    std::vector<own_key_content> own_;
    std::vector<shared_entry> shared_;
    argv_list shared_writes_;
    argv_list floor_;
    std::size_t floor_payload_ = 0;
};

// Sends the writes of orders [first, last) on one keel::redis::connection to `url`,
// `concurrency` orders at a time (each order's writes in order). Returns the wall time in
// seconds; throws on the first error.
double pipelined_fill(const std::string& url, long first, long last, int concurrency,
                      const std::function<argv_list(long)>& writes);

// Redis's used_memory (INFO memory).
double used_memory(redis_probe& probe);

// MEMORY STATS' integer fields ("overhead.hashtable.main", "clients.normal", ...) and those of
// its db.0 entry ("db.0.overhead.hashtable.main").
std::map<std::string, double> memory_stats(redis_probe& probe);

// MEMORY USAGE <key> SAMPLES 0 (every element counted), 0 when the key does not exist.
double memory_usage(redis_probe& probe, const std::string& key);

}  // namespace keel::bench
