#pragma once

// keel::expected<T, E>: a value or an error, for operations where failure is normal flow
// (a Redis error reply, a timeout, a config value out of range). It follows the subset of
// C++23 std::expected that Keel uses, so it can become an alias once the toolchain has it.

#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <variant>

namespace keel {

template <class E>
class unexpected {
  public:
    explicit unexpected(E error) : error_(std::move(error)) {}
    const E& error() const& noexcept { return error_; }
    E& error() & noexcept { return error_; }
    E&& error() && noexcept { return std::move(error_); }

  private:
    E error_;
};

template <class E>
unexpected(E) -> unexpected<E>;

// Thrown by value() on an expected that holds an error.
class bad_expected_access : public std::logic_error {
  public:
    bad_expected_access() : std::logic_error("keel::expected: value() called on an error") {}
};

template <class T, class E>
class [[nodiscard]] expected {
  public:
    using value_type = T;
    using error_type = E;

    expected() requires std::is_default_constructible_v<T> : storage_(std::in_place_index<0>) {}
    expected(T value) : storage_(std::in_place_index<0>, std::move(value)) {}
    template <class G>
    expected(unexpected<G> error) : storage_(std::in_place_index<1>, std::move(error).error()) {}

    bool has_value() const noexcept { return storage_.index() == 0; }
    explicit operator bool() const noexcept { return has_value(); }

    T& value() & { return check(), std::get<0>(storage_); }
    const T& value() const& { return check(), std::get<0>(storage_); }
    T&& value() && { return check(), std::get<0>(std::move(storage_)); }

    T& operator*() & noexcept { return *std::get_if<0>(&storage_); }
    const T& operator*() const& noexcept { return *std::get_if<0>(&storage_); }
    T&& operator*() && noexcept { return std::move(*std::get_if<0>(&storage_)); }
    T* operator->() noexcept { return std::get_if<0>(&storage_); }
    const T* operator->() const noexcept { return std::get_if<0>(&storage_); }

    E& error() & noexcept { return *std::get_if<1>(&storage_); }
    const E& error() const& noexcept { return *std::get_if<1>(&storage_); }
    E&& error() && noexcept { return std::move(*std::get_if<1>(&storage_)); }

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

// expected<void, E>: success or an error.
template <class E>
class [[nodiscard]] expected<void, E> {
  public:
    using value_type = void;
    using error_type = E;

    expected() = default;
    template <class G>
    expected(unexpected<G> error) : error_(std::in_place, std::move(error).error()) {}

    bool has_value() const noexcept { return !error_.has_value(); }
    explicit operator bool() const noexcept { return has_value(); }
    void value() const {
        if (!has_value()) throw bad_expected_access();
    }
    E& error() & noexcept { return *error_; }
    const E& error() const& noexcept { return *error_; }
    E&& error() && noexcept { return std::move(*error_); }

  private:
    std::optional<E> error_;
};

}  // namespace keel
