#pragma once

// The RESP parser (internal): hiredis's redisReader with reply-object functions that build
// keel::redis::reply trees directly, with no second copy of a reply. The connection reads
// through it, and so does the fuzzer of Redis replies.

#include <keel/framework/expected.hpp>
#include <keel/framework/redis/reply.hpp>
#include <optional>
#include <string>
#include <string_view>

struct redisReader;

namespace keel::redis::detail {

class reply_reader {
  public:
    reply_reader();
    ~reply_reader();
    reply_reader(const reply_reader&) = delete;
    reply_reader& operator=(const reply_reader&) = delete;

    // Appends bytes to parse; false when the buffer could not grow (out of memory).
    bool feed(std::string_view bytes);
    // The next complete reply; nullopt while more bytes are needed; the parser's error when
    // the stream is not RESP (the reader then stays failed).
    expected<std::optional<reply>, std::string> next();

  private:
    redisReader* reader_;
};

}  // namespace keel::redis::detail
