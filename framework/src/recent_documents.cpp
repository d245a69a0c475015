#include "recent_documents.hpp"

namespace keel {

std::optional<std::string> recent_documents::find(const std::string& key) {
    std::lock_guard lock(mutex_);
    auto at = index_.find(key);
    if (at == index_.end()) return std::nullopt;
    lru_.splice(lru_.begin(), lru_, at->second);
    return at->second->document;
}

void recent_documents::remember(const std::string& key, std::string document) {
    std::lock_guard lock(mutex_);
    if (auto at = index_.find(key); at != index_.end()) {
        auto known = at->second;
        if (entry::cost_of(key, document) <= capacity_) {
            // The entry kept, its document replaced: no node or key made again.
            bytes_ = bytes_ - known->document.size() + document.size();
            known->document = std::move(document);
            lru_.splice(lru_.begin(), lru_, known);
            while (bytes_ > capacity_) erase(std::prev(lru_.end()));
            return;
        }
        erase(known);
    }
    entry fresh{key, std::move(document)};
    if (fresh.cost() > capacity_) return;
    bytes_ += fresh.cost();
    lru_.push_front(std::move(fresh));
    index_.emplace(lru_.front().key, lru_.begin());
    while (bytes_ > capacity_) erase(std::prev(lru_.end()));
}

void recent_documents::forget(const std::string& key) {
    std::lock_guard lock(mutex_);
    if (auto at = index_.find(key); at != index_.end()) erase(at->second);
}

std::size_t recent_documents::bytes() const {
    std::lock_guard lock(mutex_);
    return bytes_;
}

std::size_t recent_documents::size() const {
    std::lock_guard lock(mutex_);
    return lru_.size();
}

void recent_documents::erase(entries::iterator at) {
    bytes_ -= at->cost();
    index_.erase(at->key);
    lru_.erase(at);
}

}  // namespace keel
