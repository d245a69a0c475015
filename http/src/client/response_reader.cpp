#include "response_reader.hpp"

#include <algorithm>
#include <boost/asio/buffer.hpp>
#include <cstdint>
#include <limits>

namespace keel::http::detail {

namespace bhttp = boost::beast::http;

response_reader::response_reader(response_limits limits, bool head_request)
    : limits_(limits), head_(head_request) {
    limits_.max_header_bytes = std::max<std::size_t>(limits_.max_header_bytes, 1);
    limits_.max_response_bytes = std::max<std::size_t>(limits_.max_response_bytes, 1);
    start_parser();
}

void response_reader::start_parser() {
    parser_.emplace();
    // What is left of the response limit bounds the header of a response that follows an
    // interim one.
    std::size_t header_limit =
        std::min(limits_.max_header_bytes, limits_.max_response_bytes - used_);
    header_limit = std::min<std::size_t>(header_limit, std::numeric_limits<std::uint32_t>::max());
    header_limit_ = std::max<std::size_t>(header_limit, 1);
    scanned_ = 0;
    parser_->header_limit(static_cast<std::uint32_t>(header_limit_));
    parser_->body_limit(boost::none);  // the reader enforces the response limit itself
    parser_->eager(false);             // stop after the header, to check it before the body
    if (head_) parser_->skip(true);
    header_checked_ = false;
}

response_reader::state response_reader::fail(client_error_kind kind, std::string message) {
    error_ = client_error{kind, std::move(message)};
    pending_.clear();
    return state_ = state::failed;
}

response_reader::state response_reader::fail_too_large() {
    return fail(client_error_kind::too_large,
                "the response exceeds " + std::to_string(limits_.max_response_bytes) + " bytes");
}

client_error response_reader::refusal_of(const boost::system::error_code& ec) const {
    if (ec == bhttp::error::header_limit)
        return {client_error_kind::too_large,
                "the response header exceeds " + std::to_string(header_limit_) + " bytes"};
    if (ec == bhttp::error::body_limit || ec == bhttp::error::buffer_overflow)
        return {client_error_kind::too_large,
                "the response exceeds " + std::to_string(limits_.max_response_bytes) + " bytes"};
    return {client_error_kind::protocol,
            "malformed response (" + ec.message() + ") after " + std::to_string(used_) + " bytes"};
}

response_reader::state response_reader::fail_parse(const boost::system::error_code& ec) {
    auto refusal = refusal_of(ec);
    return fail(refusal.kind, std::move(refusal.message));
}

// Beast's chunk parser, shown a final chunk (`0\r\n`) whose trailer has not ended, asserts
// that the next call brings at least 5 bytes, which holds only if the chunk followed a chunk
// body's CRLF. Nothing shorter than `0\r\n\r\n` can end a chunked body, so keeping fewer
// than 5 bytes back until more arrive changes no verdict, and keeps Beast's precondition.
bool response_reader::holds_short_chunk_bytes(std::size_t shown) const {
    constexpr std::size_t shortest_end_of_chunked_body = 5;
    return header_checked_ && parser_->chunked() && shown < shortest_end_of_chunked_body;
}

// Had these bytes come apart from those before them, the reader would have kept them back
// (holds_short_chunk_bytes) until at least 5 could be shown within the response limit (the
// parser's refusal), or until the limit ruled them out (too large), or the close came (a
// response cut short). The refusal waits for the same: the verdict is then the one the
// bytes would have had however they arrived.
response_reader::state response_reader::judge_short_chunk_error() {
    constexpr std::size_t shortest_end_of_chunked_body = 5;
    const auto allowed = limits_.max_response_bytes - std::min(used_, limits_.max_response_bytes);
    if (pending_.size() > allowed && allowed < shortest_end_of_chunked_body)
        return fail_too_large();
    if (std::min(pending_.size(), allowed) >= shortest_end_of_chunked_body) {
        auto refusal = std::move(*short_chunk_error_);
        return fail(refusal.kind, std::move(refusal.message));
    }
    return state_;
}

response_reader::state response_reader::feed(std::string_view bytes) {
    if (state_ == state::failed) return state_;
    if (state_ == state::done) {
        if (bytes.empty()) return state_;
        return fail(client_error_kind::protocol,
                    "the server sent bytes after the end of the response");
    }
    received_ += bytes.size();
    pending_.append(bytes);
    if (short_chunk_error_) return judge_short_chunk_error();
    return parse();
}

response_reader::state response_reader::parse() {
    while (true) {
        if (!parser_->is_done()) {
            if (pending_.empty()) return state_;
            // The header goes to the parser whole and alone, so that its verdict on a header
            // that is both malformed and too long does not depend on how the bytes arrived,
            // nor on whether the bytes after it have arrived yet.
            std::size_t header_bytes = std::string::npos;
            if (!parser_->is_header_done()) {
                auto end = pending_.find("\r\n\r\n", scanned_ > 3 ? scanned_ - 3 : 0);
                if (end == std::string::npos ? pending_.size() > header_limit_
                                             : end + 4 > header_limit_)
                    return fail(
                        client_error_kind::too_large,
                        "the response header exceeds " + std::to_string(header_limit_) + " bytes");
                if (end == std::string::npos) {
                    scanned_ = pending_.size();
                    return state_;
                }
                header_bytes = end + 4;
            }
            // The parser is never shown a byte past the response limit, so that a response
            // that outgrows it fails as too large however its bytes arrived. (Beast's own
            // body limit is charged again each time a chunk header is retried after
            // need_more, which made the verdict depend on where the pieces split.)
            const auto allowed =
                limits_.max_response_bytes - std::min(used_, limits_.max_response_bytes);
            const auto shown = std::min({pending_.size(), allowed, header_bytes});
            const bool past_limit = pending_.size() > allowed;
            if (holds_short_chunk_bytes(shown)) {
                if (past_limit) return fail_too_large();
                return state_;
            }
            boost::system::error_code ec;
            auto used = parser_->put(boost::asio::buffer(pending_.data(), shown), ec);
            pending_.erase(0, used);
            used_ += used;
            if (ec == bhttp::error::need_more) {
                // The parser saw the whole header (its end is in pending_) and still wants
                // more: the header is malformed (e.g. an empty status line). Its own search
                // state would otherwise run on past the end it missed.
                if (!parser_->is_header_done())
                    return fail(client_error_kind::protocol,
                                "malformed response header (it ends before its status line "
                                "and fields are complete)");
                if (past_limit) return fail_too_large();
                return state_;
            }
            if (ec && holds_short_chunk_bytes(shown - used)) {
                short_chunk_error_ = refusal_of(ec);
                return judge_short_chunk_error();
            }
            if (ec) return fail_parse(ec);
            if (used == 0 && !parser_->is_done() &&
                !(parser_->is_header_done() && !header_checked_)) {
                if (past_limit) return fail_too_large();
                return state_;  // no progress: wait for more bytes
            }
        }
        if (parser_->is_header_done() && !header_checked_) {
            header_checked_ = true;
            header_end_ = used_;
            auto code = parser_->get().result_int();
            if (code < 100 || code > 599)
                return fail(client_error_kind::protocol, "the status code " + std::to_string(code) +
                                                             " is not valid (100 to 599)");
            if (code == 101)
                return fail(client_error_kind::protocol,
                            "the server switched protocols (101), which the client never asks for");
            if (code >= 100 && code < 200) {  // interim: the final response follows
                if (used_ >= limits_.max_response_bytes) return fail_too_large();
                start_parser();
                continue;
            }
            auto left = limits_.max_response_bytes - std::min(used_, limits_.max_response_bytes);
            if (auto length = parser_->content_length(); length && *length > left)
                return fail(client_error_kind::too_large,
                            "the response announces a body of " + std::to_string(*length) +
                                " bytes; with its header that exceeds " +
                                std::to_string(limits_.max_response_bytes) + " bytes");
            parser_->eager(true);
        }
        if (parser_->is_done()) {
            if (!pending_.empty())
                return fail(client_error_kind::protocol,
                            "the server sent " + std::to_string(pending_.size()) +
                                " bytes after the end of the response");
            keep_alive_ = parser_->keep_alive();
            return state_ = state::done;
        }
    }
}

response_reader::state response_reader::feed_eof() {
    if (state_ != state::reading) return state_;
    if (short_chunk_error_) {
        auto refusal = std::move(*short_chunk_error_);
        return fail(refusal.kind, std::move(refusal.message));
    }
    if (received_ == 0)
        return fail(client_error_kind::protocol,
                    "the server closed the connection without answering");
    boost::system::error_code ec;
    if (pending_.empty() && parser_->is_header_done() && header_checked_)
        parser_->put_eof(ec);
    else
        ec = bhttp::error::partial_message;
    if (!ec && parser_->is_done()) {
        keep_alive_ = false;
        return state_ = state::done;
    }
    std::string where = "after " + std::to_string(received_) + " bytes";
    if (parser_->is_header_done() && header_checked_) {
        auto body = used_ - header_end_;
        where = "after " + std::to_string(body) + " bytes of the body";
        if (auto length = parser_->content_length_remaining())
            where += " (" + std::to_string(*length) + " more announced)";
    } else {
        where = "in the middle of the response header";
    }
    return fail(client_error_kind::protocol,
                "the server closed the connection " + where + ", before the response ended");
}

client_response response_reader::take(std::string url) {
    auto message = parser_->release();
    http::headers fields;
    for (const auto& f : message) fields.add(std::string(f.name_string()), std::string(f.value()));
    return client_response(static_cast<http::status>(message.result_int()), std::move(fields),
                           std::move(message.body()), std::move(url));
}

}  // namespace keel::http::detail
