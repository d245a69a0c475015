// The client's response reader (http/src/client/response_reader.hpp) on responses split at
// every byte: a server's bytes arrive however the network cuts them, and the reader's answer
// must not depend on where. (The fuzz target fuzz_http_response checks the same on random
// inputs; these are the framings a real server sends, each split everywhere.)

#include "../../http/src/client/response_reader.hpp"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

namespace keel::http::response_reader_test {
namespace {

using detail::response_reader;

struct verdict {
    response_reader::state state;
    std::string body;
    client_error_kind kind = client_error_kind::protocol;
};

// Feeds `pieces` in order, then the close.
verdict read(const std::vector<std::string_view>& pieces, detail::response_limits limits = {}) {
    response_reader reader(limits, false);
    for (auto piece : pieces) reader.feed(piece);
    reader.feed_eof();
    verdict out{reader.current()};
    if (out.state == response_reader::state::done) out.body = reader.take("http://t/").body();
    if (out.state == response_reader::state::failed) out.kind = reader.error().kind;
    return out;
}

// The verdict on `bytes` fed whole, after checking that every split into two pieces, and the
// bytes fed one at a time, give the same.
verdict read_split_everywhere(std::string_view bytes, detail::response_limits limits = {}) {
    auto whole = read({bytes}, limits);
    for (std::size_t cut = 1; cut < bytes.size(); ++cut) {
        auto split = read({bytes.substr(0, cut), bytes.substr(cut)}, limits);
        EXPECT_EQ(split.state, whole.state) << "cut at byte " << cut;
        EXPECT_EQ(split.body, whole.body) << "cut at byte " << cut;
        EXPECT_EQ(split.kind, whole.kind) << "cut at byte " << cut;
    }
    std::vector<std::string_view> bytewise;
    for (std::size_t i = 0; i < bytes.size(); ++i) bytewise.push_back(bytes.substr(i, 1));
    auto one_by_one = read(bytewise, limits);
    EXPECT_EQ(one_by_one.state, whole.state);
    EXPECT_EQ(one_by_one.body, whole.body);
    EXPECT_EQ(one_by_one.kind, whole.kind);
    return whole;
}

constexpr std::string_view chunked_head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";

TEST(response_reader, an_empty_chunked_body_is_read_however_it_is_split) {
    // The final chunk is the body's first: Beast asserted, in builds with assertions, when
    // `0\r\n` had arrived and the next call brought fewer than 5 bytes.
    auto v = read_split_everywhere(std::string(chunked_head) + "0\r\n\r\n");
    EXPECT_EQ(v.state, response_reader::state::done);
    EXPECT_EQ(v.body, "");
}

TEST(response_reader, the_final_chunk_then_its_trailer_end_a_byte_at_a_time) {
    auto v = read({chunked_head, "0\r\n", "\r", "\n"});
    EXPECT_EQ(v.state, response_reader::state::done);
    EXPECT_EQ(v.body, "");
}

TEST(response_reader, a_final_chunk_with_a_trailer_field_is_read_however_it_is_split) {
    auto v = read_split_everywhere(std::string(chunked_head) + "0\r\nX-Sum: 1\r\n\r\n");
    EXPECT_EQ(v.state, response_reader::state::done);
}

TEST(response_reader, chunks_are_read_however_they_are_split) {
    auto v = read_split_everywhere(std::string(chunked_head) +
                                   "5\r\nhello\r\n1;ext=1\r\n,\r\n6\r\n world\r\n0\r\n\r\n");
    EXPECT_EQ(v.state, response_reader::state::done);
    EXPECT_EQ(v.body, "hello, world");
}

TEST(response_reader, a_chunked_body_cut_short_by_the_close_fails_however_it_is_split) {
    for (std::string_view tail : {"0\r\n", "0\r\n\r", "5\r\nhel", "5\r\nhello\r\n0"}) {
        auto v = read_split_everywhere(std::string(chunked_head) + std::string(tail));
        EXPECT_EQ(v.state, response_reader::state::failed) << tail;
        EXPECT_EQ(v.kind, client_error_kind::protocol) << tail;
    }
}

TEST(response_reader, a_malformed_chunk_fails_however_it_is_split) {
    for (std::string_view tail : {"zz\r\nabc\r\n0\r\n\r\n", "0\r\n\n", "3\r\nabcX\r\n0\r\n\r\n"}) {
        auto v = read_split_everywhere(std::string(chunked_head) + std::string(tail));
        EXPECT_EQ(v.state, response_reader::state::failed) << tail;
        EXPECT_EQ(v.kind, client_error_kind::protocol) << tail;
    }
}

// A chunk longer than its size says, refused on its last bytes within the response limit
// (fewer than the reader shows the parser alone): the verdict waits for what follows, as it
// would had those bytes come apart. Bytes past the limit: too large; the close: malformed.
TEST(response_reader, a_chunk_refused_at_the_response_limit_fails_alike_however_it_is_split) {
    // The parser refuses "!\r\n6" shown at once, and waits for more when shown "!\r\n".
    const std::string refused = std::string(chunked_head) + "5\r\nhello!\r\n6";
    const detail::response_limits at_the_refusal{.max_response_bytes = refused.size()};
    auto past = read_split_everywhere(refused + "\r\nworld!\r\n0\r\n\r\n", at_the_refusal);
    EXPECT_EQ(past.state, response_reader::state::failed);
    EXPECT_EQ(past.kind, client_error_kind::too_large);
    auto closed = read_split_everywhere(refused, {.max_response_bytes = refused.size() + 8});
    EXPECT_EQ(closed.state, response_reader::state::failed);
    EXPECT_EQ(closed.kind, client_error_kind::protocol);
}

TEST(response_reader, a_length_delimited_body_is_read_however_it_is_split) {
    auto v = read_split_everywhere("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello");
    EXPECT_EQ(v.state, response_reader::state::done);
    EXPECT_EQ(v.body, "hello");
}

}  // namespace
}  // namespace keel::http::response_reader_test
