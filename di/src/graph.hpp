#pragma once

// The built object graph behind keel::di::container and the state behind keel::di::scope.

#include <cstddef>
#include <keel/di/container.hpp>
#include <typeindex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace keel::di::detail {

// Validated registrations plus every singleton, constructed once by construct_singletons()
// and read-only afterwards (so lookups from many threads need no lock). Destroys the
// singletons in reverse order of construction.
class graph : public std::enable_shared_from_this<graph> {
  public:
    explicit graph(std::vector<registration> registrations);
    graph(const graph&) = delete;
    graph& operator=(const graph&) = delete;
    ~graph();

    // Constructs every singleton, dependencies first. Called once, before the graph is shared.
    void construct_singletons();

    // Lifecycles (container::start / stop): start() in construction order, stop() of those
    // started in the reverse order.
    void start();
    void stop();

    // The object registered as `type`: a singleton, or the per-request object of `request`.
    void* resolve(const std::type_info& type, scope_state* request);
    bool contains(const std::type_info& type) const { return index_.contains(type); }
    const registration& at(std::size_t index) const { return registrations_[index]; }

    // The handle given to factories that take keel::di::container&.
    container& handle() { return handle_; }

  private:
    std::size_t index_of(const std::type_info& type) const;
    void* singleton_at(std::size_t index);
    void construct(std::size_t index);

    std::vector<registration> registrations_;
    std::unordered_map<std::type_index, std::size_t> index_;
    std::vector<object> singletons_;  // by registration index; empty for per-request types
    std::vector<std::size_t> order_;  // construction order
    std::vector<bool> constructing_;
    std::vector<std::size_t> started_;  // in start order
    bool ready_ = false;
    container handle_;
};

// One scope's per-request objects, in creation order (dependencies before dependents).
struct scope_state {
    explicit scope_state(std::shared_ptr<graph> owner);
    scope_state(const scope_state&) = delete;
    scope_state& operator=(const scope_state&) = delete;
    ~scope_state();

    void* get(std::size_t index);

    std::shared_ptr<graph> owner;
    std::vector<std::pair<std::size_t, object>> objects;
    scope handle;  // the scope& given to per-request types; stable when the scope moves
};

}  // namespace keel::di::detail
