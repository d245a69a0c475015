#include "refusals.hpp"

#include <fmt/format.h>

#include <cctype>

namespace keel::redis::detail {

std::optional<write_refusals::kind> write_refusals::of(std::string_view text) {
    auto code = text.substr(0, text.find(' '));
    for (std::size_t i = 0; i < names.size(); ++i)
        if (code == names[i]) return static_cast<kind>(i);
    return std::nullopt;
}

std::optional<std::string> write_refusals::refused(kind k, std::string_view request,
                                                   std::string_view text) {
    counts_[static_cast<std::size_t>(k)].fetch_add(1, std::memory_order_relaxed);
    std::lock_guard lock(mutex_);
    ++refused_since_;
    refused_requests_.emplace(request);
    if (refusing_.load(std::memory_order_relaxed) && kind_ == k) return std::nullopt;
    kind_ = k;
    reason_ = std::string(text);
    refusing_.store(true, std::memory_order_release);
    return fmt::format(
        "Redis refuses writes ({}): {}; requests that write fail until it accepts "
        "them again (keel_redis_refused_writes_total counts them)",
        names[static_cast<std::size_t>(k)], reason_);
}

std::optional<std::string> write_refusals::succeeded(std::string_view request) {
    std::lock_guard lock(mutex_);
    if (!refusing_.load(std::memory_order_relaxed) || !refused_requests_.contains(request))
        return std::nullopt;
    return end();
}

std::optional<std::string> write_refusals::probe_succeeded() {
    std::lock_guard lock(mutex_);
    if (!refusing_.load(std::memory_order_relaxed)) return std::nullopt;
    return end();
}

std::string write_refusals::end() {
    auto line = fmt::format("Redis accepts writes again ({} requests refused with {})",
                            refused_since_, names[static_cast<std::size_t>(kind_)]);
    refusing_.store(false, std::memory_order_release);
    refused_requests_.clear();
    refused_since_ = 0;
    reason_.clear();
    return line;
}

std::optional<std::string> write_refusals::current() const {
    if (!refusing()) return std::nullopt;
    std::lock_guard lock(mutex_);
    if (!refusing_.load(std::memory_order_relaxed)) return std::nullopt;
    return reason_;
}

namespace {
// The next bulk string of an encoded command at `at` ("$<n>\r\n<bytes>\r\n"), or empty.
std::string_view bulk_at(std::string_view payload, std::size_t& at) {
    if (at >= payload.size() || payload[at] != '$') return {};
    auto end = payload.find("\r\n", at);
    if (end == std::string_view::npos) return {};
    std::size_t n = 0;
    for (auto i = at + 1; i < end; ++i) {
        if (payload[i] < '0' || payload[i] > '9') return {};
        n = n * 10 + static_cast<std::size_t>(payload[i] - '0');
    }
    if (end + 2 + n > payload.size()) return {};
    auto bulk = payload.substr(end + 2, n);
    at = end + 2 + n + 2;
    return bulk;
}
}  // namespace

std::string request_name(std::string_view payload) {
    auto at = payload.find("\r\n");
    if (payload.empty() || payload[0] != '*' || at == std::string_view::npos) return {};
    at += 2;
    std::string name(bulk_at(payload, at));
    for (auto& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (name == "EVALSHA") name.append(" ").append(bulk_at(payload, at));
    return name;
}

}  // namespace keel::redis::detail
