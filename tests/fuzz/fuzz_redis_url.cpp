// fuzz_redis_url: keel::redis::parse_url, the parser of every --redis option.
//
// Input: the URL. The outcome is an endpoint or a bad_url error. An endpoint has a port in
// 1..65535, a database >= 0, a host (tcp) or an absolute path (unix socket); display() does
// not depend on the password; and for a host made of ordinary characters, display() parses
// back to the same place (transport, host, port, database; display() drops credentials).

#include <keel/framework/redis/url.hpp>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"

namespace {

using keel::redis::endpoint;

bool ordinary_host(std::string_view host) {
    if (host.empty()) return false;
    for (char c : host) {
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '-' || c == '_' || c == ':';
        if (!ok) return false;
    }
    return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    auto url = keel::fuzz::as_text(data, size);
    auto parsed = keel::redis::parse_url(url);
    if (!parsed) {
        KEEL_FUZZ_CHECK(parsed.error().code == keel::redis::errc::bad_url);
        KEEL_FUZZ_CHECK(!parsed.error().what().empty());
        return 0;
    }
    const endpoint& ep = *parsed;
    KEEL_FUZZ_CHECK(ep.port >= 1 && ep.db >= 0);
    auto shown = ep.display();
    endpoint other_password = ep;
    other_password.password = ep.password + "x";
    KEEL_FUZZ_CHECK(other_password.display() == shown);
    if (ep.kind == endpoint::transport::unix_socket) {
        KEEL_FUZZ_CHECK(url.starts_with("unix://") && ep.path.starts_with('/'));
        return 0;
    }
    KEEL_FUZZ_CHECK(url.starts_with("redis://") && !ep.host.empty());
    if (ordinary_host(ep.host)) {
        auto again = keel::redis::parse_url(shown);
        KEEL_FUZZ_CHECK(again.has_value());
        KEEL_FUZZ_CHECK(again->kind == ep.kind && again->host == ep.host &&
                        again->port == ep.port && again->db == ep.db);
    }
    return 0;
}
