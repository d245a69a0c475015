#pragma once

/// @file
/// An HTTP request as a handler sees it: method, target, header fields, the whole body in
/// memory (bounded by the route's body limit), the path parameters the router matched,
/// and the request's id and logger.
///
/// @code
///   asio::awaitable<http::response> create(http::request& req) {
///       auto order = req.json<new_order>();          // 415 / 400 problem+json on bad input
///       auto id = req.param<std::int64_t>("id");     // typed path parameter
///       auto page = req.query("page");               // optional<string_view>, decoded
///       auto key = req.idempotency_key();            // optional<string_view>
///       req.log().info("creating order");            // carries request_id, trace_id, span_id
///       ...
///   }
/// @endcode
///
/// A request belongs to one connection and is used on that connection's thread only.

#include <cstdint>
#include <keel/framework/expected.hpp>
#include <keel/framework/log.hpp>
#include <keel/framework/trace.hpp>
#include <keel/http/json.hpp>
#include <keel/http/message.hpp>
#include <keel/http/problem.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace keel::di {
class scope;
}

namespace keel::http {

struct route_info;

/// An HTTP request as a handler sees it; see the file's description.
class request {
  public:
    /// `target` is the request-target as sent ("/orders/7?verbose=1").
    request(http::method m, std::string target, http::headers h = {}, std::string body = {});

    /// The method; `other` for one Keel does not route.
    http::method method() const { return method_; }
    /// The method as sent; differs from to_string(method()) only for `other`.
    std::string_view method_name() const { return method_name_; }
    /// Set by the server for a method it reads as `other`.
    void set_method_name(std::string name) { method_name_ = std::move(name); }
    /// The request-target as sent: path and query, undecoded.
    std::string_view target() const { return target_; }
    /// The path, percent-decoded once, without the query and without a trailing slash
    /// ("/orders/o 1" for "/orders/o%201/"): exactly what the router matches, so it is what
    /// middleware must look at. Empty when the path cannot be routed (see path_error()).
    std::string_view path() const { return path_; }
    /// The decoded segments of path() ("/a/b" -> {"a", "b"}; "/" -> {}).
    const std::vector<std::string>& path_segments() const { return segments_; }
    /// Why the path cannot be routed, or empty: not absolute, a malformed %-escape, an
    /// encoded '/' (%2F), NUL or other control character, or a "." or ".." segment. The
    /// router answers 400 with it. (One path has one meaning: "/a%2Fb" would otherwise be one
    /// segment to the router and two to anything reading the decoded path.)
    const std::string& path_error() const { return path_error_; }
    /// The path part of the target as sent, undecoded.
    std::string_view raw_path() const { return std::string_view(target_).substr(0, path_size_); }

    /// Decoded value of the first query parameter `name`; empty optional if absent.
    std::optional<std::string_view> query(std::string_view name) const;
    /// Every query parameter, decoded, in order.
    const std::vector<std::pair<std::string, std::string>>& query_params() const;

    /// A header field's value; nullopt when absent.
    std::optional<std::string_view> header(std::string_view name) const {
        return headers_.get(name);
    }
    /// The header fields.
    const http::headers& headers() const { return headers_; }
    /// Middleware may add or rewrite request fields before the handler runs.
    http::headers& headers() { return headers_; }
    /// The Idempotency-Key header. Throws problem_error (400) when it is longer than
    /// max_idempotency_key_bytes or holds control characters: keys are remembered for a
    /// day, so one request must not make the service remember megabytes.
    std::optional<std::string_view> idempotency_key() const;
    /// The longest Idempotency-Key accepted.
    static constexpr std::size_t max_idempotency_key_bytes = 256;
    /// The media type of Content-Type, lower-cased, without parameters ("application/json").
    std::string content_type() const;

    /// The body, whole.
    std::string_view body() const { return body_; }
    /// Replaces the body (middleware, tests).
    void set_body(std::string b) { body_ = std::move(b); }

    /// A path parameter, decoded. Throws std::out_of_range when the matched route has no
    /// parameter called `name` (a programming error).
    std::string_view param(std::string_view name) const;
    /// A path parameter converted to std::int64_t, int or std::string. A route declared
    /// with `:name<int>` has already been validated; otherwise a value that does not
    /// convert throws problem_error (400) naming the parameter.
    template <class T>
    T param(std::string_view name) const;

