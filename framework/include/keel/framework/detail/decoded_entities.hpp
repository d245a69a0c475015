#pragma once

// repository<T>'s memory of the values of documents it decoded or wrote, so that reading the
// same document again costs a copy of T instead of a JSON parse (about 27,000 instructions
// for keel-orders' order; its copy, about 1,500). Keyed by the document's text, byte for byte:
// decoding is a function of the text alone, so an entry can never stand in for a document
// that changed, and the versions of an entity that readers still see (a poll of the one
// before the last write) are found as well as the newest. Least recently used out first past
// a byte budget, counted as twice the document (the value taken to weigh what its text does)
// and a fixed overhead.
//
// Thread-safe: one mutex, held for a lookup and a copy of T or an insert; nothing is decoded
// or encoded under it.

#include <cstddef>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace keel::detail {

template <class T>
class decoded_entities {
  public:
    static constexpr std::size_t entry_overhead = 192;

    explicit decoded_entities(std::size_t capacity_bytes) : capacity_(capacity_bytes) {}

    // The value remembered for exactly `document`.
    std::optional<T> find(std::string_view document) {
        std::lock_guard lock(mutex_);
        auto at = index_.find(document);
        if (at == index_.end()) return std::nullopt;
        lru_.splice(lru_.begin(), lru_, at->second);
        return at->second->value;
    }

    // Remembers `value` as what `document` decodes to.
    void remember(std::string document, T value) {
        std::lock_guard lock(mutex_);
        if (auto at = index_.find(document); at != index_.end()) erase(at->second);
        entry fresh{std::move(document), std::move(value)};
        if (fresh.cost() > capacity_) return;
        bytes_ += fresh.cost();
        lru_.push_front(std::move(fresh));
        index_.emplace(lru_.front().document, lru_.begin());
        while (bytes_ > capacity_) erase(std::prev(lru_.end()));
    }

    std::size_t size() const {
        std::lock_guard lock(mutex_);
        return lru_.size();
    }

  private:
    struct entry {
        std::string document;
        T value;
        std::size_t cost() const { return 2 * document.size() + entry_overhead; }
    };
    using entries = std::list<entry>;

    void erase(typename entries::iterator at) {
        bytes_ -= at->cost();
        index_.erase(std::string_view(at->document));
        lru_.erase(at);
    }

    mutable std::mutex mutex_;
    const std::size_t capacity_;
    std::size_t bytes_ = 0;
    entries lru_;  // most recently used first
    // views of entry::document
    std::unordered_map<std::string_view, typename entries::iterator> index_;
};

}  // namespace keel::detail
