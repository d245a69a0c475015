#pragma once

/// @file
/// keel::di — dependency injection by type.
///
/// @code
///   keel::di::registry reg;
///   reg.instance(std::ref(service))                        // an object the caller owns
///      .singleton<order_repository>()                      // constructed via its `inject`
///      .singleton<payment_gateway, stripe_gateway>()       // interface -> implementation
///      .singleton<mailer>([](const settings& s) { return std::make_unique<mailer>(s); })
///      .per_request<order_controller>();                   // one per scope
///   keel::di::container c = reg.build();                   // validates, builds singletons
///   auto scope = c.make_scope();                           // per request
///   order_controller& ctrl = scope.get<order_controller>();
/// @endcode
///
/// See docs/architecture.md, "Dependency injection", for the design.

#include <functional>
#include <keel/di/detail/registration.hpp>
#include <keel/di/detail/traits.hpp>
#include <keel/di/inject.hpp>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace keel::di {

/// A wrong registration (missing dependency, cycle, lifetime mismatch, duplicate) or a
/// wrong lookup. what() names the types involved, demangled; build() lists every problem
/// it finds, one per line.
class error : public std::logic_error {
  public:
    using std::logic_error::logic_error;
};

class container;

/// Collects registrations at start-up, then build() validates them and makes a container.
/// Registering a type twice is an error (use replace() to swap one for a fake in a test).
/// Problems are collected and reported together by build(), never half-way through
/// registration. Copyable (copies share factories and instances), so a test can start from
/// the service's registry and replace a few entries. Not thread-safe: it is used by the code
/// that assembles the service.
class registry {
  public:
    /// One shared object, constructed from T::inject (or default-constructed).
    template <class T>
    registry& singleton() {
        return add(detail::constructed<T, T, true>(detail::lifetime::singleton));
    }
    /// Interface -> implementation: get<Interface>() yields an Impl built from Impl::inject.
    template <class Interface, class Impl>
    registry& singleton() {
        return add(detail::constructed<Interface, Impl, true>(detail::lifetime::singleton));
    }
    /// Built by a factory whose parameters (references) are its dependencies:
    /// @code
    ///   [](A& a, B& b) { return std::make_unique<T>(a, b); }
    /// @endcode
    /// It may return T, std::unique_ptr<T> or std::shared_ptr<T> (or of a type derived from T).
    template <class T, class F>
    registry& singleton(F factory) {
        return add(detail::produced<T, F, true>(std::move(factory), detail::lifetime::singleton));
    }

    /// An existing object, shared with the caller.
    template <class T>
    registry& instance(std::shared_ptr<T> obj) {
        return add(detail::held<T>(std::move(obj)));
    }
    /// An existing object the caller owns (`instance(std::ref(service))`): it must outlive
    /// the container and every scope made from it.
    template <class T>
    registry& instance(std::reference_wrapper<T> obj) {
        return instance(std::shared_ptr<T>(std::shared_ptr<void>{}, &obj.get()));
    }

    ///@{
    /// One object per scope (per request), made on first use in that scope. May depend on
    /// singletons, on other per-request types and on keel::di::scope&.
    template <class T>
    registry& per_request() {
        return add(detail::constructed<T, T, false>(detail::lifetime::per_request));
    }
    template <class Interface, class Impl>
    registry& per_request() {
        return add(detail::constructed<Interface, Impl, false>(detail::lifetime::per_request));
    }
    template <class T, class F>
    registry& per_request(F factory) {
        return add(
            detail::produced<T, F, false>(std::move(factory), detail::lifetime::per_request));
    }
    ///@}

    ///@{
    /// Tests: swap the registration of T (which must exist) for a fake. A factory keeps T's
    /// lifetime; an object makes T an instance. Dependencies are re-validated by build().
    template <class T, detail::factory_argument F>
    registry& replace(F factory) {
        return swap(detail::produced<T, F, false>(std::move(factory), detail::lifetime::singleton));
    }
    template <class T>
    registry& replace(std::shared_ptr<T> obj) {
        return swap(detail::held<T>(std::move(obj)));
    }
    template <class T>
    registry& replace(std::reference_wrapper<T> obj) {
        return replace(std::shared_ptr<T>(std::shared_ptr<void>{}, &obj.get()));
    }
    ///@}

