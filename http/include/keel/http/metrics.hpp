#pragma once

/// @file
/// HTTP metrics in Prometheus text format (exposition format 0.0.4):
///
/// @code
///   keel_http_requests_total{method,route,status}          counter
///   keel_http_request_duration_seconds{method,route}       histogram
///   keel_http_connections_open                             gauge
///   keel_http_requests_in_flight                           gauge
/// @endcode
///
/// `route` is the matched pattern ("/orders/:id<int>"), never the raw path, so the number
/// of series is bounded by the number of routes; unmatched requests share route="unmatched".
/// Thread-safe: every counter is a relaxed atomic; a route's series is created once under a
/// lock, and each thread caches where it is, so the request path takes no lock. A metrics
/// object observes the routes of one router.
///
/// Other parts of a service add their own text with add_source() (the process engine:
/// `m.add_source([&engine] { return engine.render_metrics(); })`); /metrics serves
/// collect(): the HTTP figures, then every source's.

#include <array>
#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <keel/framework/prometheus.hpp>
#include <keel/http/message.hpp>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace keel::http {

struct route_info;

/// The HTTP server's figures, and the /metrics text with the sources added to it; see the file's
/// description.
class metrics {
  public:
    /// Upper bounds of the latency buckets, in seconds (+Inf is implicit).
    static constexpr const auto& buckets = prometheus::duration_histogram::buckets;

    /// No requests counted yet.
    metrics();
    metrics(const metrics&) = delete;
    metrics& operator=(const metrics&) = delete;

    /// One finished request on `route` (null: unmatched).
    void observe(const route_info* route, http::status s, std::chrono::nanoseconds elapsed);

    /// A connection was accepted.
    void connection_opened() { connections_.fetch_add(1, std::memory_order_relaxed); }
    /// A connection was closed.
    void connection_closed() { connections_.fetch_sub(1, std::memory_order_relaxed); }
    /// A request started.
    void request_started() { in_flight_.fetch_add(1, std::memory_order_relaxed); }
    /// A request's response was written.
    void request_finished() { in_flight_.fetch_sub(1, std::memory_order_relaxed); }
    /// Connections open now.
    std::int64_t connections_open() const { return connections_.load(); }
    /// Requests being handled now.
    std::int64_t requests_in_flight() const { return in_flight_.load(); }
    /// Requests counted for `route` with status `s` (tests, dashboards).
    std::uint64_t requests(const route_info* route, http::status s) const;

    /// The Prometheus text exposition of the HTTP figures.
    std::string render() const;

    ///@{
    /// More exposition text, produced when /metrics is read. Add sources before the server
    /// starts. A source that throws is left out of that answer (with a comment line saying
    /// why), so one failing part does not hide the others.
    using source = std::function<boost::asio::awaitable<std::string>()>;
    void add_source(source s);
    ///@}
    /// render() and every source's text.
    boost::asio::awaitable<std::string> collect() const;

  private:
    struct series {
        std::string method;
        std::string route;
        std::array<std::atomic<std::uint64_t>, 500> by_status{};  // index: status - 100
        prometheus::duration_histogram latency;
    };
    series& series_for(const route_info* route);
    const series* find(const route_info* route) const;

    std::uint64_t id_;
    mutable std::shared_mutex mutex_;
    std::unordered_map<const route_info*, series*> index_;
    std::deque<series> series_;
    std::atomic<std::int64_t> connections_{0};
    std::atomic<std::int64_t> in_flight_{0};
    std::vector<source> sources_;
};

}  // namespace keel::http
