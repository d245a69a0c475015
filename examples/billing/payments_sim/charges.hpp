#pragma once

// The sim's state, in memory: every charge in creation order, the Idempotency-Keys seen,
// how many charges each card has had, and the --rate window. One lock makes each call
// atomic, so two requests with the same key on two service threads make one charge.
//
// An Idempotency-Key is remembered for the life of the process. Its replay (same key, same
// card, amount, currency and reference) charges nothing, is not counted against --rate,
// and answers the charge as it is now (a pending charge replayed after its webhook is
// succeeded). The same key with another request is refused (key_reused: 409).

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cards.hpp"
#include "rate_window.hpp"

namespace billing::sim {

// What POST /charges asks for (validated by the controller).
struct charge_request {
    std::string card;
    std::int64_t amount = 0;  // minor units (cents)
    std::string currency;
    std::string reference;  // the client's invoice id

    bool operator==(const charge_request&) const = default;
};

struct charge {
    std::string id;  // "ch_" and 24 hex digits
    charge_status status = charge_status::declined;
    charge_request request;
    int requests = 1;  // the request that made it and every replay of its key
};

// What charge_book::charge() did.
enum class charge_outcome {
    created,       // a new charge (whatever its status)
    replayed,      // the key's charge, unchanged
    key_reused,    // the key was used for another request: nothing charged
    rate_limited,  // --rate charges in the last second already: nothing charged
};

struct charge_result {
    charge_outcome outcome;
    std::optional<charge> made;  // created or replayed: the charge as it is now
};

class charge_book {
  public:
    using time_point = std::chrono::steady_clock::time_point;

    // At most `rate_per_second` new charges in any one second.
    explicit charge_book(std::size_t rate_per_second);

    // Charges `request` under Idempotency-Key `key` at `now`; see the file's description.
    charge_result charge(const std::string& key, const charge_request& request, time_point now);

    // pending -> succeeded. False when there is no such charge or it is not pending.
    bool settle(const std::string& id);

    // The charges for `reference`, or all of them, in creation order.
    std::vector<sim::charge> list(std::optional<std::string_view> reference) const;

  private:
    std::string new_id();

    mutable std::mutex mutex_;
    rate_window rate_;
    std::vector<sim::charge> charges_;                     // creation order
    std::unordered_map<std::string, std::size_t> by_id_;   // index into charges_
    std::unordered_map<std::string, std::size_t> by_key_;  // Idempotency-Key -> index
    std::unordered_map<std::string, std::vector<std::size_t>> by_reference_;
    std::unordered_map<std::string, int> charges_per_card_;
    std::mt19937_64 random_;
};

}  // namespace billing::sim
