#include "url.hpp"

#include <boost/asio/ip/address.hpp>
#include <charconv>

namespace keel::http::detail {

namespace {

bool is_host_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_';
}

// Visible ASCII: what a request target may contain unencoded.
bool is_target_char(char c) {
    auto u = static_cast<unsigned char>(c);
    return u > 0x20 && u < 0x7f;
}

std::string lower(std::string_view s) {
    std::string out(s);
    for (auto& c : out)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return out;
}

keel::expected<url_parts, std::string> fail(std::string why) {
    return keel::unexpected(std::move(why));
}

}  // namespace

bool url_parts::host_is_ip() const {
    boost::system::error_code ec;
    boost::asio::ip::make_address(host, ec);
    return !ec;
}

std::string url_parts::origin() const {
    std::string out = tls ? "https://" : "http://";
    if (host.find(':') != std::string::npos)
        out += "[" + host + "]";
    else
        out += host;
    out += ":" + std::to_string(port);
    return out;
}

std::string url_parts::host_field() const {
    std::string out = host.find(':') != std::string::npos ? "[" + host + "]" : host;
    if (port != (tls ? 443 : 80)) out += ":" + std::to_string(port);
    return out;
}

keel::expected<url_parts, std::string> parse_url(std::string_view url) {
    for (char c : url)
        if (!is_target_char(c))
            return fail(
                "the URL has a space, a control or a non-ASCII character (percent-encode "
                "it)");
    url_parts out;
    auto colon = url.find("://");
    if (colon == std::string_view::npos) return fail("the URL has no scheme (http:// or https://)");
    auto scheme = lower(url.substr(0, colon));
    if (scheme == "https")
        out.tls = true;
    else if (scheme != "http")
        return fail("the scheme '" + scheme + "' is not http or https");
    out.port = out.tls ? 443 : 80;
    auto rest = url.substr(colon + 3);
    auto authority_end = rest.find_first_of("/?#");
    auto authority = rest.substr(0, authority_end);
    rest =
        authority_end == std::string_view::npos ? std::string_view() : rest.substr(authority_end);
    if (authority.find('@') != std::string_view::npos)
        return fail("credentials in the URL are not supported (send an Authorization field)");
    std::string_view host, port;
    if (!authority.empty() && authority.front() == '[') {
        auto close = authority.find(']');
        if (close == std::string_view::npos) return fail("the IPv6 address has no closing ']'");
        host = authority.substr(1, close - 1);
        auto after = authority.substr(close + 1);
        if (!after.empty()) {
            if (after.front() != ':') return fail("unexpected text after the IPv6 address");
            port = after.substr(1);
        }
        boost::system::error_code ec;
        auto address = boost::asio::ip::make_address(std::string(host), ec);
        if (ec || !address.is_v6())
            return fail("'" + std::string(host) + "' is not an IPv6 address");
    } else {
        auto c = authority.rfind(':');
        host = authority.substr(0, c);
        if (c != std::string_view::npos) port = authority.substr(c + 1);
        for (char ch : host)
            if (!is_host_char(ch))
                return fail("the host '" + std::string(host) +
                            "' has a character a host name cannot have");
    }
    if (host.empty()) return fail("the URL has no host");
    if (host.size() > 253) return fail("the host name is longer than 253 characters");
    out.host = lower(host);
    if (authority.find(':') != std::string_view::npos && port.empty() && authority.back() == ':')
        return fail("the URL has an empty port");
    if (!port.empty()) {
        unsigned value = 0;
        auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
        if (ec != std::errc() || end != port.data() + port.size() || value == 0 || value > 65535)
            return fail("the port '" + std::string(port) + "' is not a number from 1 to 65535");
        out.port = static_cast<std::uint16_t>(value);
    }
    auto fragment = rest.find('#');
    rest = rest.substr(0, fragment);
    if (rest.empty() || rest.front() == '?')
        out.target = "/" + std::string(rest);
    else
        out.target = std::string(rest);
    return out;
}

keel::expected<url_parts, std::string> resolve_location(const url_parts& base,
                                                        std::string_view location) {
    auto first = location.find_first_not_of(" \t");
    if (first == std::string_view::npos) return fail("the redirect has an empty Location");
    location = location.substr(first, location.find_last_not_of(" \t") - first + 1);
    if (location.find("://") != std::string_view::npos) {
        auto scheme_end = location.find("://");
        auto slash = location.find_first_of("/?#");
        if (slash == std::string_view::npos || slash > scheme_end) return parse_url(location);
    }
    if (location.starts_with("//"))
        return parse_url(std::string(base.tls ? "https:" : "http:") + std::string(location));
    for (char c : location)
        if (!is_target_char(c))
            return fail("the Location has a space, a control or a non-ASCII character");
    url_parts out = base;
    location = location.substr(0, location.find('#'));
    if (location.starts_with("/")) {
        out.target = std::string(location);
    } else {
        std::string_view path = base.target.substr(0, base.target.find('?'));
        auto dir = path.substr(0, path.rfind('/') + 1);
        if (location.starts_with("?"))
            out.target = std::string(path) + std::string(location);
        else
            out.target = std::string(dir) + std::string(location);
    }
    if (out.target.empty()) out.target = "/";
    return out;
}

std::string loggable_target(std::string_view target) {
    auto q = target.find('?');
    if (q == std::string_view::npos) return std::string(target);
    std::string out(target.substr(0, q + 1));
    auto query = target.substr(q + 1);
    bool first = true;
    while (!query.empty()) {
        auto amp = query.find('&');
        auto pair = query.substr(0, amp);
        query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
        if (pair.empty()) continue;
        if (!first) out += '&';
        first = false;
        out += pair.substr(0, pair.find('='));
    }
    return out;
}

}  // namespace keel::http::detail
