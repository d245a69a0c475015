#pragma once

/// @file
/// Liveness and readiness. Liveness (`GET /healthz`) only says the process answers.
/// Readiness (`GET /readyz`) runs every registered check (Redis PING, a downstream
/// service...) and is 503 while any fails or once shutdown has begun, so a load balancer
/// stops sending new work before the server stops accepting.
///
/// Thread-safety: add checks at start-up; check_ready() and set_draining() may be called
/// from any thread afterwards.

#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <functional>
#include <keel/framework/expected.hpp>
#include <string>
#include <utility>
#include <vector>

namespace keel::redis {
class connection;
}

namespace keel::http {

namespace asio = boost::asio;

/// The readiness checks behind /readyz, and whether shutdown has begun; see the file's description.
class health {
  public:
    /// A readiness check: success, or a short reason. It must bound its own duration, and
    /// may be called from several server threads at once.
    using check = std::function<asio::awaitable<keel::expected<void, std::string>>()>;

    /// What check_ready() found.
    struct report {
        /// Every check passed and the service is not draining.
        bool ready = true;
        std::vector<std::pair<std::string, std::string>> checks;  ///< name -> "ok" or reason
    };

    /// Registers the check `name`; /readyz reports it by that name.
    void add_check(std::string name, check c);
    /// From now on not ready (the server calls this when shutdown begins).
    void set_draining() { draining_.store(true); }
    /// Whether set_draining() was called.
    bool draining() const { return draining_.load(); }

    /// Runs every check in registration order.
    asio::awaitable<report> check_ready() const;

  private:
    std::vector<std::pair<std::string, check>> checks_;
    std::atomic<bool> draining_{false};
};

/// A /metrics source (metrics::add_source) with the requests Redis refused for want of
/// writes, by reason: keel_redis_refused_writes_total{reason="oom"|"misconf"|"readonly"}.
std::function<boost::asio::awaitable<std::string>()> redis_metrics(redis::connection& connection);

/// A readiness check that PINGs Redis through `connection` with `timeout`, and fails while
/// Redis refuses writes (redis::connection::write_refusal(): OOM, MISCONF, READONLY) with
/// Redis's reason: a service that cannot write cannot serve, whichever the reason, so /readyz
/// says "not ready" for all three alike (under MISCONF the PING itself fails). While one is
/// going on, each check makes one probe write (probe_writes), so readiness comes back without
/// a restart as soon as Redis accepts writes. The connection must outlive the health object.
health::check redis_check(redis::connection& connection,
                          std::chrono::milliseconds timeout = std::chrono::seconds(1));

}  // namespace keel::http
