#pragma once

/// @file
/// An HTTP response as a handler builds it: status, header fields and a body held in
/// memory. The server adds Content-Length, Date, Server and Connection when it writes it.
///
/// @code
///   co_return http::response::json({{"id", id}}, http::status::created)
///       .header("Location", "/orders/" + std::to_string(id));
/// @endcode
///
/// A value type; not thread-safe.

#include <keel/http/message.hpp>
#include <keel/http/problem.hpp>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

namespace keel::http {

/// An HTTP response as a handler builds it; see the file's description.
class response {
  public:
    /// An empty response with status `s`.
    explicit response(http::status s = http::status::ok) : status_(s) {}

    /// `body` serialised as JSON, Content-Type application/json. Invalid UTF-8 in strings
    /// is replaced rather than failing the request.
    static response json(const nlohmann::json& body, http::status s = http::status::ok);
    /// `body` as it is, with `content_type`.
    static response text(std::string body, http::status s = http::status::ok,
                         std::string_view content_type = "text/plain; charset=utf-8");
    /// 204 No Content.
    static response no_content() { return response(http::status::no_content); }
    /// An application/problem+json response; `request_id`, when given, is included so a
    /// client can quote it in a support request.
    static response problem(const http::problem& p, std::string_view request_id = {});
    /// An application/problem+json response of status `s` with `detail`, and `field` when it names
    /// one.
    static response problem(http::status s, std::string detail, std::string field = {});

    /// The status.
    http::status status() const { return status_; }
    /// Sets the status.
    response& status(http::status s) {
        status_ = s;
        return *this;
    }
    /// Sets (replaces) a header field.
    response& header(std::string_view name, std::string_view value) {
        headers_.set(name, value);
        return *this;
    }
    /// A header field's value; nullopt when absent.
    std::optional<std::string_view> header(std::string_view name) const {
        return headers_.get(name);
    }
    ///@{
    /// The header fields.
    const http::headers& headers() const { return headers_; }
    http::headers& headers() { return headers_; }
    ///@}

    ///@{
    /// The body.
    const std::string& body() const { return body_; }
    std::string& body() { return body_; }
    ///@}
    /// Sets the body.
    response& body(std::string b) {
        body_ = std::move(b);
        return *this;
    }

  private:
    http::status status_;
    http::headers headers_;
    std::string body_;
};

}  // namespace keel::http
