#pragma once

/// @file
/// Reading request bodies into typed values with errors that name the field.
///
/// nlohmann_json's own conversions report a missing key by name but a wrong type without
/// saying where. A `from_json` written with `read_field` reports both as a JSON pointer:
///
/// @code
///   struct line { std::string sku; int quantity; };
///   void from_json(const nlohmann::json& j, line& l) {
///       keel::http::read_field(j, "sku", l.sku);
///       keel::http::read_field(j, "quantity", l.quantity);
///   }
///   struct order { std::vector<line> lines; std::optional<std::string> note; };
///   void from_json(const nlohmann::json& j, order& o) {
///       keel::http::read_field(j, "lines", o.lines);   // an error inside names "/lines/2/sku"
///       keel::http::read_field(j, "note", o.note);     // optional: absent or null is fine
///   }
/// @endcode
///
/// `req.json<order>()` then answers 400 problem+json with "field": "/lines/2/sku".

#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace keel::http {

/// Parsing limits for untrusted JSON. Nesting costs the parser memory and time per level
/// and is never deep in real requests, so it is bounded while parsing, before the document
/// exists.
struct json_limits {
    std::size_t max_depth = 64;  ///< objects and arrays nested in one another
};

/// Parses untrusted JSON text (a request body). Errors are 400 problems: a syntax error with
/// its position, nesting deeper than `limits.max_depth`, or a number out of a double's range
/// ("1e400"), the last two naming the field as a JSON pointer. request::json() uses it.
nlohmann::json parse_json(std::string_view text, json_limits limits = {});

/// A value that does not match the expected shape; `pointer` is a JSON pointer to it.
class json_field_error : public std::runtime_error {
  public:
    /// `message` about the value at `pointer` ("" for the value itself).
    json_field_error(std::string pointer, std::string message);
    /// The JSON pointer to the value ("/lines/2/sku").
    const std::string& pointer() const { return pointer_; }
    /// What is wrong with it ("is required", "expected an integer, got string").
    const std::string& reason() const { return reason_; }
    /// The same error seen from one level up: "/sku" inside "lines"[2] -> "/lines/2/sku".
    json_field_error nested_in(std::string_view segment) const;

  private:
    std::string pointer_;
    std::string reason_;
};

namespace detail {
std::string json_type_name(const nlohmann::json& j);
std::string describe(const nlohmann::json::exception& e);

template <class T>
inline constexpr bool is_vector = false;
template <class T, class A>
inline constexpr bool is_vector<std::vector<T, A>> = true;

// Integers are converted only from JSON integers within the type's range: nlohmann casts
// a float to an integer without a check (undefined behaviour for 1e19; 2.7 silently 2).
template <class T>
void to_integer(const nlohmann::json& value, T& out) {
    if (!value.is_number_integer())
        throw json_field_error("", "expected an integer, got " + json_type_name(value));
    bool fits = value.is_number_unsigned() ? std::in_range<T>(value.template get<std::uint64_t>())
                                           : std::in_range<T>(value.template get<std::int64_t>());
    if (!fits) throw json_field_error("", "the integer " + value.dump() + " is out of range");
    out = value.template get<T>();
}

template <class T>
void convert_value(const nlohmann::json& value, T& out) {
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        to_integer(value, out);
    } else if constexpr (is_vector<T>) {
        if (!value.is_array()) throw json_field_error("", "expected an array");
        out.clear();
        out.reserve(value.size());
        for (std::size_t i = 0; i < value.size(); ++i) {
            try {
                typename T::value_type element{};
                convert_value(value[i], element);
                out.push_back(std::move(element));
            } catch (const json_field_error& e) {
                throw e.nested_in(std::to_string(i));
            } catch (const nlohmann::json::exception& e) {
                throw json_field_error("/" + std::to_string(i), describe(e));
            }
        }
    } else {
        value.get_to(out);
    }
}

template <class T>
void convert(const nlohmann::json& value, std::string_view segment, T& out) {
    try {
        convert_value(value, out);
    } catch (const json_field_error& e) {
        throw e.nested_in(segment);
    } catch (const nlohmann::json::exception& e) {
        throw json_field_error("", describe(e)).nested_in(segment);
    }
}
}  // namespace detail

/// Reads the required member `name` of object `j` into `out`; throws json_field_error
/// naming it when it is missing or has the wrong type.
template <class T>
void read_field(const nlohmann::json& j, std::string_view name, T& out) {
    if (!j.is_object())
        throw json_field_error("", "expected an object, got " + detail::json_type_name(j));
    auto it = j.find(name);
    if (it == j.end()) throw json_field_error("", "is required").nested_in(name);
    detail::convert(*it, name, out);
}

/// Optional member: absent or null leaves `out` empty.
template <class T>
void read_field(const nlohmann::json& j, std::string_view name, std::optional<T>& out) {
    if (!j.is_object())
        throw json_field_error("", "expected an object, got " + detail::json_type_name(j));
    auto it = j.find(name);
    if (it == j.end() || it->is_null()) {
        out.reset();
        return;
    }
    T value{};
    detail::convert(*it, name, value);
    out = std::move(value);
}

}  // namespace keel::http
