#pragma once

namespace keel::di {

/// Constructor injection, declared by the type itself so it is checked at compile time:
///
/// @code
///   struct order_repository {
///       using inject = keel::di::inject<keel::redis::connection&, audit_log&>;
///       order_repository(keel::redis::connection&, audit_log&);
///   };
/// @endcode
///
/// Every dependency is a reference (`A&` or `const A&`); the container owns the objects.
/// `keel::di::container&` and `keel::di::scope&` may be listed to receive the container or
/// the request's scope. A type without `inject` must be default-constructible, or be
/// registered with a factory. This header is tiny on purpose: a type that declares its
/// dependencies needs only this, not the container.
template <class... Deps>
struct inject {};

}  // namespace keel::di
