#pragma once

/// @file
/// RFC 7807 problem details: the one error format Keel's HTTP layer speaks
/// (`application/problem+json`). A handler reports an expected failure either by returning
/// `response::problem(...)` or by throwing `problem_error`, which the router turns into the
/// response; anything else thrown becomes a 500 that leaks nothing.

#include <keel/http/message.hpp>
#include <stdexcept>
#include <string>
#include <string_view>

namespace keel {
struct model_error;  // keel/framework/repository.hpp
}

namespace keel::http {

/// The body of an error response. `field` names the offending input (a path parameter, a
/// query parameter, or a JSON pointer such as "/items/0/sku") when there is one.
struct problem {
    /// The response's status.
    http::status status = http::status::bad_request;
    std::string detail;  ///< human-readable, safe to show to the client
    std::string field;   ///< optional
    std::string title;   ///< defaults to the reason phrase of `status`
    std::string type;    ///< defaults to "about:blank"
};

/// An exception carrying a problem. Thrown by request helpers (`req.json<T>()`,
/// `req.param<T>()`) and available to handlers for early exits.
class problem_error : public std::runtime_error {
  public:
    /// Carries `p`.
    explicit problem_error(http::problem p);
    /// Carries a problem of status `s` with `detail`, and `field` when it names one.
    problem_error(http::status s, std::string detail, std::string field = {});
    /// The problem.
    const http::problem& problem() const { return problem_; }

  private:
    http::problem problem_;
};

/// The answer to a repository failure: 409 when the entity is busy or its lock was lost
/// (retry), 503 when the storage does not answer (retry), 500 when a stored document does
/// not decode. The detail says which.
problem_error problem_of(const keel::model_error& e);

/// Throws 400 naming `field` unless `id` is 1 to 128 letters, digits, '-', '_' or '.': an id
/// that can be a path segment of a process id and part of a Redis key as it is.
void require_plain_id(std::string_view id, std::string_view field);

}  // namespace keel::http
