#pragma once

/// @file
/// Requests answered by a running process: a caller asks an instance and waits for its answer;
/// the handler receives the request like a signal and replies, or refuses it.
///
/// @code
///   // the caller (a controller, or anything with the engine)
///   keel::process::ask_options patient{.timeout = 5s};   // named: no braced temporaries
///   nlohmann::json body{{"reason", "moving"}};           // in a co_await (g++ 12)
///   auto answer = co_await eng.ask(id, "/subscription/cancel", body, patient);
///   if (!answer) {
///       auto status = static_cast<keel::http::status>(http_status(answer.error()));
///       co_return response::problem(status, answer.error().message);
///   }
///
///   // the handler
///   auto req = co_await ctx.receive("/subscription/cancel");
///   if (!cancellable) co_await ctx.refuse(req, "the first year cannot be cancelled");
///   else co_await ctx.reply(req, refund);
/// @endcode
///
/// A request is a signal whose payload carries the request's id; the answer is stored for the
/// request's id (engine_options::answer_retention), so the caller reads it exactly once per
/// ask, also when the worker that answered died before the caller read it, and an ask repeated
/// with the same id (ask_options::id: a client's retry) gets the same answer without
/// delivering the request again. See docs/guide/child-processes.md ("Requests").

#include <chrono>
#include <cstdint>
#include <keel/framework/clock.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace keel::process {

/// A request as the handler receives it (context::receive).
struct request {
    std::string id;       ///< unique per ask (or the caller's ask_options::id)
    std::string path;     ///< the signal path it was sent to
    nlohmann::json body;  ///< what the caller sent (null when it sent nothing)

    /// The body converted to T with nlohmann's from_json (its exceptions when it does not fit).
    template <class T>
    T as() const {
        return body.get<T>();
    }
};

/// How engine::ask waits for an answer.
struct ask_options {
    /// How long the ask waits for the answer; then it fails with reason::timeout, and the
    /// request stays in the inbox (ask again with the same id to read a later answer).
    duration timeout = std::chrono::seconds(10);
    /// The request's id; empty: a new one. An ask with the id of an answered request returns
    /// that answer without asking again (a client's retry, e.g. its Idempotency-Key).
    std::string id;
};

/// Why an ask has no answer.
struct ask_error {
    /// The kinds of failure (http_status maps them to 404, 409, 504, 422).
    enum class reason : std::uint8_t {
        not_found,  ///< no such instance
        final,      ///< the instance is final, or ended without answering
        timeout,    ///< not answered in time (the request stays in the inbox)
        refused,    ///< the handler refused it (context::refuse): `message` says why
    };
    reason why = reason::not_found;  ///< what kind of failure
    std::string instance;            ///< the instance asked
    std::string request;             ///< the request's id (ask_options::id, or the one made)
    std::string message;             ///< says which instance and why, for people
};

/// The HTTP status an ask_error answers with: 404, 409, 504 and 422.
int http_status(const ask_error& e) noexcept;

// The signal payload of a request, and the stored answer's forms (internal, shared by the
// engine and the context).
namespace detail {
nlohmann::json request_payload(std::string_view id, nlohmann::json body);
request request_from(std::string path, const nlohmann::json& payload);
nlohmann::json answer_value(nlohmann::json value);
nlohmann::json answer_refusal(std::string why);
}  // namespace detail

}  // namespace keel::process
