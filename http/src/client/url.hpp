#pragma once

// The URLs the client accepts (internal): absolute http and https URLs, the Location of a
// redirect resolved against the URL that answered, and the form of a target that is logged.

#include <cstdint>
#include <keel/framework/expected.hpp>
#include <string>
#include <string_view>

namespace keel::http::detail {

struct url_parts {
    bool tls = false;
    std::string host;  // lower case; an IPv6 address without its brackets
    std::uint16_t port = 80;
    std::string target = "/";  // path and query, never a fragment

    bool host_is_ip() const;
    // "https://api.example.com:443": the pool and the metrics are keyed by it.
    std::string origin() const;
    // The Host field: the port only when it is not the scheme's default.
    std::string host_field() const;
    std::string text() const { return origin() + target; }
};

// Parses an absolute http:// or https:// URL. Refused, with the reason: another scheme,
// credentials (user@host), an empty or malformed host, a port outside 1..65535, spaces,
// control or non-ASCII characters anywhere (percent-encode them).
keel::expected<url_parts, std::string> parse_url(std::string_view url);

// The URL a redirect's Location names, relative to `base`: absolute, scheme-relative
// ("//host/x"), absolute-path ("/x") or relative to base's directory ("x").
keel::expected<url_parts, std::string> resolve_location(const url_parts& base,
                                                        std::string_view location);

// The target as a log line shows it: the path, then the query's keys without their values
// ("/search?q&page"), so that tokens and personal data passed in queries stay out of logs.
std::string loggable_target(std::string_view target);

}  // namespace keel::http::detail
