// keel::app::application::without_redis() end to end: keel-app-memory-probe
// (memory_probe_service.cpp) run as a real process with no Redis anywhere. It has no Redis
// options, is ready at once (/readyz 200 with no Redis check), runs its process on the
// in-memory store, and shuts down cleanly; a service whose graph needs a Redis connection
// stops at start naming it. The e2e harness starts it without --redis.

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <memory>
#include <string>

#include "../e2e/service_process.hpp"

namespace {

using keel::e2e::service_process;
using keel::http::status;
using json = nlohmann::json;
using namespace std::chrono_literals;

keel::e2e::command_result run_binary(const std::string& binary, const std::string& args) {
    return keel::e2e::run_command("env -u KEEL_CONFIG -u KEEL_REDIS " + binary + " " + args +
                                  " 2>&1");
}

std::unique_ptr<service_process> serve(std::string log_level = "warn") {
    return std::make_unique<service_process>(keel::e2e::service_options{
        .binary = KEEL_APP_MEMORY_PROBE_BINARY,
        .log_level = std::move(log_level),
    });
}

TEST(application_without_redis, has_no_redis_options_and_refuses_them) {
    auto help = run_binary(KEEL_APP_MEMORY_PROBE_BINARY, "--help");
    ASSERT_EQ(help.code, 0) << help.out;
    for (auto absent : {"--redis ", "--redis-wait-replicas", "--redis-replica-timeout",
                        "--redis-shards", "--store-must-exist"})
        EXPECT_EQ(help.out.find(absent), std::string::npos) << absent << "\n" << help.out;
    for (auto present : {"--port", "--tls-cert", "--lease-ttl", "--threads"})
        EXPECT_NE(help.out.find(present), std::string::npos) << present << "\n" << help.out;

    auto refused = run_binary(KEEL_APP_MEMORY_PROBE_BINARY, "--redis redis://127.0.0.1:6379");
    EXPECT_EQ(refused.code, 2) << refused.out;
    EXPECT_NE(refused.out.find("redis"), std::string::npos) << refused.out;
}

TEST(application_without_redis, is_ready_with_no_redis_and_runs_processes_in_memory) {
    auto service = serve();  // ready: /readyz answered 200
    auto c = service->client();
    auto ready = c.get("/readyz");
    ASSERT_EQ(ready.status, status::ok) << ready.body;
    auto checks = json::parse(ready.body).at("checks");
    EXPECT_FALSE(checks.contains("redis")) << ready.body;
    EXPECT_EQ(checks.value("process store", ""), "ok") << ready.body;

    auto first = c.post_json("/count/a", json::object());
    ASSERT_EQ(first.status, status::ok) << first.body;
    EXPECT_EQ(json::parse(first.body).at("count"), 1);
    auto second = c.post_json("/count/b", json::object());
    ASSERT_EQ(second.status, status::ok) << second.body;
    EXPECT_EQ(json::parse(second.body).at("count"), 2);

    auto metrics = c.get("/metrics");
    ASSERT_EQ(metrics.status, status::ok);
    EXPECT_EQ(metrics.body.find("keel_redis_"), std::string::npos);
    EXPECT_NE(metrics.body.find("keel_process_"), std::string::npos);
}

TEST(application_without_redis, shuts_down_cleanly_stopping_its_singletons) {
    auto service = serve("info");
    EXPECT_NE(service->log().find("probe started"), std::string::npos) << service->log();
    int exit_status = service->stop();
    EXPECT_TRUE(WIFEXITED(exit_status) && WEXITSTATUS(exit_status) == 0)
        << "waitpid status " << exit_status;
    auto log = service->log();
    EXPECT_NE(log.find("probe stopped"), std::string::npos) << log;
    EXPECT_NE(log.find("services stopped"), std::string::npos) << log;
    EXPECT_EQ(log.find("Redis"), std::string::npos) << log;
}

TEST(application_without_redis, a_service_that_injects_a_redis_connection_stops_at_start) {
    auto r = run_binary(KEEL_APP_MEMORY_PROBE_NEEDS_REDIS_BINARY, "--port 0");
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_NE(r.out.find("redis::connection"), std::string::npos) << r.out;
}

}  // namespace
