#pragma once

/// @file
/// keel::expected<T, E>: a value or an error, for operations where failure is normal flow
/// (a Redis error reply, a timeout, a config value out of range). It follows the subset of
/// C++23 std::expected that Keel uses, so it can become an alias once the toolchain has it.

#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <variant>

namespace keel {

/// The error of a failed expected: `return keel::unexpected(error);`.
template <class E>
class unexpected {
  public:
    /// Holds `error`.
    explicit unexpected(E error) : error_(std::move(error)) {}
    ///@{
    /// The error.
    const E& error() const& noexcept { return error_; }
    E& error() & noexcept { return error_; }
    E&& error() && noexcept { return std::move(error_); }
    ///@}

  private:
    E error_;
};

/// `keel::unexpected(error)` deduces E.
template <class E>
unexpected(E) -> unexpected<E>;

/// Thrown by value() on an expected that holds an error.
class bad_expected_access : public std::logic_error {
  public:
    bad_expected_access() : std::logic_error("keel::expected: value() called on an error") {}
};

/// A value of type T or an error of type E.
template <class T, class E>
class [[nodiscard]] expected {
  public:
    /// The value's type.
    using value_type = T;
    /// The error's type.
    using error_type = E;

    /// A default-constructed value.
    expected() requires std::is_default_constructible_v<T> : storage_(std::in_place_index<0>) {}
    /// Holds a value.
    expected(T value) : storage_(std::in_place_index<0>, std::move(value)) {}
    /// Holds an error.
    template <class G>
    expected(unexpected<G> error) : storage_(std::in_place_index<1>, std::move(error).error()) {}

    /// Whether it holds a value.
    bool has_value() const noexcept { return storage_.index() == 0; }
    /// Whether it holds a value.
    explicit operator bool() const noexcept { return has_value(); }

    ///@{
    /// The value; bad_expected_access when it holds an error.
    T& value() & { return check(), std::get<0>(storage_); }
    const T& value() const& { return check(), std::get<0>(storage_); }
    T&& value() && { return check(), std::get<0>(std::move(storage_)); }
    ///@}

    ///@{
    /// The value, unchecked: only when has_value().
    T& operator*() & noexcept { return *std::get_if<0>(&storage_); }
    const T& operator*() const& noexcept { return *std::get_if<0>(&storage_); }
    T&& operator*() && noexcept { return std::move(*std::get_if<0>(&storage_)); }
    T* operator->() noexcept { return std::get_if<0>(&storage_); }
    const T* operator->() const noexcept { return std::get_if<0>(&storage_); }
    ///@}

    ///@{
    /// The error, unchecked: only when !has_value().
    E& error() & noexcept { return *std::get_if<1>(&storage_); }
    const E& error() const& noexcept { return *std::get_if<1>(&storage_); }
    E&& error() && noexcept { return std::move(*std::get_if<1>(&storage_)); }
    ///@}

    /// The value, or `fallback` when it holds an error.
    template <class U>
    T value_or(U&& fallback) const& {
        return has_value() ? **this : static_cast<T>(std::forward<U>(fallback));
    }

  private:
    void check() const {
        if (!has_value()) throw bad_expected_access();
    }

    std::variant<T, E> storage_;
};

/// expected<void, E>: success or an error.
template <class E>
class [[nodiscard]] expected<void, E> {
  public:
    /// No value: void.
    using value_type = void;
    /// The error's type.
    using error_type = E;

    /// Success.
    expected() = default;
    /// Holds an error.
    template <class G>
    expected(unexpected<G> error) : error_(std::in_place, std::move(error).error()) {}

    /// Whether it succeeded.
    bool has_value() const noexcept { return !error_.has_value(); }
    /// Whether it succeeded.
    explicit operator bool() const noexcept { return has_value(); }
    /// Throws bad_expected_access when it holds an error.
    void value() const {
        if (!has_value()) throw bad_expected_access();
    }
    ///@{
    /// The error, unchecked: only when !has_value().
    E& error() & noexcept { return *error_; }
    const E& error() const& noexcept { return *error_; }
    E&& error() && noexcept { return std::move(*error_); }
    ///@}

  private:
    std::optional<E> error_;
};

}  // namespace keel
