// Serves the web console's embedded files (console.hpp): the index, the versioned assets,
// the redirect to the trailing slash, conditional GETs and the security headers. The path
// parameter is only ever a key into the embedded table: no file system is read, so no
// spelling of a path can reach anything else.

#include "console.hpp"

#include <algorithm>
#include <keel/http/response.hpp>
#include <stdexcept>
#include <string>

namespace keel::admin::detail {

namespace {

namespace asio = boost::asio;
using http::request;
using http::response;
using http::status;

// The route as the router normalises it: the token check recognises the console by the
// route a request matched, never by its path.
constexpr std::string_view admin_prefix = "/admin";
constexpr std::string_view console_pattern = "/admin/console/*asset";

// No inline script or style anywhere, nothing from elsewhere; the API is called on the
// console's own origin. No framing (clickjacking an action's confirmation), no referrer.
constexpr std::string_view content_security_policy =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'";

const console_asset* find_asset(std::string_view name) {
    auto assets = console_assets();
    auto it = std::find_if(assets.begin(), assets.end(),
                           [&](const console_asset& a) { return a.name == name; });
    return it == assets.end() ? nullptr : &*it;
}

response secured(response res) {
    res.header("Content-Security-Policy", content_security_policy)
        .header("X-Content-Type-Options", "nosniff")
        .header("Referrer-Policy", "no-referrer")
        .header("X-Frame-Options", "DENY")
        .header("Cross-Origin-Opener-Policy", "same-origin")
        .header("Cross-Origin-Resource-Policy", "same-origin");
    return res;
}

response not_found() {
    return secured(response::problem(status::not_found, "no such console file"));
}

// Whether If-None-Match (a list of entity tags, or "*") names `etag`. Weak comparison,
// as RFC 9110 asks for If-None-Match: W/"x" matches "x".
bool matches(std::string_view if_none_match, std::string_view etag) {
    while (!if_none_match.empty()) {
        auto comma = if_none_match.find(',');
        auto tag = if_none_match.substr(0, comma);
        while (!tag.empty() && (tag.front() == ' ' || tag.front() == '\t')) tag.remove_prefix(1);
        while (!tag.empty() && (tag.back() == ' ' || tag.back() == '\t')) tag.remove_suffix(1);
        if (tag.starts_with("W/")) tag.remove_prefix(2);
        if (tag == "*" || tag == etag) return true;
        if (comma == std::string_view::npos) break;
        if_none_match.remove_prefix(comma + 1);
    }
    return false;
}

response serve(const request& req, const console_asset& asset, std::string_view cache_control) {
    auto inm = req.header("If-None-Match");
    response res(inm && matches(*inm, asset.etag) ? status::not_modified : status::ok);
    res.header("ETag", asset.etag).header("Cache-Control", cache_control);
    if (res.status() == status::ok)
        res.header("Content-Type", asset.content_type).body(std::string(asset.body));
    return secured(std::move(res));
}

asio::awaitable<response> console(request& req) {
    std::string_view name = req.param("asset");
    if (name.empty() || name == "index.html") {
        // "/admin/console" and "/admin/console/" are one route; the page's relative links
        // need the slash. The relative Location also works behind a proxy's path prefix.
        if (name.empty() && !req.raw_path().ends_with('/')) {
            response res(status::moved_permanently);
            res.header("Location", "console/");
            co_return secured(std::move(res));
        }
        const auto* index = find_asset("index.html");
        if (!index) co_return not_found();
        // Revalidated on every load, so a new build's index (and its new asset URLs) is
        // seen at once.
        co_return serve(req, *index, "no-cache");
    }
    // v/<version>/<file>: the version is part of the URL so that the file can be cached
    // for good; another version is an old page's leftover and is not served the new file.
    std::string prefix = "v/" + std::string(console_version()) + "/";
    if (!name.starts_with(prefix)) co_return not_found();
    name.remove_prefix(prefix.size());
    const auto* asset = name == "index.html" ? nullptr : find_asset(name);
    if (!asset) co_return not_found();
    co_return serve(req, *asset, "max-age=31536000, immutable");
}

}  // namespace

void mount_console(http::route_group& admin) {
    if (admin.prefix() != admin_prefix)
        throw std::logic_error("the console is mounted on the /admin group only");
    admin.get("/console/*asset", console);
}

http::middleware except_console(http::middleware guard) {
    return [guard = std::move(guard)](request& req, http::next next) -> asio::awaitable<response> {
        // The console's files, and the router's own answers (405, OPTIONS) on their public
        // path: they tell nothing the page itself does not.
        const auto* route = req.route();
        bool console =
            route ? route->method == http::method::get && route->pattern == console_pattern
                  : req.path() == "/admin/console" || req.path().starts_with("/admin/console/");
        if (console) co_return co_await next(req);
        co_return co_await guard(req, next);
    };
}

}  // namespace keel::admin::detail
