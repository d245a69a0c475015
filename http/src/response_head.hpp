#pragma once
// The bytes of a response's status line and header fields, as the server sends them: the
// handler's fields, less those the server owns (Content-Length, Transfer-Encoding,
// Connection, Proxy-Connection, Server, Date), then the server's. Written by hand rather
// than by Beast's serializer: one append per field into a buffer the connection reuses, and
// a check Beast 1.81 does not make, that no field a handler sets can split the response.

#include <cstddef>
#include <keel/http/response.hpp>
#include <string>
#include <string_view>

namespace keel::http::detail {

// What the server decides about a response beside what the handler gave.
struct response_framing {
    unsigned version = 11;  // the request's: 10 or 11
    bool keep_alive = true;
    bool is_head = false;     // the body's length is announced, the body not sent
    std::string_view server;  // the Server field; none when empty
    std::string_view date;    // the Date field
};

// Appends the head of `res` to `out`. A field whose name is not an HTTP token is left out;
// control characters in a value (CR, LF, NUL and the others but HTAB) become spaces.
// Returns how many fields were left out or mended.
std::size_t append_response_head(std::string& out, const response& res,
                                 const response_framing& framing);

// Whether `value` may be sent as a field value as it is (no control character but HTAB).
bool is_clean_field_value(std::string_view value);

// Whether the body of `res` is sent: not for 1xx, 204 and 304 (which have none), nor in
// answer to HEAD.
bool sends_body(const response& res, bool is_head);

}  // namespace keel::http::detail
