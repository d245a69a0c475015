#pragma once

/// @file
/// A type's JSON, described once: each member with its name in the document. From the
/// description Keel derives nlohmann's to_json and from_json, and the document's text written
/// without a JSON tree (model.hpp's writes_json_text); a described model is exact (model.hpp's
/// exact_json), since every member is written and read back as written. This replaces the
/// encoders a model would otherwise write by hand, and the claims they would have to keep.
///
/// @code
///   struct payment {
///       std::string transaction_id;
///       double amount = 0;
///       static constexpr auto json_fields = keel::fields(
///           keel::field("transactionId", &payment::transaction_id),
///           keel::field("amount", &payment::amount));
///   };
///   struct order {
///       static constexpr std::string_view model_name = "order";
///       std::string id;
///       std::vector<payment> refunds;   // added later: older documents lack it
///       static constexpr auto json_fields = keel::fields(
///           keel::field("id", &order::id),
///           keel::field("refunds", &order::refunds).may_be_absent());
///   };
/// @endcode
///
/// A member's JSON is nlohmann's for its type: strings, numbers, bool, vectors and other
/// described types are written directly, any other type through nlohmann (its own to_json).
/// Reading requires every field unless it may_be_absent(); then a document without it reads
/// as the member's value-initialised value. Names must differ and be printable ASCII without
/// a quote or a backslash (a compile error otherwise).

#include <array>
#include <cstddef>
#include <cstdint>
#include <keel/framework/json_text.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace keel {

/// One member of a described type: its name in the document and the member it reads and
/// writes (see the file's description).
template <class Class, class Member>
struct json_field {
    std::string_view name;  ///< the member's key in the document
    Member Class::*member;  ///< the member
    bool optional = false;  ///< whether a document may lack it (may_be_absent)

    /// The same field, read as the member's value-initialised value when a document lacks it.
    constexpr json_field may_be_absent() const {
        auto f = *this;
        f.optional = true;
        return f;
    }
};

/// The field `name` for `member`.
template <class Class, class Member>
constexpr json_field<Class, Member> field(std::string_view name, Member Class::*member) {
    return {name, member};
}

/// A type's fields: what its `static constexpr auto json_fields` holds.
template <class... Fields>
struct json_field_list {
    std::tuple<Fields...> all;  ///< the fields, as listed
    /// The fields' positions in the order a JSON object writes its keys (sorted by byte).
    std::array<std::size_t, sizeof...(Fields)> written_order;
};

/// The list of a type's fields; names must differ.
template <class... Fields>
constexpr json_field_list<Fields...> fields(Fields... f) {
    std::array<std::string_view, sizeof...(Fields)> names{f.name...};
    std::array<std::size_t, sizeof...(Fields)> order{};
    for (std::size_t i = 0; i < order.size(); ++i) {  // an insertion sort: a few names
        std::size_t j = i;
        for (; j > 0 && names[i] < names[order[j - 1]]; --j) order[j] = order[j - 1];
        order[j] = i;
    }
    for (std::size_t i = 1; i < order.size(); ++i)
        if (names[order[i - 1]] == names[order[i]])
            throw "keel::fields: two fields have the same name";  // a compile error
    for (auto name : names)
        for (char c : name)
            if (c < 0x20 || c > 0x7e || c == '"' || c == '\\')
                throw "keel::fields: a name is printable ASCII without quote or backslash";
    return {std::tuple<Fields...>(f...), order};
}

/// A type with a `static constexpr auto json_fields = keel::fields(...)`.
template <class T>
concept json_described = requires {
    std::tuple_size<decltype(T::json_fields.all)>::value;
};

