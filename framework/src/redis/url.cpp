#include <fmt/format.h>

#include <charconv>
#include <keel/framework/redis/url.hpp>
#include <optional>

namespace keel::redis {
namespace {

unexpected<error> bad(std::string_view url, std::string_view why) {
    return unexpected(error{errc::bad_url, fmt::format("'{}': {}", url, why)});
}

template <class T>
bool to_number(std::string_view text, T& out) {
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
    return ec == std::errc{} && end == text.data() + text.size() && !text.empty();
}

// Splits "user:password@rest" into credentials and rest.
void take_credentials(std::string_view& rest, endpoint& ep) {
    auto at = rest.rfind('@');
    if (at == std::string_view::npos) return;
    auto creds = rest.substr(0, at);
    rest.remove_prefix(at + 1);
    if (auto colon = creds.find(':'); colon != std::string_view::npos) {
        ep.user = creds.substr(0, colon);
        ep.password = creds.substr(colon + 1);
    } else {
        ep.password = creds;  // redis://secret@host: a password alone
    }
}

// Reads "host[:port]" or "[v6]:port" into ep; returns why it cannot.
std::optional<std::string_view> take_host_and_port(std::string_view authority, endpoint& ep) {
    std::string_view port;
    if (authority.starts_with('[')) {
        auto close = authority.find(']');
        if (close == std::string_view::npos) return "unterminated [ in IPv6 host";
        ep.host = authority.substr(1, close - 1);
        auto after = authority.substr(close + 1);
        if (!after.empty()) {
            if (!after.starts_with(':')) return "expected :port after ]";
            port = after.substr(1);
        }
    } else {
        auto colon = authority.rfind(':');
        ep.host = authority.substr(0, colon);
        if (colon != std::string_view::npos) port = authority.substr(colon + 1);
    }
    if (ep.host.empty()) return "missing host";
    if (!port.empty() || authority.ends_with(':')) {
        unsigned value = 0;
        if (!to_number(port, value) || value == 0 || value > 65535)
            return "the port must be an integer from 1 to 65535";
        ep.port = static_cast<std::uint16_t>(value);
    }
    return std::nullopt;
}

constexpr std::string_view cluster_scheme = "redis-cluster://";

}  // namespace

std::string endpoint::display() const {
    std::string who = user.empty() ? "" : user + "@";
    if (kind == transport::unix_socket) return fmt::format("unix://{}{}", who, path);
    bool v6 = host.find(':') != std::string::npos;
    return fmt::format("redis://{}{}{}{}:{}/{}", who, v6 ? "[" : "", host, v6 ? "]" : "", port, db);
}

expected<endpoint, error> parse_url(std::string_view url) {
    endpoint ep;
    std::string_view rest;
    if (url.starts_with("unix://")) {
        ep.kind = endpoint::transport::unix_socket;
        rest = url.substr(7);
        if (auto q = rest.find("?db="); q != std::string_view::npos) {
            if (!to_number(rest.substr(q + 4), ep.db) || ep.db < 0)
                return bad(url, "db must be a non-negative integer");
            rest = rest.substr(0, q);
        }
        take_credentials(rest, ep);
        if (!rest.starts_with('/')) return bad(url, "a unix socket path must be absolute");
        ep.path = rest;
        return ep;
    }
    if (!url.starts_with("redis://")) {
        return bad(url, "expected redis://[user:password@]host[:port][/db] or unix:///path");
    }
    rest = url.substr(8);
    auto slash = rest.find('/');
    std::string_view authority = rest.substr(0, slash);
    if (slash != std::string_view::npos) {
        auto db = rest.substr(slash + 1);
        if (!db.empty() && (!to_number(db, ep.db) || ep.db < 0))
            return bad(url, "the database (after /) must be a non-negative integer");
    }
    take_credentials(authority, ep);
    if (auto why = take_host_and_port(authority, ep)) return bad(url, *why);
    return ep;
}

bool is_cluster_url(std::string_view url) {
    return url.starts_with(cluster_scheme);
}

expected<std::vector<endpoint>, error> parse_cluster_url(std::string_view url) {
    if (!is_cluster_url(url))
        return bad(url, "expected redis-cluster://[user:password@]host[:port][,host[:port]...]");
    auto rest = url.substr(cluster_scheme.size());
    auto slash = rest.find('/');
    if (slash != std::string_view::npos) {
        auto db = rest.substr(slash + 1);
        if (!db.empty() && db != "0") return bad(url, "a cluster has only database 0");
        rest = rest.substr(0, slash);
    }
    endpoint credentials;
    take_credentials(rest, credentials);
    std::vector<endpoint> seeds;
    for (;;) {
        auto comma = rest.find(',');
        endpoint ep = credentials;
        if (auto why = take_host_and_port(rest.substr(0, comma), ep)) return bad(url, *why);
        seeds.push_back(std::move(ep));
        if (comma == std::string_view::npos) break;
        rest.remove_prefix(comma + 1);
    }
    return seeds;
}

}  // namespace keel::redis
