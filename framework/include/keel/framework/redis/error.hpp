#pragma once

/// @file
/// Errors of the Redis client. An error reply from Redis is an ordinary outcome (a failed
/// script validation, a wrong type) and arrives as a value: server_error with Redis's own
/// message. Transport problems are distinguished so callers can decide what is retryable:
/// a request that was never written (not_connected, timeout before write) did not run;
/// one that was written and lost its connection (connection_lost) may or may not have run.
/// A cluster connection refuses, before sending, what a cluster cannot run: cross_slot,
/// unsupported.

#include <string>
#include <string_view>

namespace keel::redis {

/// What went wrong with a request.
enum class errc {
    server_error = 1,  ///< Redis answered with an error reply; message is Redis's text
    timeout,           ///< no reply within the request's timeout
    cancelled,         ///< the caller cancelled the request
    connection_lost,   ///< written, but the connection dropped before the reply arrived
    not_connected,     ///< could not be sent: the server is unreachable (message says why)
    protocol_error,    ///< the server sent something that is not RESP
    bad_url,           ///< the connection URL is malformed
    closed,            ///< the connection was closed by its owner
    unexpected_reply,  ///< a typed accessor found another reply type
    cross_slot,        ///< cluster: the command's keys are in different hash slots; not sent
    unsupported,       ///< cluster: the command needs a connection of its own (MULTI, WATCH...)
    not_replicated,    ///< replicate(): too few replicas acknowledged the writes in time
};

/// The code's name: "server error", "timeout", ...
std::string_view to_string(errc code);

/// Why a request failed: the kind, and a message saying why.
struct error {
    /// What went wrong.
    errc code;
    /// Redis's text for server_error; otherwise says why.
    std::string message;

    /// "redis <code>: <message>"
    std::string what() const;
    /// For server errors: the error prefix Redis uses, e.g. "NOSCRIPT", "WRONGTYPE".
    std::string_view server_code() const;
};

}  // namespace keel::redis
