#pragma once

// Redis refusing writes while it answers (internal): OOM (maxmemory reached under
// noeviction), MISCONF (an RDB or AOF write failed: a full disk), READONLY (the node became a
// replica). One tracker per connection, shared by its lanes or cluster nodes, so that an
// operator reads one warn line naming Redis's reason at the first refused request, one info
// line when a request of a kind that was refused succeeds again (or a probe write does), and
// a count by kind; and /readyz says "refusing writes" meanwhile (connection::write_refusal(),
// probe_writes()). Thread-safe.

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>

namespace keel::redis::detail {

class write_refusals {
  public:
    enum class kind : std::uint8_t { oom, misconf, readonly };
    static constexpr std::array<std::string_view, 3> names{"OOM", "MISCONF", "READONLY"};

    // The refusal an error reply's text is, if any.
    static std::optional<kind> of(std::string_view error_text);

    // A request refused: counted; the line to log when it begins a refusal (or changes its
    // kind). `request` names what was refused (a command, or EVALSHA and the script's SHA1).
    std::optional<std::string> refused(kind k, std::string_view request, std::string_view text);
    // A request that succeeded while refusing: the line to log when it is of a kind that was
    // refused (so writes work again: a read-only request proves nothing), and the refusal ends.
    std::optional<std::string> succeeded(std::string_view request);
    // A write made to find out succeeded (connection::probe_writes): the line to log when it
    // ends a refusal.
    std::optional<std::string> probe_succeeded();

    bool refusing() const noexcept { return refusing_.load(std::memory_order_acquire); }
    // Redis's text of the refusal going on, if one is.
    std::optional<std::string> current() const;
    std::uint64_t count(kind k) const noexcept {
        return counts_[static_cast<std::size_t>(k)].load(std::memory_order_relaxed);
    }

  private:
    std::string end();  // under mutex_: the refusal ends; the line to log

    mutable std::mutex mutex_;
    std::atomic<bool> refusing_{false};
    kind kind_ = kind::oom;
    std::string reason_;
    std::set<std::string, std::less<>> refused_requests_;
    std::uint64_t refused_since_ = 0;
    std::array<std::atomic<std::uint64_t>, 3> counts_{};
};

// What a request is, for write_refusals: its command's name, with the script's SHA1 for
// EVALSHA (an encoded RESP command as the connection sends it).
std::string request_name(std::string_view payload);

}  // namespace keel::redis::detail
