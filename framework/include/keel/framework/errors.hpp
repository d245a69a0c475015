#pragma once

/// @file
/// Failures that every layer of a service may need to recognise without depending on the
/// layer that raised them.
///
/// @code
///   throw keel::unavailable_error("process store: cannot reach redis://10.0.0.5:6379");
/// @endcode
///
/// `unavailable_error`: something the operation needs (Redis, a store, a downstream service)
/// cannot serve it right now, and the same request may succeed later. The HTTP layer
/// answers it 503 with `Retry-After`, whichever handler threw it; the process store's
/// `store_unavailable` is one. The message may name internal addresses: it is logged, not
/// sent to clients.

#include <chrono>
#include <stdexcept>
#include <string>

namespace keel {

/// Something the operation needs cannot serve it right now; the same request may succeed
/// later. HTTP answers it 503 with Retry-After (see the file's description).
class unavailable_error : public std::runtime_error {
  public:
    /// `what` is logged, not sent to clients; `retry_after` becomes the Retry-After field.
    explicit unavailable_error(const std::string& what,
                               std::chrono::seconds retry_after = std::chrono::seconds(1))
        : std::runtime_error(what), retry_after_(retry_after) {}

    /// How long a client should wait before trying again.
    std::chrono::seconds retry_after() const noexcept { return retry_after_; }

  private:
    std::chrono::seconds retry_after_;
};

}  // namespace keel
