#include <fmt/format.h>

#include <keel/framework/redis/error.hpp>
#include <keel/framework/redis/reply.hpp>

namespace keel::redis {

std::string_view to_string(errc code) {
    switch (code) {
        case errc::server_error:
            return "server error";
        case errc::timeout:
            return "timeout";
        case errc::cancelled:
            return "cancelled";
        case errc::connection_lost:
            return "connection lost";
        case errc::not_connected:
            return "not connected";
        case errc::protocol_error:
            return "protocol error";
        case errc::bad_url:
            return "bad url";
        case errc::closed:
            return "closed";
        case errc::unexpected_reply:
            return "unexpected reply";
        case errc::cross_slot:
            return "cross slot";
        case errc::unsupported:
            return "unsupported";
        case errc::not_replicated:
            return "not replicated";
    }
    return "unknown";
}

std::string error::what() const {
    return fmt::format("redis {}: {}", to_string(code), message);
}

std::string_view error::server_code() const {
    if (code != errc::server_error) return {};
    std::string_view m = message;
    return m.substr(0, m.find(' '));
}

std::string_view to_string(reply_type type) {
    switch (type) {
        case reply_type::nil:
            return "nil";
        case reply_type::status:
            return "status";
        case reply_type::error:
            return "error";
        case reply_type::integer:
            return "integer";
        case reply_type::string:
            return "string";
        case reply_type::array:
            return "array";
    }
    return "unknown";
}

reply reply::make_integer(std::int64_t v) {
    reply r;
    r.type_ = reply_type::integer;
    r.integer_ = v;
    return r;
}

reply reply::make_array(std::vector<reply> elements) {
    reply r;
    r.type_ = reply_type::array;
    r.elements_ = std::move(elements);
    return r;
}

std::optional<std::string_view> reply::text() const {
    if (type_ == reply_type::string || type_ == reply_type::status || type_ == reply_type::error)
        return std::string_view(text_);
    return std::nullopt;
}

std::optional<std::int64_t> reply::integer() const {
    if (type_ == reply_type::integer) return integer_;
    return std::nullopt;
}

expected<std::string, error> reply::as_string() const {
    if (auto t = text(); t && type_ != reply_type::error) return std::string(*t);
    return unexpected(
        error{errc::unexpected_reply, fmt::format("expected a string, got {}", to_debug_string())});
}

expected<std::int64_t, error> reply::as_integer() const {
    if (type_ == reply_type::integer) return integer_;
    return unexpected(error{errc::unexpected_reply,
                            fmt::format("expected an integer, got {}", to_debug_string())});
}

std::string reply::to_debug_string() const {
    switch (type_) {
        case reply_type::nil:
            return "(nil)";
        case reply_type::integer:
            return fmt::format("(integer) {}", integer_);
        case reply_type::status:
            return text_;
        case reply_type::error:
            return fmt::format("(error) {}", text_);
        case reply_type::string:
            if (text_.size() > 64)
                return fmt::format("\"{}...\" ({} bytes)", text_.substr(0, 64), text_.size());
            return fmt::format("\"{}\"", text_);
        case reply_type::array: {
            std::string out = "[";
            for (std::size_t i = 0; i < elements_.size(); ++i) {
                if (i) out += ", ";
                out += elements_[i].to_debug_string();
            }
            return out + "]";
        }
    }
    return "?";
}

}  // namespace keel::redis
