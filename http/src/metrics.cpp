#include <fmt/format.h>

#include <keel/http/metrics.hpp>
#include <keel/http/router.hpp>

namespace keel::http {

using prometheus::escape;
using prometheus::header;

namespace {
std::atomic<std::uint64_t> next_metrics_id{1};

// Each thread remembers where it found a route's series, so the request path takes no
// lock and touches no shared cache line but the counters themselves. Keyed by the metrics
// object's id (never reused), so an entry of a destroyed object can never match.
struct cache_key {
    std::uint64_t owner;
    const route_info* route;
    bool operator==(const cache_key&) const = default;
};
struct cache_hash {
    std::size_t operator()(const cache_key& k) const {
        return std::hash<const void*>()(k.route) ^ (k.owner * 0x9e3779b97f4a7c15ull);
    }
};
}  // namespace

metrics::metrics() : id_(next_metrics_id.fetch_add(1)) {}

metrics::series& metrics::series_for(const route_info* route) {
    thread_local std::unordered_map<cache_key, series*, cache_hash> cache;
    auto& slot = cache[cache_key{id_, route}];
    if (slot) return *slot;
    std::unique_lock lock(mutex_);
    auto [it, inserted] = index_.try_emplace(route, nullptr);
    if (inserted) {
        auto& s = series_.emplace_back();
        s.method = route ? std::string(to_string(route->method)) : "";
        s.route = route ? route->pattern : "unmatched";
        it->second = &s;
    }
    slot = it->second;
    return *slot;
}

const metrics::series* metrics::find(const route_info* route) const {
    std::shared_lock lock(mutex_);
    auto it = index_.find(route);
    return it == index_.end() ? nullptr : it->second;
}

void metrics::observe(const route_info* route, http::status s, std::chrono::nanoseconds elapsed) {
    auto& series = series_for(route);
    auto code = to_int(s);
    if (code >= 100 && code < 600)
        series.by_status[static_cast<std::size_t>(code - 100)].fetch_add(1,
                                                                         std::memory_order_relaxed);
    series.latency.observe(elapsed);
}

std::uint64_t metrics::requests(const route_info* route, http::status s) const {
    auto* series = find(route);
    auto code = to_int(s);
    if (!series || code < 100 || code >= 600) return 0;
    return series->by_status[static_cast<std::size_t>(code - 100)].load();
}

std::string metrics::render() const {
    std::string out;
    header(out, "keel_http_requests_total", "counter",
           "HTTP requests answered, by route and status.");
    std::shared_lock lock(mutex_);
    for (auto& s : series_) {
        auto labels = fmt::format("method=\"{}\",route=\"{}\"", s.method, escape(s.route));
        for (std::size_t i = 0; i < s.by_status.size(); ++i) {
            auto n = s.by_status[i].load(std::memory_order_relaxed);
            if (n)
                out += fmt::format("keel_http_requests_total{{{},status=\"{}\"}} {}\n", labels,
                                   i + 100, n);
        }
    }
    header(out, "keel_http_request_duration_seconds", "histogram",
           "Time to produce a response, by route.");
    for (auto& s : series_) {
        auto labels = fmt::format("method=\"{}\",route=\"{}\"", s.method, escape(s.route));
        s.latency.render(out, "keel_http_request_duration_seconds", labels);
    }
    header(out, "keel_http_connections_open", "gauge", "Open client connections.");
    out += fmt::format("keel_http_connections_open {}\n", connections_.load());
    header(out, "keel_http_requests_in_flight", "gauge", "Requests being handled.");
    out += fmt::format("keel_http_requests_in_flight {}\n", in_flight_.load());
    return out;
}

void metrics::add_source(source s) {
    sources_.push_back(std::move(s));
}

boost::asio::awaitable<std::string> metrics::collect() const {
    auto out = render();
    for (const auto& s : sources_) {
        std::string part, failure;
        try {
            part = co_await s();
        } catch (const std::exception& e) {
            failure = e.what();
        }
        if (failure.empty())
            out += part;
        else
            out += "# keel: a metrics source failed: " + escape(failure) + "\n";
    }
    co_return out;
}

}  // namespace keel::http
