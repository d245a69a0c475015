// End-to-end tests of how keel-orders serves the web console (admin/console/, docs/admin-api.md
// "Console"): absent without the admin API, served without the token when the API is on (the
// files hold no data; the API they call still needs it), with the right content types,
// caching (no-cache + ETag for the page, versioned assets cached for good, 304 on
// If-None-Match) and a strict Content-Security-Policy; unknown files are 404 and no
// spelling of a path reaches anything but an embedded file. The page itself is tested in a
// browser by tests/console/console_test.py.

#include <gtest/gtest.h>

#include <keel/test/redis_server.hpp>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "service_fixture.hpp"

namespace {

using keel::e2e::service_process;
using keel::http::method;
using keel::http::status;
using keel::http::testing::test_client;
using keel::http::testing::test_response;

const std::string token = "console-e2e-token";

class console_e2e : public keel::e2e::service_fixture {
  protected:
    void start(std::vector<std::string> extra_args = {}) {
        service_fixture::start(KEEL_ORDERS_BINARY, std::move(extra_args));
    }

    // The index, and the versioned URL of each asset it links (v/<version>/<file>).
    std::vector<std::string> linked_assets(test_client& c) {
        auto index = c.get("/admin/console/");
        EXPECT_EQ(index.status, status::ok);
        std::vector<std::string> found;
        std::regex link(R"re((?:src|href)="(v/[0-9a-f]{16}/[a-z.]+)")re");
        for (std::sregex_iterator it(index.body.begin(), index.body.end(), link), end; it != end;
             ++it)
            found.push_back("/admin/console/" + (*it)[1].str());
        return found;
    }
};

void expect_secured(const test_response& res, const std::string& what) {
    auto csp = std::string(res.header("Content-Security-Policy").value_or(""));
    EXPECT_NE(csp.find("default-src 'self'"), std::string::npos) << what << ": " << csp;
    EXPECT_NE(csp.find("script-src 'self'"), std::string::npos) << what << ": " << csp;
    EXPECT_NE(csp.find("style-src 'self'"), std::string::npos) << what << ": " << csp;
    EXPECT_NE(csp.find("frame-ancestors 'none'"), std::string::npos) << what << ": " << csp;
    EXPECT_EQ(csp.find("unsafe-inline"), std::string::npos) << what << ": " << csp;
    EXPECT_EQ(csp.find("unsafe-eval"), std::string::npos) << what << ": " << csp;
    EXPECT_EQ(res.header("X-Content-Type-Options").value_or(""), "nosniff") << what;
}

TEST_F(console_e2e, the_console_does_not_exist_without_the_admin_api) {
    start();
    auto c = service->client();
    for (auto target : {"/admin/console", "/admin/console/", "/admin/console/index.html",
                        "/admin/console/v/0123456789abcdef/console.js"})
        EXPECT_EQ(c.get(target).status, status::not_found) << target;
}

TEST_F(console_e2e, the_page_is_served_without_the_token_and_the_api_still_needs_it) {
    start({"--admin-token", token});
    auto c = service->client();

    auto index = c.get("/admin/console/");
    ASSERT_EQ(index.status, status::ok) << index.body;
    EXPECT_EQ(index.header("Content-Type").value_or(""), "text/html; charset=utf-8");
    EXPECT_EQ(index.header("Cache-Control").value_or(""), "no-cache");
    EXPECT_TRUE(index.header("ETag").has_value());
    expect_secured(index, "index");
    EXPECT_NE(index.body.find("<script type=\"module\""), std::string::npos);
    // Nothing inline: every script and style is a file of its own.
    EXPECT_EQ(index.body.find("<style"), std::string::npos);
    EXPECT_EQ(index.body.find("style=\""), std::string::npos);
    EXPECT_EQ(std::regex_search(index.body, std::regex("<script[^>]*>[^<]+</script>")), false);
    EXPECT_EQ(index.body.find("@KEEL_CONSOLE_VERSION@"), std::string::npos);
    EXPECT_EQ(c.get("/admin/console/index.html").body, index.body);

    // Without the slash, a redirect to it (the page's links are relative).
    auto bare = c.get("/admin/console");
    EXPECT_EQ(bare.status, status::moved_permanently);
    EXPECT_EQ(bare.header("Location").value_or(""), "console/");

    // The API the page calls is not opened by it.
    EXPECT_EQ(c.get("/admin/stats").status, status::unauthorized);
    EXPECT_EQ(c.get("/admin/instances").status, status::unauthorized);
    EXPECT_EQ(c.post_json("/admin/cancel/order/o-1/fulfillment", {}).status, status::unauthorized);
    // The console answers GET and HEAD only.
    EXPECT_EQ(c.post_json("/admin/console/", {}).status, status::method_not_allowed);
}

TEST_F(console_e2e, assets_have_their_content_types_and_are_cached_by_version) {
    start({"--admin-token", token});
    auto c = service->client();
    auto assets = linked_assets(c);
    ASSERT_EQ(assets.size(), 3u);  // icon, stylesheet, script
    std::string version = assets[0].substr(std::string("/admin/console/v/").size(), 16);

    struct expected {
        std::string file;
        std::string type;
    };
    for (const auto& [file, type] : std::vector<expected>{
             {"console.js", "text/javascript; charset=utf-8"},
             {"console.css", "text/css; charset=utf-8"},
             {"icon.svg", "image/svg+xml"},
             {"api.js", "text/javascript; charset=utf-8"},  // imported by console.js
             {"timeline.js", "text/javascript; charset=utf-8"}}) {
        auto target = "/admin/console/v/" + version + "/" + file;
        auto res = c.get(target);
        ASSERT_EQ(res.status, status::ok) << target;
        EXPECT_EQ(res.header("Content-Type").value_or(""), type) << target;
        EXPECT_EQ(res.header("Cache-Control").value_or(""), "max-age=31536000, immutable")
            << target;
        EXPECT_FALSE(res.body.empty()) << target;
        expect_secured(res, target);
    }
    // The scripts render data as text only.
    for (auto file : {"console.js", "list.js", "instance.js", "overview.js", "timeline.js",
                      "queues.js", "schedules.js"}) {
        auto body = c.get("/admin/console/v/" + version + "/" + file).body;
        EXPECT_EQ(body.find("innerHTML"), std::string::npos) << file;
        EXPECT_EQ(body.find("eval("), std::string::npos) << file;
    }

    // Unknown files, unversioned or stale URLs, and the index under the version: 404.
    for (auto target : {"/admin/console/nope.js", "/admin/console/console.js",
                        "/admin/console/v/0123456789abcdef/console.js", "/admin/console/v/",
                        "/admin/console/v/x"}) {
        auto res = c.get(target);
        EXPECT_EQ(res.status, status::not_found) << target;
    }
    EXPECT_EQ(c.get("/admin/console/v/" + version + "/nope.js").status, status::not_found);
    EXPECT_EQ(c.get("/admin/console/v/" + version + "/index.html").status, status::not_found);
    EXPECT_EQ(c.get("/admin/console/v/" + version + "/console.js/x").status, status::not_found);
}

TEST_F(console_e2e, a_conditional_get_with_the_etag_is_not_modified) {
    start({"--admin-token", token});
    auto c = service->client();
    auto index = c.get("/admin/console/");
    auto etag = std::string(index.header("ETag").value_or(""));
    ASSERT_TRUE(etag.size() > 2 && etag.front() == '"' && etag.back() == '"') << etag;

    auto conditional = [&](const std::string& target, const std::string& tags) {
        keel::http::headers h;
        h.set("If-None-Match", tags);
        return c.get(target, h);
    };
    auto same = conditional("/admin/console/", etag);
    EXPECT_EQ(same.status, status::not_modified);
    EXPECT_TRUE(same.body.empty());
    EXPECT_EQ(same.header("ETag").value_or(""), etag);
    EXPECT_EQ(same.header("Cache-Control").value_or(""), "no-cache");
    EXPECT_EQ(conditional("/admin/console/", "\"other\", " + etag).status, status::not_modified);
    EXPECT_EQ(conditional("/admin/console/", "W/" + etag).status, status::not_modified);
    EXPECT_EQ(conditional("/admin/console/", "*").status, status::not_modified);
    EXPECT_EQ(conditional("/admin/console/", "\"other\"").status, status::ok);

    auto script = linked_assets(c).back();
    auto first = c.get(script);
    auto script_tag = std::string(first.header("ETag").value_or(""));
    EXPECT_NE(script_tag, etag);
    EXPECT_EQ(conditional(script, script_tag).status, status::not_modified);

    auto head = c.request(method::head, "/admin/console/");
    EXPECT_EQ(head.status, status::ok);
    EXPECT_TRUE(head.body.empty());
    EXPECT_EQ(head.header("ETag").value_or(""), etag);
}

TEST_F(console_e2e, no_spelling_of_a_path_reaches_anything_but_an_embedded_file) {
    start({"--admin-token", token});
    auto c = service->client();
    // "v/<version>/"
    auto version = linked_assets(c).at(0).substr(std::string("/admin/console/").size(), 19);
    for (const std::string& target : std::vector<std::string>{
             "/admin/console/../stats", "/admin/console/%2e%2e/stats",
             "/admin/console/%2E%2E/stats", "/admin/console/..%2fstats",
             "/admin/console/..%2Fstats", "/admin/console/.%2e/stats",
             "/admin/console/%2e%2e%2f%2e%2e%2fetc%2fpasswd", "/admin/console/../../etc/passwd",
             "/admin/console/./index.html", "/admin/console/%00", "/admin/console/%",
             "/admin/console/" + version + "../../stats", "/admin/console/" + version + "%2e%2e",
             "/admin/console/" + version + "..%5c..%5cstats",
             "/admin/console/v/..%2f..%2f..%2fstats", "/admin/console//etc/passwd"}) {
        auto res = c.get(target);
        EXPECT_TRUE(res.status == status::bad_request || res.status == status::not_found)
            << target << ": " << keel::http::to_int(res.status);
        EXPECT_EQ(res.body.find("definitions"), std::string::npos) << target;  // not the stats
        EXPECT_EQ(res.body.find("root:"), std::string::npos) << target;
        EXPECT_EQ(res.body.find("<html"), std::string::npos) << target;
    }
}

TEST_F(console_e2e, the_console_follows_the_admin_api_onto_its_own_port) {
    auto admin_port = keel::test::free_port();
    start({"--admin-token", token, "--admin-host", "127.0.0.1", "--admin-port",
           std::to_string(admin_port)});
    auto c = service->client();
    EXPECT_EQ(c.get("/admin/console/").status, status::not_found);
    test_client admin("127.0.0.1", admin_port);
    EXPECT_EQ(admin.get("/admin/console/").status, status::ok);
    EXPECT_EQ(admin.get("/admin/stats").status, status::unauthorized);
}

}  // namespace
