#include "reply_reader.hpp"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <memory>
#include <new>

namespace keel::redis {

// hiredis calls these as it parses; they are C callbacks, so nothing may throw out of them
// (an allocation failure returns null, which hiredis reports as out of memory). Arrays grow
// as their elements arrive: a 13-byte "*100000000\r\n" must not reserve 7 GB.
struct reply_builder {
    static constexpr std::size_t reserve_limit = 1024;

    template <class Make>
    static void* place(const redisReadTask* task, Make make) noexcept {
        try {
            if (task->parent) {
                auto* parent = static_cast<reply*>(task->parent->obj);
                auto at = static_cast<std::size_t>(task->idx);
                if (at >= parent->elements_.size()) parent->elements_.resize(at + 1);
                auto& slot = parent->elements_[at];
                slot = make();
                return &slot;
            }
            return new reply(make());
        } catch (...) {
            return nullptr;
        }
    }
    static void* create_string(const redisReadTask* task, char* str, size_t len) {
        return place(task, [&] {
            std::string text(str, len);
            switch (task->type) {
                case REDIS_REPLY_ERROR:
                    return reply::make_error(std::move(text));
                case REDIS_REPLY_STATUS:
                    return reply::make_status(std::move(text));
                default:
                    return reply::make_string(std::move(text));
            }
        });
    }
    static void* create_array(const redisReadTask* task, int elements) {
        return place(task, [&] {
            reply r;
            r.type_ = reply_type::array;
            r.elements_.reserve(
                std::min(static_cast<std::size_t>(std::max(elements, 0)), reserve_limit));
            return r;
        });
    }
    static void* create_integer(const redisReadTask* task, long long value) {
        return place(task, [&] { return reply::make_integer(value); });
    }
    static void* create_nil(const redisReadTask* task) {
        return place(task, [] { return reply::make_nil(); });
    }
    static void free_object(void* root) { delete static_cast<reply*>(root); }
};

namespace detail {

namespace {
redisReplyObjectFunctions reply_functions{reply_builder::create_string, reply_builder::create_array,
                                          reply_builder::create_integer, reply_builder::create_nil,
                                          reply_builder::free_object};
}  // namespace

reply_reader::reply_reader() : reader_(redisReaderCreateWithFunctions(&reply_functions)) {
    if (!reader_) throw std::bad_alloc();
}

reply_reader::~reply_reader() {
    redisReaderFree(reader_);
}

bool reply_reader::feed(std::string_view bytes) {
    return redisReaderFeed(reader_, bytes.data(), bytes.size()) == REDIS_OK;
}

expected<std::optional<reply>, std::string> reply_reader::next() {
    void* raw = nullptr;
    if (redisReaderGetReply(reader_, &raw) != REDIS_OK)
        return unexpected(std::string(reader_->errstr));
    if (!raw) return std::optional<reply>();
    std::unique_ptr<reply> r(static_cast<reply*>(raw));
    return std::optional<reply>(std::move(*r));
}

}  // namespace detail
}  // namespace keel::redis
