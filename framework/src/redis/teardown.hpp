#pragma once

// Frees, when an io_context is destroyed, what a Redis connection's own queues hold
// (internal).
//
// Destroying an io_context destroys the handlers it holds, but not those a connection keeps
// in its queues. A queued handler can own, through a coroutine, the connection that queues
// it: a cluster's slot-map refresh waits on a node connection the cluster owns, and a
// caller's coroutine may own the connection it awaits. Such a pair would outlive the
// io_context. Connections register here; when the context shuts down (no thread runs it any
// more), each destroys, never calls, the handlers it holds.

#include <boost/asio/any_io_executor.hpp>
#include <memory>

namespace keel::redis::detail {

class pending_owner {
  public:
    // At the io_context's shutdown: destroy every handler held, call none.
    virtual void drop_pending() = 0;

  protected:
    ~pending_owner() = default;
};

// Registers `owner` with the execution context of `executor`.
void drop_pending_at_shutdown(const boost::asio::any_io_executor& executor,
                              std::weak_ptr<pending_owner> owner);

}  // namespace keel::redis::detail