    /// The body parsed as JSON and converted to T (through nlohmann's from_json).
    /// Throws problem_error: 415 unless Content-Type is application/json (or +json), 400
    /// naming the offending field on invalid JSON, a missing field or a wrong type.
    template <class T>
    T json() const;
    /// The same, with the problem as a value.
    template <class T>
    keel::expected<T, problem> try_json() const;
    /// The body as a JSON document (parsed once, cached).
    keel::expected<const nlohmann::json*, problem> json_document() const;

    /// The client's address as the server's connection saw it ("127.0.0.1", "::1"); empty for
    /// a request made in-process. Behind a proxy it is the proxy's.
    std::string_view client_address() const { return client_address_; }
    /// Set by the server.
    void set_client_address(std::string address) { client_address_ = std::move(address); }

    /// Set by the request-id middleware; empty without it.
    std::string_view request_id() const { return request_id_; }
    /// Sets the request id (the request-id middleware).
    void set_request_id(std::string id);
    /// A logger whose lines carry this request's id and its trace and span ids (built on
    /// first use).
    const log::logger& log() const;

    /// The span this request is served in: a child of the caller's span when the request
    /// carried a valid `traceparent` (set by the trace_context middleware), else the root of
    /// a new trace. Pass it to the requests a handler makes (client_request::trace) and to
    /// the processes it starts or signals, so that their spans join this trace.
    const trace::span_context& trace() const;
    /// Sets the span (the trace_context middleware).
    void set_trace(trace::span_context context);

    /// The route that matched, or null (404/405). Set by the router.
    const route_info* route() const { return route_; }
    /// The pattern of that route ("/orders/:id<int>"), or empty.
    std::string_view route_pattern() const;

    /// The per-request DI scope while a controller handler runs, else null.
    di::scope* scope() const { return scope_; }
    /// Set by the controller adapter while a handler runs.
    void set_scope(di::scope* s) { scope_ = s; }

    ///@{
    /// Router internals: filled in when the route is matched.
    void set_route(const route_info* r) { route_ = r; }
    void add_param(std::string_view name, std::string value) {
        params_.emplace_back(name, std::move(value));
    }
    void clear_params() { params_.clear(); }
    const std::vector<std::pair<std::string_view, std::string>>& params() const { return params_; }
    ///@}

  private:
    static problem json_problem(const nlohmann::json::exception& e);
    static problem field_problem(const json_field_error& e);
    [[noreturn]] void bad_param(std::string_view name, std::string_view expected) const;

    http::method method_;
    std::string method_name_;
    void decode_path();

    std::string target_;
    std::size_t path_size_ = 0;
    std::string path_;
    std::vector<std::string> segments_;
    std::string path_error_;
    http::headers headers_;
    std::string body_;
    std::vector<std::pair<std::string_view, std::string>> params_;
    mutable std::optional<std::vector<std::pair<std::string, std::string>>> query_;
    mutable std::optional<nlohmann::json> json_;
    std::string request_id_;
    mutable std::optional<trace::span_context> trace_;
    std::string client_address_;
    mutable std::optional<log::logger> log_;
    const route_info* route_ = nullptr;
    di::scope* scope_ = nullptr;
};

template <class T>
keel::expected<T, problem> request::try_json() const {
    auto doc = json_document();
    if (!doc) return keel::unexpected(doc.error());
    try {
        return (*doc)->template get<T>();
    } catch (const json_field_error& e) {
        return keel::unexpected(field_problem(e));
    } catch (const nlohmann::json::exception& e) {
        return keel::unexpected(json_problem(e));
    }
}

template <class T>
T request::json() const {
    auto value = try_json<T>();
    if (!value) throw problem_error(std::move(value).error());
    return std::move(*value);
}

/// request::param<T>() as a string: the decoded value.
template <>
std::string request::param<std::string>(std::string_view name) const;
/// request::param<T>() as a signed 64-bit integer.
template <>
std::int64_t request::param<std::int64_t>(std::string_view name) const;
/// request::param<T>() as an int; a value out of its range is a 400 too.
template <>
int request::param<int>(std::string_view name) const;

}  // namespace keel::http
