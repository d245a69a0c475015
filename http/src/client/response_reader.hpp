#pragma once

// Reading one HTTP/1.1 response from bytes (internal; the client's connection loop and
// tests/fuzz/fuzz_http_response.cpp drive it). Beast's response_parser does the parsing;
// this adds the client's limits and its verdicts, so that a hostile server gets a
// client_error and nothing else:
//   header over max_header_bytes, or header + body over max_response_bytes  -> too_large
//     (bytes as sent: chunk framing and interim responses count)
//     (a Content-Length over the limit is refused before a byte of the body arrives)
//   malformed status line, field, chunk or length; a status outside 100..599 -> protocol
//   the connection closed before the end of the response                    -> protocol
//   bytes after the end of the response (a body longer than Content-Length) -> protocol
//   101 Switching Protocols (never asked for)                               -> protocol
// Interim 1xx responses (100 Continue, 103 Early Hints) are skipped; their bytes count
// toward the limit.

#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstddef>
#include <keel/http/client.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace keel::http::detail {

struct response_limits {
    std::size_t max_header_bytes = 64 * 1024;
    std::size_t max_response_bytes = 8 * 1024 * 1024;
};

class response_reader {
  public:
    enum class state { reading, done, failed };

    // `head_request`: the response to a HEAD, whose body is never sent.
    response_reader(response_limits limits, bool head_request);

    // Takes the bytes that arrived (all of them). Returns the state after them.
    state feed(std::string_view bytes);
    // The server closed the connection: the end of a response delimited by the close, or a
    // protocol error.
    state feed_eof();

    state current() const { return state_; }
    // Bytes taken so far.
    std::size_t received() const { return received_; }
    // When failed.
    const client_error& error() const { return *error_; }
    // When done: whether the connection may carry another request.
    bool keep_alive() const { return keep_alive_; }
    // When done: the response (moved out).
    client_response take(std::string url);

  private:
    using parser_type = boost::beast::http::response_parser<boost::beast::http::string_body>;

    void start_parser();
    state parse();
    state fail(client_error_kind kind, std::string message);
    state fail_too_large();
    state fail_parse(const boost::system::error_code& ec);
    client_error refusal_of(const boost::system::error_code& ec) const;
    bool holds_short_chunk_bytes(std::size_t shown) const;
    state judge_short_chunk_error();

    response_limits limits_;
    bool head_;
    state state_ = state::reading;
    std::optional<parser_type> parser_;
    std::string pending_;         // bytes received and not yet taken by the parser
    std::size_t received_ = 0;    // bytes fed
    std::size_t used_ = 0;        // bytes the parsers took, interim responses included
    std::size_t header_end_ = 0;  // used_ when the final response's header was complete
    bool header_checked_ = false;
    std::size_t header_limit_ = 0;  // of the parser at work
    std::size_t scanned_ = 0;       // bytes of pending_ searched for the end of the header
    bool keep_alive_ = false;
    std::optional<client_error> error_;
    // A chunked body the parser refused within its last few bytes shown (fewer than
    // holds_short_chunk_bytes keeps back): the refusal, held until the verdict cannot depend
    // on how the bytes arrived (judge_short_chunk_error).
    std::optional<client_error> short_chunk_error_;
};

}  // namespace keel::http::detail
