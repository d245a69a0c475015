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

    // The reply a task fills: a new element of its parent array (hiredis reports elements in
    // order, so the slot is the next one), or a new root. `fill` sets it in place, with no
    // temporary reply moved in.
    template <class Fill>
    static void* place(const redisReadTask* task, reply_type type, Fill fill) noexcept {
        try {
            if (task->parent) {
                auto& siblings = static_cast<reply*>(task->parent->obj)->elements_;
                auto at = static_cast<std::size_t>(task->idx);
                while (siblings.size() <= at) siblings.emplace_back();
                auto& slot = siblings[at];
                slot.type_ = type;
                fill(slot);
                return &slot;
            }
            auto root = std::make_unique<reply>();
            root->type_ = type;
            fill(*root);
            return root.release();
        } catch (...) {
            return nullptr;
        }
    }
    static void* create_string(const redisReadTask* task, char* str, size_t len) {
        auto type = task->type == REDIS_REPLY_ERROR    ? reply_type::error
                    : task->type == REDIS_REPLY_STATUS ? reply_type::status
                                                       : reply_type::string;
        return place(task, type, [&](reply& r) { r.text_.assign(str, len); });
    }
    static void* create_array(const redisReadTask* task, int elements) {
        return place(task, reply_type::array, [&](reply& r) {
            r.elements_.reserve(
                std::min(static_cast<std::size_t>(std::max(elements, 0)), reserve_limit));
        });
    }
    static void* create_integer(const redisReadTask* task, long long value) {
        return place(task, reply_type::integer, [&](reply& r) { r.integer_ = value; });
    }
    static void* create_nil(const redisReadTask* task) {
        return place(task, reply_type::nil, [](reply&) {});
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
