// fuzz_resp: RESP replies as the Redis connection parses them: hiredis's redisReader with
// Keel's reply builder, fed in chunks the way a socket delivers bytes.
//
// Input: byte 0 seeds the chunking (its low three bits pick the largest chunk: 1, 2, 3, 5,
// 8, 16 or 64 bytes, or everything at once), the rest is the byte stream from the server.
// The same stream goes to three parsers: hiredis with its default reply objects and Keel's
// builder, both in the same chunks, and Keel's builder in one piece. All three must agree on
// the replies (compared as keel::redis::reply trees) and on whether the stream ends in a
// protocol error; a crash, a leak or an exception escaping the builder is a finding.
//
// hiredis's default builder callocs an array of pointers for the declared element count
// before any element arrives; for counts above max_compared_count that is hiredis's own
// allocation, not Keel's, and the comparison with it is skipped.

#include <hiredis/hiredis.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <keel/framework/redis/reply.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.hpp"
#include "../../framework/src/redis/reply_reader.hpp"

namespace {

using keel::redis::reply;
using keel::redis::reply_type;
using keel_reader = keel::redis::detail::reply_reader;

constexpr long long max_compared_count = 1 << 16;

struct outcome {
    std::vector<reply> replies;
    bool failed = false;
    bool operator==(const outcome&) const = default;
};

std::vector<std::string_view> chunks_of(std::string_view stream, std::uint8_t seed) {
    static constexpr std::size_t largest[] = {1, 2, 3, 5, 8, 16, 64, 0};
    std::size_t limit = largest[seed & 7];
    std::uint32_t state = 0x9e3779b9u ^ seed;
    std::vector<std::string_view> out;
    while (!stream.empty()) {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        std::size_t n = limit == 0 ? stream.size() : 1 + state % limit;
        n = std::min(n, stream.size());
        out.push_back(stream.substr(0, n));
        stream.remove_prefix(n);
    }
    return out;
}

reply from_hiredis(const redisReply* r) {
    switch (r->type) {
        case REDIS_REPLY_STRING:
            return reply::make_string(std::string(r->str, r->len));
        case REDIS_REPLY_STATUS:
            return reply::make_status(std::string(r->str, r->len));
        case REDIS_REPLY_ERROR:
            return reply::make_error(std::string(r->str, r->len));
        case REDIS_REPLY_INTEGER:
            return reply::make_integer(r->integer);
        case REDIS_REPLY_NIL:
            return reply::make_nil();
        case REDIS_REPLY_ARRAY: {
            std::vector<reply> elements;
            for (std::size_t i = 0; i < r->elements; ++i)
                elements.push_back(from_hiredis(r->element[i]));
            return reply::make_array(std::move(elements));
        }
    }
    KEEL_FUZZ_CHECK(!"hiredis built a reply of an unknown type");
    return {};
}

outcome parse_with_hiredis(const std::vector<std::string_view>& chunks) {
    outcome out;
    redisReader* r = redisReaderCreate();
    KEEL_FUZZ_CHECK(r != nullptr);
    for (auto chunk : chunks) {
        KEEL_FUZZ_CHECK(redisReaderFeed(r, chunk.data(), chunk.size()) == REDIS_OK);
        for (;;) {
            void* raw = nullptr;
            if (redisReaderGetReply(r, &raw) != REDIS_OK) {
                out.failed = true;
                break;
            }
            if (!raw) break;
            out.replies.push_back(from_hiredis(static_cast<redisReply*>(raw)));
            freeReplyObject(raw);
        }
        if (out.failed) break;
    }
    redisReaderFree(r);
    return out;
}

outcome parse_with_keel(const std::vector<std::string_view>& chunks) {
    outcome out;
    keel_reader reader;
    for (auto chunk : chunks) {
        KEEL_FUZZ_CHECK(reader.feed(chunk));
        for (;;) {
            auto next = reader.next();
            if (!next) {
                KEEL_FUZZ_CHECK(!next.error().empty());
                out.failed = true;
                break;
            }
            if (!*next) break;
            out.replies.push_back(std::move(**next));
        }
        if (out.failed) break;
    }
    return out;
}

void check_reply(const reply& r) {
    KEEL_FUZZ_CHECK(!r.to_debug_string().empty() || r.type() == reply_type::status);
    bool textual = r.type() == reply_type::string || r.type() == reply_type::status ||
                   r.type() == reply_type::error;
    KEEL_FUZZ_CHECK(r.text().has_value() == textual);
    KEEL_FUZZ_CHECK(r.integer().has_value() == (r.type() == reply_type::integer));
    KEEL_FUZZ_CHECK(r.as_string().has_value() ==
                    (r.type() == reply_type::string || r.type() == reply_type::status));
    if (!r.is_array()) KEEL_FUZZ_CHECK(r.elements().empty());
    for (const auto& e : r.elements()) check_reply(e);
}

// Whether the stream declares an array longer than max_compared_count anywhere.
bool declares_long_array(std::string_view stream) {
    for (auto star = stream.find('*'); star != std::string_view::npos;
         star = stream.find('*', star + 1)) {
        long long count = 0;
        auto digits = stream.substr(star + 1);
        auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), count);
        if (ec == std::errc::result_out_of_range) return true;
        if (ec == std::errc{} && count > max_compared_count) return true;
    }
    return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    auto stream = keel::fuzz::as_text(data + 1, size - 1);
    auto chunks = chunks_of(stream, data[0]);

    auto keel_chunked = parse_with_keel(chunks);
    for (const auto& r : keel_chunked.replies) check_reply(r);
    auto keel_whole = parse_with_keel({stream});
    KEEL_FUZZ_CHECK(keel_whole == keel_chunked);

    if (!declares_long_array(stream)) {
        auto hiredis_chunked = parse_with_hiredis(chunks);
        KEEL_FUZZ_CHECK(hiredis_chunked == keel_chunked);
    }
    return 0;
}
