#pragma once

/// @file
/// A Redis reply (RESP2) as a value: nil, status, error, integer, bulk string or array of
/// replies. Top-level error replies never reach callers as a reply (they arrive as
/// redis::error); nested ones (inside EXEC or a script's table) do, with type error.

#include <cstdint>
#include <keel/framework/expected.hpp>
#include <keel/framework/redis/error.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace keel::redis {

/// A reply's RESP2 type; `string` is a bulk string.
enum class reply_type { nil, status, error, integer, string, array };

/// A Redis reply as a value; see the file's description.
class reply {
  public:
    /// A nil reply.
    reply() = default;
    ///@{
    /// A reply of that type (replies built by hand: tests, fakes).
    static reply make_nil() { return reply(); }
    static reply make_status(std::string s) { return reply(reply_type::status, std::move(s)); }
    static reply make_error(std::string s) { return reply(reply_type::error, std::move(s)); }
    static reply make_string(std::string s) { return reply(reply_type::string, std::move(s)); }
    static reply make_integer(std::int64_t v);
    static reply make_array(std::vector<reply> elements);
    ///@}

    /// The reply's type.
    reply_type type() const { return type_; }
    /// Whether it is nil.
    bool is_nil() const { return type_ == reply_type::nil; }
    /// Whether it is an error (only nested: a top-level error is a redis::error).
    bool is_error() const { return type_ == reply_type::error; }
    /// Whether it is an array.
    bool is_array() const { return type_ == reply_type::array; }

    /// The text of a bulk string, status or error reply; nullopt for other types.
    std::optional<std::string_view> text() const;
    /// The value of an integer reply; nullopt for other types.
    std::optional<std::int64_t> integer() const;
    ///@{
    /// The elements of an array reply; empty for other types.
    std::span<const reply> elements() const { return elements_; }
    std::span<reply> elements() { return elements_; }
    ///@}

    ///@{
    /// Typed access with a clear error on a type mismatch.
    expected<std::string, error> as_string() const;
    expected<std::int64_t, error> as_integer() const;
    ///@}

    /// A readable rendering, for logs and test failures.
    std::string to_debug_string() const;

    /// The connection session this reply was read on: one socket from its connect to its
    /// loss, numbered uniquely in the process (0: not read from Redis). replicate() uses it
    /// to refuse a WAIT that would run on another socket than the write it follows.
    std::uint64_t session() const { return session_; }
    /// Set by the connection that read it.
    void set_session(std::uint64_t session) { session_ = session; }

    /// Compares the values; the session is not part of a reply's value.
    bool operator==(const reply& other) const {
        return type_ == other.type_ && text_ == other.text_ && integer_ == other.integer_ &&
               elements_ == other.elements_;
    }

  private:
    friend struct reply_builder;
    reply(reply_type t, std::string s) : type_(t), text_(std::move(s)) {}

    reply_type type_ = reply_type::nil;
    std::string text_;
    std::int64_t integer_ = 0;
    std::vector<reply> elements_;
    std::uint64_t session_ = 0;
};

/// The type's name: "nil", "status", ...
std::string_view to_string(reply_type type);

}  // namespace keel::redis
