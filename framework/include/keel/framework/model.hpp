#pragma once

/// @file
/// Models: the entity types a service talks about (Order, Customer, ...). A model names itself
/// with `static constexpr std::string_view model_name = "order";` (or a model_traits
/// specialisation for a type it cannot change). Processes and signals take entities by
/// ref<T>, a typed id, so a parameter of the wrong model is a compile error.

#include <concepts>
#include <functional>
#include <keel/framework/json_fields.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace keel {

/// The model name of T. Specialise for types that cannot carry `model_name` themselves.
template <class T>
struct model_traits {
    /// The name, e.g. "order": part of its documents' keys, and how signals and processes name
    /// the model.
    static constexpr std::string_view name = T::model_name;
};

/// A type that has a model name (model_traits<T>::name).
template <class T>
concept model = requires {
    { model_traits<T>::name } -> std::convertible_to<std::string_view>;
};

/// Whether T's JSON gives back exactly the value it was made from: from_json(to_json(v))
/// equals v for every v (every member written, nothing normalised or defaulted on the way
/// in). A model says so with `static constexpr bool exact_json = true;` (or a specialisation
/// of this variable); a model described by json_fields (json_fields.hpp) is exact by
/// construction. repository<T> then remembers the value behind each document it writes
/// and hands it to the next read of that same document instead of decoding it: for an
/// entity changed step after step, one JSON parse saved per step. Debug builds check the
/// claim at each such write (a std::logic_error names the model); without it, only what a
/// repository decoded itself is remembered.
template <class T>
inline constexpr bool exact_json = json_described<T> || requires {
    requires T::exact_json;
};

/// Whether T writes its JSON text itself: a function found by argument-dependent lookup,
///
/// @code
///   void to_json_text(std::string& out, const order& o);   // appends o's JSON to out
/// @endcode
///
/// that appends exactly what dump_json(nlohmann::json(value)) writes: an object's members in
/// nlohmann's order (keys sorted by byte), strings and numbers as json_text.hpp's
/// append_json_string and append_json_number write them. repository<T> and locked<T> then
/// write documents with it instead of building nlohmann's tree first (three quarters of the
/// work of writing keel-orders' order). The first 16 values of each such model a process
/// writes are also written by nlohmann and compared, in every build; a difference throws
/// std::logic_error naming the model and both texts. A model described by json_fields
/// (json_fields.hpp) has it without writing it: keel::to_json_text.
template <class T>
concept writes_json_text = requires(std::string& out, const T& value) {
    to_json_text(out, value);
};

/// A typed id of an entity of model T. A value type; JSON is the bare id string, so a
/// journaled ref<Order> reads "order-123". Thread-safety: as std::string.
template <model T>
class ref {
  public:
    /// The model, T.
    using model_type = T;

    ref() = default;
    /// The entity with id `id`.
    explicit ref(std::string id) : id_(std::move(id)) {}

    /// The entity's id.
    const std::string& id() const noexcept { return id_; }
    /// The model's name.
    static constexpr std::string_view model_name() noexcept { return model_traits<T>::name; }

    friend bool operator==(const ref&, const ref&) = default;
    friend auto operator<=>(const ref&, const ref&) = default;

    friend void to_json(nlohmann::json& j, const ref& r) { j = r.id_; }
    friend void from_json(const nlohmann::json& j, ref& r) { r.id_ = j.get<std::string>(); }

  private:
    std::string id_;
};

}  // namespace keel

/// Hashes a ref<T> by its id, for unordered containers.
template <class T>
struct std::hash<keel::ref<T>> {
    /// The id's hash.
    std::size_t operator()(const keel::ref<T>& r) const noexcept {
        return std::hash<std::string>{}(r.id());
    }
};