namespace detail {

template <class T>
inline constexpr bool is_vector = false;
template <class T, class A>
inline constexpr bool is_vector<std::vector<T, A>> = true;

template <class V>
void append_json_value(std::string& out, const V& v);

// Each field's key as an object writes it (`"name":`, after a comma but for the first), in
// key order, laid out at compile time so that writing a key is one append.
template <json_described T>
struct json_keys {
    static constexpr std::size_t count = std::tuple_size_v<decltype(T::json_fields.all)>;
    static constexpr auto names =
        std::apply([](const auto&... f) { return std::array<std::string_view, count>{f.name...}; },
                   T::json_fields.all);
    static constexpr std::size_t key_size(std::size_t k) {
        return names[T::json_fields.written_order[k]].size() + (k == 0 ? 3 : 4);
    }
    static constexpr auto starts = [] {
        std::array<std::size_t, count + 1> at{};
        for (std::size_t k = 0; k < count; ++k) at[k + 1] = at[k] + key_size(k);
        return at;
    }();
    static constexpr auto text = [] {
        std::array<char, starts[count]> out{};
        std::size_t at = 0;
        for (std::size_t k = 0; k < count; ++k) {
            if (k > 0) out[at++] = ',';
            out[at++] = '"';
            for (char c : names[T::json_fields.written_order[k]]) out[at++] = c;
            out[at++] = '"';
            out[at++] = ':';
        }
        return out;
    }();
    static constexpr std::string_view key(std::size_t k) {
        return {text.data() + starts[k], starts[k + 1] - starts[k]};
    }
};

// The fields in key order, unrolled at compile time; a name is written as it is (fields()
// refuses one that JSON would escape).
template <json_described T>
void append_json_object(std::string& out, const T& value) {
    constexpr auto count = std::tuple_size_v<decltype(T::json_fields.all)>;
    out += '{';
    [&]<std::size_t... K>(std::index_sequence<K...>) {
        ((out += json_keys<T>::key(K),
          append_json_value(
              out, value.*(std::get<T::json_fields.written_order[K]>(T::json_fields.all).member))),
         ...);
    }
    (std::make_index_sequence<count>{});
    out += '}';
}

template <class V>
void append_json_value(std::string& out, const V& v) {
    if constexpr (std::is_same_v<V, std::string>) {
        append_json_string(out, v);
    } else if constexpr (std::is_same_v<V, bool>) {
        out += v ? "true" : "false";
    } else if constexpr (std::is_floating_point_v<V>) {
        append_json_number(out, static_cast<double>(v));
    } else if constexpr (std::is_integral_v<V> && std::is_signed_v<V>) {
        append_json_number(out, static_cast<std::int64_t>(v));
    } else if constexpr (std::is_integral_v<V> && !std::is_same_v<V, char>) {
        append_json_number(out, static_cast<std::uint64_t>(v));
    } else if constexpr (json_described<V>) {
        append_json_object(out, v);
    } else if constexpr (is_vector<V>) {
        out += '[';
        for (std::size_t i = 0; i < v.size(); ++i) {
            if (i > 0) out += ',';
            append_json_value(out, v[i]);
        }
        out += ']';
    } else {
        append_json(out, nlohmann::json(v));
    }
}

}  // namespace detail

/// The JSON text of a described value, appended to `out`: what
/// dump_json(nlohmann::json(value)) writes, without the tree (model.hpp's writes_json_text).
template <json_described T>
void to_json_text(std::string& out, const T& value) {
    detail::append_json_object(out, value);
}

}  // namespace keel

/// @cond
// nlohmann's conversions of a described type, from its fields (the API reference leaves out
// this specialisation of nlohmann's own template; the file's description says what it does).
template <keel::json_described T>
struct nlohmann::adl_serializer<T, void> {
    static void to_json(nlohmann::json& j, const T& value) {
        j = nlohmann::json::object();
        std::apply([&](const auto&... f) { ((j[std::string(f.name)] = value.*(f.member)), ...); },
                   T::json_fields.all);
    }
    static void from_json(const nlohmann::json& j, T& value) {
        std::apply(
            [&](const auto&... f) {
                auto read = [&](const auto& one) {
                    auto& member = value.*(one.member);
                    auto at = j.find(one.name);
                    if (at != j.end())
                        at->get_to(member);
                    else if (one.optional)
                        member = std::remove_reference_t<decltype(member)>{};
                    else
                        j.at(std::string(one.name));  // throws out_of_range naming the key
                };
                (read(f), ...);
            },
            T::json_fields.all);
    }
};
/// @endcond