    /// Whether T is registered (with any lifetime).
    template <class T>
    bool contains() const {
        return has(typeid(std::remove_cv_t<T>));
    }

    /// Validates the whole graph and constructs every singleton, dependencies first.
    /// Throws keel::di::error listing every missing dependency, cycle ("a -> b -> a"),
    /// singleton that depends on a per-request type, duplicate or dangling replace. A
    /// constructor that throws aborts the build: its exception is rethrown as a
    /// keel::di::error naming the type, with the original nested (std::throw_with_nested).
    /// The registry is left intact and may be built again.
    container build() const;

  private:
    registry& add(detail::registration reg);
    registry& swap(detail::registration reg);
    bool has(const std::type_info& type) const;

    std::vector<detail::registration> registrations_;
    std::vector<std::string> problems_;
};

class scope;

/// The built object graph. Every singleton is constructed by build(), so get() only looks
/// up an immutable table: it is safe from any number of threads without locks and never
/// constructs anything after start-up. A container is a cheap handle: copies share the
/// graph, and the singletons are destroyed, in reverse order of construction, when the
/// last container or scope referring to it goes.
class container {
  public:
    container();  ///< empty: get() throws until assigned from registry::build()
    ///@{
    /// Another handle on the same graph.
    container(const container& other);
    container& operator=(const container& other);
    container(container&& other) noexcept;
    container& operator=(container&& other) noexcept;
    ///@}
    ~container();

    /// The singleton or instance registered as T. Throws keel::di::error if T is not
    /// registered, or is per-request (resolve it from a scope).
    template <class T>
    T& get() const {
        return *static_cast<T*>(lookup(typeid(std::remove_cv_t<T>)));
    }
    /// Whether T is registered (with any lifetime).
    template <class T>
    bool contains() const {
        return has(typeid(std::remove_cv_t<T>));
    }
    /// A new per-request scope. It keeps the graph alive.
    scope make_scope() const;

    ///@{
    /// Lifecycles. A singleton whose type has `void start()` and/or `void stop()` (found by
    /// the type; for an interface binding, by the implementation) is started by start(), in
    /// construction order (its dependencies first), and stopped by stop() in the reverse
    /// order. When a start() throws, the ones already started are stopped and start()
    /// throws keel::di::error naming the type (the original nested). stop() stops every
    /// started one even when some throw, then throws one error listing the failures. The
    /// last handle to go stops what is still started. Instances (registry::instance) are
    /// the caller's to start and stop. Not thread-safe: called by the code that runs the
    /// service, start() once.
    void start();
    void stop();
    ///@}

  private:
    friend class registry;
    friend class detail::graph;
    explicit container(std::shared_ptr<detail::graph> graph, bool view = false);
    void* lookup(const std::type_info& type) const;
    bool has(const std::type_info& type) const;

    std::shared_ptr<detail::graph> graph_;
    bool view_ = false;  // the graph's own handle, given to factories: never owns
};

/// One request's objects. get() returns the scope's per-request object (made on first use,
/// dependencies first) or a singleton. Objects are destroyed in reverse order of creation
/// when the scope is destroyed. Not thread-safe: a scope belongs to one request, which may
/// move between threads but uses it from one at a time. Objects that took `scope&` hold a
/// reference that stays valid when the scope handle is moved.
class scope {
  public:
    ///@{
    /// Moves the scope; its objects stay where they are.
    scope(scope&& other) noexcept;
    scope& operator=(scope&& other) noexcept;
    ///@}
    ~scope();

    /// The per-request object registered as T (made on first use), or the singleton or instance;
    /// throws keel::di::error if T is not registered.
    template <class T>
    T& get() {
        return *static_cast<T*>(lookup(typeid(std::remove_cv_t<T>)));
    }

  private:
    friend class container;
    friend struct detail::scope_state;
    explicit scope(std::unique_ptr<detail::scope_state> owned);
    explicit scope(detail::scope_state* view);
    void* lookup(const std::type_info& type);

    std::unique_ptr<detail::scope_state> owned_;  // null for the view given to factories
    detail::scope_state* state_ = nullptr;
};

}  // namespace keel::di
