#pragma once

/// @file
/// The vocabulary shared by requests and responses: methods, status codes and header
/// fields. Keel's own types, so user code and public headers never see Beast.

#include <cstddef>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace keel::http {

/// The request methods Keel routes. Anything else parses as `other` (and is answered 405
/// or 501 by the router); the original spelling stays available on the request.
enum class method { get, head, post, put, patch, del, options, connect, trace, other };

inline constexpr std::size_t routable_method_count = 7;  ///< get .. options

/// The method's name: "GET", "DELETE", ...; "OTHER" for `other`.
std::string_view to_string(method m);
/// Exact, case-sensitive match (RFC 9110: method names are case-sensitive).
method parse_method(std::string_view name);

/// Status codes Keel itself produces or that handlers commonly need. Any other code can be
/// written as `static_cast<http::status>(n)` for 100 <= n <= 599.
enum class status : int {
    continue_ = 100,
    ok = 200,
    created = 201,
    accepted = 202,
    no_content = 204,
    moved_permanently = 301,
    found = 302,
    see_other = 303,
    not_modified = 304,
    temporary_redirect = 307,
    permanent_redirect = 308,
    bad_request = 400,
    unauthorized = 401,
    forbidden = 403,
    not_found = 404,
    method_not_allowed = 405,
    not_acceptable = 406,
    request_timeout = 408,
    conflict = 409,
    gone = 410,
    precondition_failed = 412,
    payload_too_large = 413,
    unsupported_media_type = 415,
    unprocessable_content = 422,
    too_many_requests = 429,
    request_header_fields_too_large = 431,
    internal_server_error = 500,
    not_implemented = 501,
    bad_gateway = 502,
    service_unavailable = 503,
    gateway_timeout = 504,
};

/// The status as a number.
inline constexpr int to_int(status s) {
    return static_cast<int>(s);
}
/// The standard reason phrase ("Not Found"), or "Unknown" for a code it does not know.
std::string_view reason(status s);

/// An ordered list of header fields with case-insensitive names. Small (a handful of
/// fields), so lookups are linear. Not thread-safe; a value type.
class headers {
  public:
    /// A name and its value.
    using field = std::pair<std::string, std::string>;

    headers() = default;
    /// The fields, in order.
    headers(std::initializer_list<field> fields) : fields_(fields) {}

    /// The first value of `name`, if present.
    std::optional<std::string_view> get(std::string_view name) const;
    /// Whether a field called `name` is present.
    bool contains(std::string_view name) const { return get(name).has_value(); }
    /// Replaces every field called `name` with one field.
    void set(std::string_view name, std::string_view value);
    /// Appends a field (repeated fields are kept, in order).
    void add(std::string name, std::string value);
    /// Removes every field called `name`.
    void remove(std::string_view name);

    /// Every field, in order.
    const std::vector<field>& fields() const { return fields_; }
    /// The number of fields.
    std::size_t size() const { return fields_.size(); }
    ///@{
    /// Iteration over the fields, in order.
    auto begin() const { return fields_.begin(); }
    auto end() const { return fields_.end(); }
    ///@}
    /// Reserves room for `n` fields.
    void reserve(std::size_t n) { fields_.reserve(n); }

  private:
    std::vector<field> fields_;
};

/// Whether `a` and `b` are equal ignoring ASCII case (header field names).
bool iequals(std::string_view a, std::string_view b);

}  // namespace keel::http
