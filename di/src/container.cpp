#include <exception>
#include <keel/di/container.hpp>
#include <ranges>

#include "graph.hpp"

namespace keel::di {
namespace detail {

graph::graph(std::vector<registration> registrations)
    : registrations_(std::move(registrations)),
      singletons_(registrations_.size()),
      constructing_(registrations_.size(), false),
      handle_(std::shared_ptr<graph>(std::shared_ptr<void>{}, this), true) {
    for (std::size_t i = 0; i < registrations_.size(); ++i)
        index_.emplace(*registrations_[i].type, i);
}

graph::~graph() {
    try {
        stop();
    } catch (...) {  // NOLINT(bugprone-empty-catch): a destructor reports nothing
    }
    for (std::size_t index : std::views::reverse(order_)) {
        singletons_[index] = {};
        registrations_[index].instance = {};
    }
}

void graph::construct_singletons() {
    for (std::size_t i = 0; i < registrations_.size(); ++i) {
        if (registrations_[i].life != lifetime::per_request) singleton_at(i);
    }
    ready_ = true;
}

void* graph::resolve(const std::type_info& type, scope_state* request) {
    std::size_t index = index_of(type);
    if (registrations_[index].life != lifetime::per_request) return singleton_at(index);
    if (request == nullptr) {
        throw error(type_name(type) +
                    " is per-request: resolve it from a scope (container::make_scope()), or from "
                    "a per-request type");
    }
    return request->get(index);
}

std::size_t graph::index_of(const std::type_info& type) const {
    auto found = index_.find(type);
    if (found == index_.end()) throw error(type_name(type) + " is not registered");
    return found->second;
}

void* graph::singleton_at(std::size_t index) {
    if (void* ptr = singletons_[index].ptr) return ptr;
    if (ready_) throw error(type_name(*registrations_[index].type) + " was already destroyed");
    construct(index);
    return singletons_[index].ptr;
}

// Runs only inside build(), on the building thread. Dependencies declared in `inject` or a
// factory's parameters are constructed first through fetch() -> resolve(); the cycle guard
// catches what validation cannot see: a factory that resolves from container& in its body.
void graph::construct(std::size_t index) {
    const registration& reg = registrations_[index];
    if (constructing_[index]) {
        throw error("dependency cycle: " + type_name(*reg.type) +
                    " is resolved while it is being constructed (by a factory that uses the "
                    "container)");
    }
    constructing_[index] = true;
    if (!reg.make) {
        singletons_[index] = reg.instance;
    } else {
        context ctx{this, nullptr};
        try {
            singletons_[index] = reg.make(ctx);
        } catch (const error&) {
            throw;
        } catch (const std::exception& e) {
            std::throw_with_nested(
                error("constructing " + type_name(*reg.type) + " failed: " + e.what()));
        }
    }
    constructing_[index] = false;
    order_.push_back(index);
}

void graph::start() {
    if (!started_.empty()) throw error("keel::di::container::start() called twice");
    for (std::size_t index : order_) {
        const registration& reg = registrations_[index];
        if (!reg.start && !reg.stop) continue;
        try {
            if (reg.start) reg.start(singletons_[index].ptr);
        } catch (const std::exception& e) {
            try {
                stop();
            } catch (...) {  // NOLINT(bugprone-empty-catch): the start failure is the news
            }
            std::throw_with_nested(
                error("starting " + type_name(*reg.type) + " failed: " + e.what()));
        }
        started_.push_back(index);
    }
}

void graph::stop() {
    std::string failures;
    while (!started_.empty()) {
        std::size_t index = started_.back();
        started_.pop_back();
        const registration& reg = registrations_[index];
        if (!reg.stop) continue;
        try {
            reg.stop(singletons_[index].ptr);
        } catch (const std::exception& e) {
            failures += (failures.empty() ? "" : "\n") + std::string("stopping ") +
                        type_name(*reg.type) + " failed: " + e.what();
        }
    }
    if (!failures.empty()) throw error(failures);
}

scope_state::scope_state(std::shared_ptr<graph> owner) : owner(std::move(owner)), handle(this) {}

scope_state::~scope_state() {
    while (!objects.empty()) objects.pop_back();
}

void* scope_state::get(std::size_t index) {
    for (auto& [i, obj] : objects) {
        if (i == index) return obj.ptr;
    }
    context ctx{owner.get(), this};
    object made = owner->at(index).make(ctx);
    void* ptr = made.ptr;
    objects.emplace_back(index, std::move(made));
    return ptr;
}

void* resolve(context& ctx, const std::type_info& type) {
    return ctx.owner->resolve(type, ctx.request);
}

container& container_of(context& ctx) {
    return ctx.owner->handle();
}

scope& scope_of(context& ctx) {
    if (ctx.request == nullptr) {
        throw error("keel::di::scope is only available to per-request types");
    }
    return ctx.request->handle;
}

void throw_null_factory_result(const std::type_info& type) {
    throw error("the factory for " + type_name(type) + " returned a null pointer");
}

}  // namespace detail

// ---- container ----

namespace {
// The graph's own handle (given to factories) never owns; a copy of it does.
std::shared_ptr<detail::graph> owning(const std::shared_ptr<detail::graph>& graph, bool view) {
    return view && graph ? graph->weak_from_this().lock() : graph;
}
}  // namespace

container::container() = default;
container::container(std::shared_ptr<detail::graph> graph, bool view)
    : graph_(std::move(graph)), view_(view) {}
container::container(const container& other) : graph_(owning(other.graph_, other.view_)) {}
container::container(container&& other) noexcept
    : graph_(other.view_ ? owning(other.graph_, true) : std::move(other.graph_)) {}
container& container::operator=(const container& other) {
    if (this != &other) graph_ = owning(other.graph_, other.view_);
    return *this;
}
container& container::operator=(container&& other) noexcept {
    if (this != &other) graph_ = other.view_ ? owning(other.graph_, true) : std::move(other.graph_);
    return *this;
}
container::~container() = default;

void* container::lookup(const std::type_info& type) const {
    if (!graph_) throw error("get() on an empty keel::di::container (not built)");
    return graph_->resolve(type, nullptr);
}

bool container::has(const std::type_info& type) const {
    return graph_ && graph_->contains(type);
}

void container::start() {
    if (!graph_) throw error("start() on an empty keel::di::container (not built)");
    graph_->start();
}

void container::stop() {
    if (graph_) graph_->stop();
}

scope container::make_scope() const {
    if (!graph_) throw error("make_scope() on an empty keel::di::container (not built)");
    return scope(std::make_unique<detail::scope_state>(owning(graph_, view_)));
}

// ---- scope ----

scope::scope(std::unique_ptr<detail::scope_state> owned)
    : owned_(std::move(owned)), state_(owned_.get()) {}
scope::scope(detail::scope_state* view) : state_(view) {}
scope::scope(scope&& other) noexcept
    : owned_(std::move(other.owned_)), state_(owned_ ? owned_.get() : other.state_) {
    if (owned_) other.state_ = nullptr;
}
scope& scope::operator=(scope&& other) noexcept {
    if (this != &other) {
        owned_ = std::move(other.owned_);
        state_ = owned_ ? owned_.get() : other.state_;
        if (owned_) other.state_ = nullptr;
    }
    return *this;
}
scope::~scope() = default;

void* scope::lookup(const std::type_info& type) {
    if (state_ == nullptr) throw error("get() on a moved-from keel::di::scope");
    return state_->owner->resolve(type, state_);
}

}  // namespace keel::di
