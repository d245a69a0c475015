#include <gtest/gtest.h>

#include <keel/framework/redis/url.hpp>

namespace {

using keel::redis::endpoint;
using keel::redis::parse_url;

TEST(redis_url, tcp_forms) {
    auto a = parse_url("redis://localhost");
    ASSERT_TRUE(a);
    EXPECT_EQ(a->host, "localhost");
    EXPECT_EQ(a->port, 6379);
    EXPECT_EQ(a->db, 0);

    auto b = parse_url("redis://user:pa:ss@10.0.0.1:6380/3");
    ASSERT_TRUE(b);
    EXPECT_EQ(b->user, "user");
    EXPECT_EQ(b->password, "pa:ss");
    EXPECT_EQ(b->host, "10.0.0.1");
    EXPECT_EQ(b->port, 6380);
    EXPECT_EQ(b->db, 3);
    EXPECT_EQ(b->display(), "redis://user@10.0.0.1:6380/3");  // no password in messages

    auto c = parse_url("redis://[::1]:7000");
    ASSERT_TRUE(c);
    EXPECT_EQ(c->host, "::1");
    EXPECT_EQ(c->port, 7000);

    auto d = parse_url("redis://secret@host");
    ASSERT_TRUE(d);
    EXPECT_EQ(d->password, "secret");
    EXPECT_TRUE(d->user.empty());
}

TEST(redis_url, unix_forms) {
    auto a = parse_url("unix:///tmp/redis.sock");
    ASSERT_TRUE(a);
    EXPECT_EQ(a->kind, endpoint::transport::unix_socket);
    EXPECT_EQ(a->path, "/tmp/redis.sock");
    auto b = parse_url("unix://u:p@/run/redis.sock?db=2");
    ASSERT_TRUE(b);
    EXPECT_EQ(b->path, "/run/redis.sock");
    EXPECT_EQ(b->db, 2);
    EXPECT_EQ(b->password, "p");
}

TEST(redis_url, bad_urls_say_what_is_wrong) {
    for (auto [url, why] : std::initializer_list<std::pair<const char*, const char*>>{
             {"http://host", "expected redis://"},
             {"redis://", "missing host"},
             {"redis://host:0", "port"},
             {"redis://host:99999", "port"},
             {"redis://host:abc", "port"},
             {"redis://host/x", "database"},
             {"redis://[::1", "IPv6"},
             {"unix://relative.sock", "absolute"},
             {"unix:///s.sock?db=x", "db"}}) {
        auto r = parse_url(url);
        ASSERT_FALSE(r) << url;
        EXPECT_EQ(r.error().code, keel::redis::errc::bad_url);
        EXPECT_NE(r.error().message.find(why), std::string::npos) << r.error().message;
        EXPECT_NE(r.error().message.find(url), std::string::npos) << r.error().message;
    }
}

TEST(redis_url, cluster_seed_lists) {
    using keel::redis::is_cluster_url;
    using keel::redis::parse_cluster_url;
    EXPECT_TRUE(is_cluster_url("redis-cluster://h:7000"));
    EXPECT_FALSE(is_cluster_url("redis://h:7000"));
    EXPECT_FALSE(parse_url("redis-cluster://h:7000"));  // not a single server

    auto a = parse_cluster_url("redis-cluster://user:pa,s@10.0.0.1:7000,node-b,[::1]:7002");
    ASSERT_TRUE(a) << a.error().what();
    ASSERT_EQ(a->size(), 3u);
    EXPECT_EQ((*a)[0].host, "10.0.0.1");
    EXPECT_EQ((*a)[0].port, 7000);
    EXPECT_EQ((*a)[1].host, "node-b");
    EXPECT_EQ((*a)[1].port, 6379);
    EXPECT_EQ((*a)[2].host, "::1");
    EXPECT_EQ((*a)[2].port, 7002);
    for (const auto& seed : *a) {
        EXPECT_EQ(seed.kind, endpoint::transport::tcp);
        EXPECT_EQ(seed.user, "user");  // the credentials apply to every node
        EXPECT_EQ(seed.password, "pa,s");
        EXPECT_EQ(seed.db, 0);
    }
    auto b = parse_cluster_url("redis-cluster://127.0.0.1:7000/0");
    ASSERT_TRUE(b);
    EXPECT_EQ(b->size(), 1u);

    for (auto [url, why] : std::initializer_list<std::pair<const char*, const char*>>{
             {"redis://h:7000", "expected redis-cluster://"},
             {"redis-cluster://", "missing host"},
             {"redis-cluster://h:7000,", "missing host"},
             {"redis-cluster://h:7000,h:0", "port"},
             {"redis-cluster://h:7000/2", "only database 0"},
             {"redis-cluster://[::1:7000", "IPv6"}}) {
        auto r = parse_cluster_url(url);
        ASSERT_FALSE(r) << url;
        EXPECT_EQ(r.error().code, keel::redis::errc::bad_url);
        EXPECT_NE(r.error().message.find(why), std::string::npos) << r.error().message;
        EXPECT_NE(r.error().message.find(url), std::string::npos) << r.error().message;
    }
}

}  // namespace
