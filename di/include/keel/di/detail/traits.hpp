#pragma once

// Compile-time half of registration: what a type or factory depends on, the checks that
// turn a wrong declaration into a readable static_assert, and the generated code that
// constructs an object from its resolved dependencies. Not part of the public API.

#include <concepts>
#include <keel/di/detail/registration.hpp>
#include <keel/di/inject.hpp>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

namespace keel::di::detail {

template <class... Ts>
struct type_list {};

template <class T>
concept plain_type = std::is_object_v<T> && std::is_same_v<T, std::remove_cv_t<T>>;

template <class... Ds>
inline constexpr bool all_references = (std::is_lvalue_reference_v<Ds> && ...);

template <class... Ds>
inline constexpr bool takes_scope = (std::is_same_v<std::remove_cvref_t<Ds>, scope> || ...);

// ---- What a type declares with `using inject = keel::di::inject<...>` ----

template <class T>
struct inject_list {
    static constexpr bool valid = false;
};
template <class... Ds>
struct inject_list<inject<Ds...>> {
    static constexpr bool valid = true;
    using type = type_list<Ds...>;
};

template <class T>
struct declared {
    static constexpr bool has_inject = false;
    using list = inject_list<inject<>>;
};
template <class T>
requires requires {
    typename T::inject;
}
struct declared<T> {
    static constexpr bool has_inject = true;
    using list = inject_list<typename T::inject>;
};

// ---- What a factory takes and returns (deduced from its one call operator) ----

template <class F>
struct callable {
    static constexpr bool deducible = false;
};
template <class R, class... A>
struct callable<R (*)(A...)> {
    static constexpr bool deducible = true;
    using result = R;
    using args = type_list<A...>;
};
template <class R, class... A>
struct callable<R (*)(A...) noexcept> : callable<R (*)(A...)> {};
template <class C, class R, class... A>
struct callable<R (C::*)(A...)> : callable<R (*)(A...)> {};
template <class C, class R, class... A>
struct callable<R (C::*)(A...) const> : callable<R (*)(A...)> {};
template <class C, class R, class... A>
struct callable<R (C::*)(A...) noexcept> : callable<R (*)(A...)> {};
template <class C, class R, class... A>
struct callable<R (C::*)(A...) const noexcept> : callable<R (*)(A...)> {};
template <class F>
requires requires {
    &F::operator();
}
struct callable<F> : callable<decltype(&F::operator())> {};

template <class L>
struct references_only;
template <class... Ds>
struct references_only<type_list<Ds...>> : std::bool_constant<all_references<Ds...>> {};

template <class T, class L>
struct constructible_from;
template <class T, class... Ds>
struct constructible_from<T, type_list<Ds...>> : std::is_constructible<T, Ds...> {};

template <class L>
struct scope_in;
template <class... Ds>
struct scope_in<type_list<Ds...>> : std::bool_constant<takes_scope<Ds...>> {};

template <class R>
struct smart_pointer : std::false_type {};
template <class U, class D>
struct smart_pointer<std::unique_ptr<U, D>> : std::true_type {
    using element = U;
};
template <class U>
struct smart_pointer<std::shared_ptr<U>> : std::true_type {
    using element = U;
};

// A factory may return T, std::unique_ptr<T> or std::shared_ptr<T>, where T may also be
// a type publicly derived from the registered one. Raw pointers are refused: ownership
// would be a guess.
template <class T, class R>
constexpr bool valid_result() {
    if constexpr (smart_pointer<R>::value) {
        return std::is_convertible_v<typename smart_pointer<R>::element*, T*>;
    } else {
        return std::is_object_v<R> && !std::is_pointer_v<R> && std::is_convertible_v<R*, T*> &&
               std::is_move_constructible_v<R>;
    }
}

template <class T>
struct is_reference_wrapper : std::false_type {};
template <class T>
struct is_reference_wrapper<std::reference_wrapper<T>> : std::true_type {};

// Arguments that are objects to register rather than factories to call.
template <class F>
concept object_argument = smart_pointer<F>::value || is_reference_wrapper<F>::value;
template <class F>
concept factory_argument = !object_argument<F>;

// ---- Generated construction ----

// Resolves one dependency. D is a reference type from an `inject` list or factory.
template <class D>
D fetch(context& ctx) {
    using U = std::remove_cvref_t<D>;
    if constexpr (std::is_same_v<U, container>) {
        return container_of(ctx);
    } else if constexpr (std::is_same_v<U, scope>) {
        return scope_of(ctx);
    } else {
        return *static_cast<U*>(resolve(ctx, typeid(U)));
    }
}

template <class... Ds>
std::vector<const std::type_info*> dependency_types(type_list<Ds...>) {
    return {&typeid(std::remove_cvref_t<Ds>)...};
}

template <class T, class U>
object pin(std::shared_ptr<U> owned) {
    if (!owned) throw_null_factory_result(typeid(T));
    T* ptr = owned.get();
    return {std::move(owned), ptr};
}

template <class T, class R>
object own(R&& result) {
    if constexpr (smart_pointer<R>::value) {
        return pin<T>(std::shared_ptr<typename smart_pointer<R>::element>(std::move(result)));
    } else {
        return pin<T>(std::make_shared<std::remove_cv_t<R>>(std::move(result)));
    }
}

// Dependencies are fetched in a braced list, so in declaration order (left to right):
// objects of a scope are then created, and destroyed, in a deterministic order.
template <class T, class Impl, class... Ds>
std::function<object(context&)> constructor(type_list<Ds...>) {
    return [](context& ctx) {
        std::tuple<Ds...> deps{fetch<Ds>(ctx)...};
        return std::apply([](Ds... d) { return pin<T>(std::make_shared<Impl>(d...)); }, deps);
    };
}

template <class T, class F, class... Ds>
std::function<object(context&)> invoker(F factory, type_list<Ds...>) {
    auto shared = std::make_shared<F>(std::move(factory));
    return [shared](context& ctx) {
        std::tuple<Ds...> deps{fetch<Ds>(ctx)...};
        return own<T>(std::apply(*shared, deps));
    };
}

// Lifecycles: a singleton whose type has `void start()` and/or `void stop()`.
template <class X>
concept startable = requires(X& x) {
    { x.start() } -> std::same_as<void>;
};
template <class X>
concept stoppable = requires(X& x) {
    { x.stop() } -> std::same_as<void>;
};
template <class X>
struct pointee {
    using type = X;
};
template <class X, class D>
struct pointee<std::unique_ptr<X, D>> {
    using type = X;
};
template <class X>
struct pointee<std::shared_ptr<X>> {
    using type = X;
};

// Sets the lifecycle calls of a singleton registered as T whose object is an Impl.
template <class T, class Impl>
registration with_lifecycle(registration r) {
    using S = std::conditional_t < requires(T * t) {
        static_cast<Impl*>(t);
    }
    , Impl, T > ;
    if constexpr (startable<S>)
        r.start = [](void* p) { static_cast<S*>(static_cast<T*>(p))->start(); };
    if constexpr (stoppable<S>)
        r.stop = [](void* p) { static_cast<S*>(static_cast<T*>(p))->stop(); };
    return r;
}

// A registration that constructs Impl (exposed as T) from the dependencies in Impl::inject.
template <class T, class Impl, bool Singleton>
registration constructed(lifetime life) {
    static_assert(plain_type<T> && plain_type<Impl>,
                  "keel::di: register a plain object type (no const, volatile or reference)");
    static_assert(std::is_convertible_v<Impl*, T*>,
                  "keel::di: the implementation must derive publicly from the interface it is "
                  "bound to");
    static_assert(!std::is_abstract_v<Impl>,
                  "keel::di: an abstract type cannot be constructed; bind it to an "
                  "implementation (singleton<Interface, Impl>()) or register a factory");
    using list = typename declared<Impl>::list;
    static_assert(list::valid,
                  "keel::di: `using inject = ...` must name keel::di::inject<Deps&...>");
    if constexpr (list::valid && !std::is_abstract_v<Impl>) {
        using deps = typename list::type;
        static_assert(declared<Impl>::has_inject || std::is_default_constructible_v<Impl>,
                      "keel::di: the type has no `using inject = keel::di::inject<...>` and is "
                      "not default-constructible; declare its dependencies or register a factory");
        static_assert(references_only<deps>::value,
                      "keel::di: dependencies are taken by reference; write inject<A&>, not "
                      "inject<A>");
        static_assert(!references_only<deps>::value || constructible_from<Impl, deps>::value,
                      "keel::di: the constructor does not accept the dependencies listed in the "
                      "type's `inject`");
        static_assert(!(Singleton && scope_in<deps>::value),
                      "keel::di: a singleton cannot depend on keel::di::scope (it exists per "
                      "request); register the type per_request");
        registration r{&typeid(T), life, dependency_types(deps{}), constructor<T, Impl>(deps{})};
        if constexpr (Singleton) r = with_lifecycle<T, Impl>(std::move(r));
        return r;
    }
    return {};
}

// A registration that calls a factory whose parameters are the dependencies.
template <class T, class F, bool Singleton>
registration produced(F factory, lifetime life) {
    static_assert(plain_type<T>,
                  "keel::di: register a plain object type (no const, volatile or reference)");
    static_assert(!object_argument<F>,
                  "keel::di: this is an object, not a factory; register it with instance()");
    static_assert(object_argument<F> || callable<F>::deducible,
                  "keel::di: the factory's parameters cannot be deduced; use a function or a "
                  "lambda with one non-template call operator (no `auto` parameters)");
    if constexpr (callable<F>::deducible) {
        using deps = typename callable<F>::args;
        using result = std::remove_cv_t<typename callable<F>::result>;
        static_assert(references_only<deps>::value,
                      "keel::di: factory parameters are dependencies and are taken by reference; "
                      "write [](A& a) {...}, not [](A a) {...}");
        static_assert(valid_result<T, result>(),
                      "keel::di: a factory must return T, std::unique_ptr<T> or "
                      "std::shared_ptr<T> (T being the registered type or derived from it)");
        static_assert(!(Singleton && scope_in<deps>::value),
                      "keel::di: a singleton cannot depend on keel::di::scope (it exists per "
                      "request); register the type per_request");
        registration r{&typeid(T), life, dependency_types(deps{}),
                       invoker<T>(std::move(factory), deps{})};
        if constexpr (Singleton)
            r = with_lifecycle<T, typename pointee<result>::type>(std::move(r));
        return r;
    }
    return {};
}

template <class T>
registration held(std::shared_ptr<T> obj) {
    static_assert(plain_type<T>,
                  "keel::di: register a plain object type (no const, volatile or reference)");
    T* ptr = obj.get();
    return {&typeid(T), lifetime::instance, {}, {}, {std::move(obj), ptr}, {}, {}};
}

}  // namespace keel::di::detail
