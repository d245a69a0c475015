#pragma once

/// @file
/// keel::process::handler_dependencies<&handler>: a process handler's dependencies (its
/// parameters taken by non-const reference) as one type whose keel::di inject list names
/// them. Registering it as a singleton makes the graph check them when it is built, with
/// the error any missing dependency gives:
///
/// @code
///   registry.singleton<keel::process::handler_dependencies<&fulfil>>();
///   registry.build();  // throws keel::di::error naming payment_gateway if it is missing
/// @endcode
///
/// keel::app::application and keel::process::testing::environment do this for every
/// definition they are given, so a service fails at start-up, not at an instance's first run.

#include <keel/di/inject.hpp>
#include <keel/process/definition.hpp>
#include <tuple>
#include <type_traits>

namespace keel::process {

namespace detail {

template <class... D>
struct requirement_list {
    using inject = di::inject<D&...>;
    explicit requirement_list(D&...) {}
};
template <class Args, class... Found>
struct requirements_of;
template <class... Found>
struct requirements_of<std::tuple<>, Found...> {
    using type = requirement_list<Found...>;
};
template <class A, class... Rest, class... Found>
struct requirements_of<std::tuple<A, Rest...>, Found...> {
    using type = std::conditional_t<
        is_dependency<A>,
        typename requirements_of<std::tuple<Rest...>, Found..., std::remove_reference_t<A>>::type,
        typename requirements_of<std::tuple<Rest...>, Found...>::type>;
};
template <auto Handler>
using requirements_t =
    typename requirements_of<typename handler_traits<decltype(Handler)>::args>::type;

}  // namespace detail

/// The dependencies of handler `Handler` as one injectable type: its `inject` list names each
/// parameter the handler takes by non-const reference (see the file's description).
template <auto Handler>
struct handler_dependencies : detail::requirements_t<Handler> {
    /// The implementation type that carries the inject list and its constructor.
    using base = detail::requirements_t<Handler>;
    using base::base;
};

}  // namespace keel::process
