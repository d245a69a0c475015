#pragma once

// The type-erased core shared by the registration templates (container.hpp) and the
// compiled graph (src/). Not part of the public API.

#include <functional>
#include <memory>
#include <string>
#include <typeinfo>
#include <vector>

namespace keel::di {
class container;
class scope;
}  // namespace keel::di

namespace keel::di::detail {

class graph;
struct scope_state;

enum class lifetime { singleton, per_request, instance };

// A constructed object: `owner` keeps it alive, `ptr` points at it as the registered type
// (for an interface binding, at the interface subobject).
struct object {
    std::shared_ptr<void> owner;
    void* ptr = nullptr;
};

// What a constructor or factory sees while it runs: the graph for singletons, and the
// scope when it is being built for a request (null while building singletons).
struct context {
    graph* owner;
    scope_state* request;
};

// One registration: the type it answers for, how long its object lives, the types its
// constructor or factory takes (by reference), and how to make it.
struct registration {
    const std::type_info* type = nullptr;
    lifetime life = lifetime::singleton;
    std::vector<const std::type_info*> deps;
    std::function<object(context&)> make;  // empty for an instance
    object instance;
    // A singleton's start() and stop() (see container::start), given its object as the
    // registered type; empty when it has none.
    std::function<void(void*)> start;
    std::function<void(void*)> stop;
};

// Readable name of a type ("app::order_repository"), for error messages.
std::string type_name(const std::type_info& type);

// Dependency lookups used by the generated constructors; see fetch() in traits.hpp.
void* resolve(context& ctx, const std::type_info& type);
container& container_of(context& ctx);
scope& scope_of(context& ctx);

// Thrown when a factory hands back a null pointer.
[[noreturn]] void throw_null_factory_result(const std::type_info& type);

}  // namespace keel::di::detail
