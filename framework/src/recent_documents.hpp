#pragma once

// The documents this process last wrote or read for an update, by key, least recently used
// first out once they take more than a byte budget. redis_documents' read_for_update() answers
// from it, so that an update of an entity this process wrote last needs no read: the
// conditional write checks the remembered document against the stored one anyway, and on a
// mismatch the store answers with the current one, which replaces it here. A hint, never a
// source of truth: a stale entry costs one refused write, not a wrong one.
//
// Thread-safe (one mutex; each call is a lookup or an insert, no I/O under it).

#include <cstddef>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace keel {

class recent_documents {
  public:
    // What one entry is counted as beyond its key and document: the list node, the index
    // entry and the strings' own headers, roughly.
    static constexpr std::size_t entry_overhead = 128;

    explicit recent_documents(std::size_t capacity_bytes) : capacity_(capacity_bytes) {}

    // The document remembered under `key`, now the most recently used; nullopt if none.
    std::optional<std::string> find(const std::string& key);
    // Remembers `document` under `key` (replacing what was there), then evicts the least
    // recently used entries until the whole fits. A document larger than the budget on its
    // own is not kept (and the key's older entry is dropped).
    void remember(const std::string& key, std::string document);
    void forget(const std::string& key);

    std::size_t bytes() const;
    std::size_t size() const;

  private:
    struct entry {
        std::string key;
        std::string document;
        static std::size_t cost_of(std::string_view key, std::string_view document) {
            return key.size() + document.size() + entry_overhead;
        }
        std::size_t cost() const { return cost_of(key, document); }
    };
    using entries = std::list<entry>;

    void erase(entries::iterator at);

    mutable std::mutex mutex_;
    const std::size_t capacity_;
    std::size_t bytes_ = 0;
    entries lru_;                                                    // most recently used first
    std::unordered_map<std::string_view, entries::iterator> index_;  // views of entry::key
};

}  // namespace keel
