// The application root end to end: keel-app-probe (tests/app/probe_service.cpp), a service
// written on keel::app::application, run as a real process on a real redis-server. Its
// options, the graph's start-up checks, lifecycles, a signal group only a controller uses,
// and the shutdown order: drain HTTP, stop the engine, stop the singletons, close Redis.

#include <gtest/gtest.h>

#include <future>
#include <keel/test/redis_server.hpp>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../e2e/service_process.hpp"
#include "../http/otlp_collector.hpp"

namespace {

using keel::e2e::service_process;
using keel::http::status;
using json = nlohmann::json;
using namespace std::chrono_literals;

// The binary's exit code and output (stdout and stderr).
keel::e2e::command_result run_binary(const std::string& binary, const std::string& args) {
    return keel::e2e::run_command("env -u KEEL_CONFIG " + binary + " " + args + " 2>&1");
}

class application_e2e : public ::testing::Test {
  protected:
    std::unique_ptr<service_process> serve(std::vector<std::string> args,
                                           std::string log_level = "warn") {
        auto s = std::make_unique<service_process>(keel::e2e::service_options{
            .binary = KEEL_APP_PROBE_BINARY,
            .redis_url = redis.url(),
            .log_level = std::move(log_level),
            .extra_args = std::move(args),
        });
        s->start();
        return s;
    }
    keel::test::redis_server redis;
};

TEST_F(application_e2e, help_lists_the_service_settings_and_the_runtime_options) {
    auto help = run_binary(KEEL_APP_PROBE_BINARY, "--help");
    EXPECT_EQ(help.code, 0) << help.out;
    for (auto option :
         {"--answer", "--small", "--ratio", "--loud", "--greeting", "--slow", "--port", "--redis",
          "--lease-ttl", "--admin-token", "--signal-route", "--drain-timeout",
          "--http-max-connections", "--http-idle-timeout", "--otlp-endpoint", "--otlp-service-name",
          "--otlp-protocol", "--otlp-headers"})
        EXPECT_NE(help.out.find(option), std::string::npos) << option << "\n" << help.out;
}

TEST_F(application_e2e, settings_fill_the_struct_and_a_bad_one_exits_2_naming_it) {
    auto s = serve({"--answer", "-3", "--small", "65535", "--ratio", "0.25", "--loud", "true",
                    "--greeting", "bonjour", "--slow", "50ms"});
    auto c = s->client();
    auto got = c.get("/settings");
    ASSERT_EQ(got.status, status::ok) << got.body;
    EXPECT_EQ(json::parse(got.body), (json{{"answer", -3},
                                           {"small", 65535},
                                           {"ratio", 0.25},
                                           {"loud", true},
                                           {"greeting", "bonjour"},
                                           {"slow_ms", 50}}));
    // The member's type bounds the option: 65536 does not fit std::uint16_t.
    auto too_big = run_binary(KEEL_APP_PROBE_BINARY, "--small 65536");
    EXPECT_EQ(too_big.code, 2) << too_big.out;
    EXPECT_NE(too_big.out.find("small"), std::string::npos) << too_big.out;
    auto bad_ratio = run_binary(KEEL_APP_PROBE_BINARY, "--ratio 2");
    EXPECT_EQ(bad_ratio.code, 2) << bad_ratio.out;
    // A value its check refuses, named as it was given.
    auto two_words = run_binary(KEEL_APP_PROBE_BINARY, "--greeting 'good day'");
    EXPECT_EQ(two_words.code, 2) << two_words.out;
    EXPECT_NE(two_words.out.find("--greeting (from flag): one word, without spaces"),
              std::string::npos)
        << two_words.out;
    auto from_env = keel::e2e::run_command("env -u KEEL_CONFIG KEEL_GREETING='good day' " +
                                           std::string(KEEL_APP_PROBE_BINARY) + " 2>&1");
    EXPECT_EQ(from_env.code, 2) << from_env.out;
    EXPECT_NE(from_env.out.find("KEEL_GREETING (from env)"), std::string::npos) << from_env.out;
    auto bad_url = run_binary(KEEL_APP_PROBE_BINARY, "--redis nonsense://x");
    EXPECT_EQ(bad_url.code, 2) << bad_url.out;
    EXPECT_NE(bad_url.out.find("redis"), std::string::npos) << bad_url.out;
    auto header = run_binary(KEEL_APP_PROBE_BINARY,
                             "--otlp-endpoint http://127.0.0.1:4318 --otlp-headers 'x=s3cret%zz'");
    EXPECT_EQ(header.code, 2) << header.out;
    EXPECT_NE(header.out.find("--otlp-headers (from flag): pair 1 (x): the value has a malformed"),
              std::string::npos)
        << header.out;
    EXPECT_EQ(header.out.find("s3cret"), std::string::npos) << header.out;
    auto grpc = run_binary(KEEL_APP_PROBE_BINARY,
                           "--otlp-endpoint http://127.0.0.1:4317 --otlp-protocol grpc");
    EXPECT_EQ(grpc.code, 2) << grpc.out;
    EXPECT_NE(grpc.out.find("--otlp-protocol (from flag): 'grpc' is not http/json or "
                            "http/protobuf"),
              std::string::npos)
        << grpc.out;
}

// With --otlp-endpoint the service's server spans go to the collector (service.name: the
// service's name), the exporter's figures to /metrics, and the spans of the requests drained
// at shutdown are sent before the service exits.
TEST_F(application_e2e, spans_go_to_the_otlp_endpoint_and_its_figures_to_metrics) {
    keel::http::testing::otlp_collector collector;
    keel::http::testing::test_server receiving(collector.router);
    auto s = serve({"--otlp-endpoint", "http://127.0.0.1:" + std::to_string(receiving.port()),
                    "--otlp-headers", "Authorization=Bearer%20t0ken", "--slow", "400ms",
                    "--drain-timeout", "5s"},
                   "info");
    auto c = s->client();
    const std::string trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    auto got = c.get("/settings", {{"traceparent", "00-" + trace + "-00f067aa0ba902b7-01"}});
    ASSERT_EQ(got.status, status::ok) << got.body;
    ASSERT_TRUE(keel::e2e::eventually([&] { return collector.find("GET /settings").has_value(); }))
        << s->log();
    auto span = *collector.find("GET /settings");
    EXPECT_EQ(span["traceId"], trace);
    EXPECT_EQ(span["parentSpanId"], "00f067aa0ba902b7");
    {
        std::lock_guard lock(collector.mutex);
        EXPECT_EQ(collector.service_names.front(), "keel-app-probe");
        EXPECT_EQ(collector.authorizations.front(), "Bearer t0ken");
    }
    // The start names the header, never its value (the log's first line, the command the
    // test ran, holds it as given, percent-encoded).
    EXPECT_NE(s->log().find("with header(s) Authorization"), std::string::npos) << s->log();
    EXPECT_EQ(s->log().find("Bearer t0ken"), std::string::npos) << s->log();
    std::string text;
    EXPECT_TRUE(keel::e2e::eventually([&] {
        text = c.get("/metrics").body;
        return text.find("keel_trace_spans_exported_total ") != std::string::npos &&
               text.find("keel_trace_spans_exported_total 0\n") == std::string::npos;
    })) << text;
    EXPECT_NE(text.find("keel_trace_spans_dropped_total{reason=\"queue_full\"} 0"),
              std::string::npos)
        << text;

    // A request in flight when shutdown begins: its span is exported before the exit.
    auto slow = std::async(std::launch::async, [&] { return s->client(10s).get("/slow"); });
    std::this_thread::sleep_for(100ms);
    EXPECT_EQ(s->stop(), 0);
    EXPECT_EQ(slow.get().status, status::ok);
    EXPECT_TRUE(collector.find("GET /slow")) << s->log();
    // The exporter's own requests are not traced (each would be a span to export).
    EXPECT_FALSE(collector.find("POST 127.0.0.1"));
}

// The admin API on a port of its own joins the caller's trace too (exported here as
// OTLP/protobuf).
TEST_F(application_e2e, the_admin_port_joins_the_callers_trace) {
    keel::http::testing::otlp_collector collector;
    keel::http::testing::test_server receiving(collector.router);
    auto admin_port = keel::test::free_port();
    auto s = serve({"--otlp-endpoint", "http://127.0.0.1:" + std::to_string(receiving.port()),
                    "--otlp-protocol", "http/protobuf", "--admin-token", "t0ken", "--admin-host",
                    "127.0.0.1", "--admin-port", std::to_string(admin_port)});
    keel::http::testing::test_client admin("127.0.0.1", admin_port);
    const std::string trace = "0af7651916cd43dd8448eb211c80319c";
    auto got = admin.get("/admin/stats", {{"traceparent", "00-" + trace + "-b7ad6b7169203331-01"},
                                          {"Authorization", "Bearer t0ken"}});
    ASSERT_EQ(got.status, status::ok) << got.body;
    ASSERT_TRUE(keel::e2e::eventually([&] {
        return collector.find("GET /admin/stats").has_value();
    })) << s->log();
    auto span = *collector.find("GET /admin/stats");
    EXPECT_EQ(span["traceId"], trace);
    EXPECT_EQ(span["parentSpanId"], "b7ad6b7169203331");
    std::lock_guard lock(collector.mutex);
    EXPECT_EQ(collector.content_types.front(), "application/x-protobuf");
}

TEST_F(application_e2e, a_collector_that_is_down_changes_nothing_but_the_counters) {
    auto s = serve({"--otlp-endpoint", "http://127.0.0.1:1"});
    auto c = s->client();
    for (int i = 0; i < 5; ++i) ASSERT_EQ(c.get("/settings").status, status::ok);
    std::string text;
    EXPECT_TRUE(keel::e2e::eventually([&] {
        text = c.get("/metrics").body;
        const std::string failed = "keel_trace_spans_dropped_total{reason=\"export_failed\"} ";
        auto at = text.find(failed);
        return at != std::string::npos && std::stoi(text.substr(at + failed.size())) >= 5;
    })) << text;
}

// --otlp-sample-ratio 0: a request that starts a trace records nothing, and says so
// downstream (flags 00); one whose caller samples its trace is recorded.
TEST_F(application_e2e, a_sample_ratio_leaves_new_traces_out_and_follows_callers) {
    auto bad = run_binary(KEEL_APP_PROBE_BINARY, "--otlp-sample-ratio 1.5");
    EXPECT_EQ(bad.code, 2) << bad.out;
    EXPECT_NE(bad.out.find("otlp-sample-ratio"), std::string::npos) << bad.out;

    keel::http::testing::otlp_collector collector;
    keel::http::testing::test_server receiving(collector.router);
    auto s = serve({"--otlp-endpoint", "http://127.0.0.1:" + std::to_string(receiving.port()),
                    "--otlp-sample-ratio", "0"});
    auto c = s->client();
    ASSERT_EQ(c.get("/settings").status, status::ok);
    const std::string trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    ASSERT_EQ(
        c.get("/stats-free", {{"traceparent", "00-" + trace + "-00f067aa0ba902b7-01"}}).status,
        status::not_found);
    ASSERT_TRUE(keel::e2e::eventually([&] { return collector.find("GET").has_value(); }))
        << "the caller's sampled trace is recorded\n"
        << s->log();
    EXPECT_EQ((*collector.find("GET"))["traceId"], trace);
    EXPECT_EQ(s->stop(), 0);  // what waits is sent at the exit
    EXPECT_FALSE(collector.find("GET /settings")) << "a new trace, not sampled";
}

TEST_F(application_e2e, an_otlp_endpoint_that_is_not_a_url_exits_2_naming_it) {
    auto flag = run_binary(KEEL_APP_PROBE_BINARY, "--otlp-endpoint collector:4318");
    EXPECT_EQ(flag.code, 2) << flag.out;
    EXPECT_NE(flag.out.find("--otlp-endpoint"), std::string::npos) << flag.out;
    EXPECT_NE(flag.out.find("collector:4318"), std::string::npos) << flag.out;
    auto env = run_binary("KEEL_OTLP_ENDPOINT=ftp://collector " KEEL_APP_PROBE_BINARY, "");
    EXPECT_EQ(env.code, 2) << env.out;
    EXPECT_NE(env.out.find("KEEL_OTLP_ENDPOINT"), std::string::npos) << env.out;
}

TEST_F(application_e2e, the_http_servers_limits_are_options) {
    auto s = serve({"--http-max-header-bytes", "1024", "--http-max-body-bytes", "16"});
    auto c = s->client();
    auto big_header = c.get("/settings", {{"X-Padding", std::string(2'000, 'a')}});
    EXPECT_EQ(big_header.status, status::request_header_fields_too_large) << big_header.body;
    auto big_body = c.post_json("/count/first", json{{"padding", std::string(64, 'a')}});
    EXPECT_EQ(big_body.status, status::payload_too_large) << big_body.body;
    EXPECT_EQ(c.get("/settings").status, status::ok);
}

TEST_F(application_e2e, a_handler_dependency_that_is_not_registered_stops_the_start) {
    auto r = run_binary(KEEL_APP_PROBE_FORGETFUL_BINARY, "--port 0 --redis " + redis.url());
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_NE(r.out.find("probe::counter"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("handler_dependencies"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("listening"), std::string::npos) << r.out;
}

TEST_F(application_e2e, processes_run_and_a_group_only_a_controller_uses_can_emit) {
    auto s = serve({});
    auto c = s->client();
    auto counted = c.post_json("/count/first", json::object());
    ASSERT_EQ(counted.status, status::ok) << counted.body;
    EXPECT_EQ(json::parse(counted.body)["count"], 1);
    auto poked = c.post_json("/poke/w-1", json::object());
    ASSERT_EQ(poked.status, status::ok) << poked.body << "\n" << s->log();
    EXPECT_EQ(json::parse(poked.body)["reached"], 0);
}

TEST_F(application_e2e, the_process_stores_shard_count_is_an_option) {
    for (const auto* bad : {"--redis-shards 16385", "--redis-shards -1", "--redis-shards many"}) {
        auto refused = run_binary(KEEL_APP_PROBE_BINARY, bad);
        EXPECT_EQ(refused.code, 2) << bad << "\n" << refused.out;
        EXPECT_NE(refused.out.find("redis-shards"), std::string::npos) << refused.out;
    }
    auto s = serve({"--redis-shards", "4"});
    auto counted = s->client().post_json("/count/sharded", json::object());
    ASSERT_EQ(counted.status, status::ok) << counted.body;
    EXPECT_EQ(redis.cli({"GET", "keel:shards"}), "4") << "a new store gets the count asked for";

    // A service configured with another count is refused every process call (503), and its
    // log says what must change rather than that it is retrying; also when it started before
    // Redis answered.
    s->stop();
    ASSERT_EQ(redis.cli({"SAVE"}), "OK");  // the store survives the restart below
    redis.stop();
    service_process other(keel::e2e::service_options{
        .binary = KEEL_APP_PROBE_BINARY,
        .redis_url = redis.url(),
        .log_level = "warn",
        .extra_args = {"--redis-shards", "8"},
        .ready =
            [](std::uint16_t port, std::string& last) {
                try {
                    auto res =
                        keel::http::testing::test_client("127.0.0.1", port, 1s).get("/readyz");
                    last = res.body;
                    return res.status == status::service_unavailable;  // Redis down, or refused
                } catch (const std::exception& e) {                    // not listening yet
                    last = e.what();
                    return false;
                }
            },
    });
    other.start();
    redis.start();
    EXPECT_TRUE(keel::e2e::eventually(
        [&] { return other.log().find("process store refused") != std::string::npos; }, 15s, 100ms))
        << other.log();
    auto refused = other.client().post_json("/count/other", json::object());
    EXPECT_EQ(refused.status, status::service_unavailable) << refused.body;
    other.stop();
    auto log = other.log();
    EXPECT_NE(log.find("has 4 shards, but this service is configured with 8"), std::string::npos)
        << log;
    EXPECT_EQ(log.find("retrying", log.find("process store refused")), std::string::npos) << log;
    EXPECT_EQ(redis.cli({"GET", "keel:shards"}), "4");
}

TEST_F(application_e2e, shutdown_drains_http_then_stops_the_engine_the_services_and_redis) {
    auto s = serve({"--slow", "400ms", "--drain-timeout", "5s"}, "info");
    auto slow = std::async(std::launch::async, [&] { return s->client(10s).get("/slow"); });
    std::this_thread::sleep_for(100ms);  // the request is in flight (it takes 400 ms)
    EXPECT_EQ(s->stop(), 0);
    auto answer = slow.get();
    EXPECT_EQ(answer.status, status::ok) << answer.body;
    auto log = s->log();
    auto at = [&](const std::string& line) {
        auto p = log.find(line);
        EXPECT_NE(p, std::string::npos) << "no \"" << line << "\" in\n" << log;
        return p;
    };
    EXPECT_LT(at("probe started"), at("listening on port"));
    EXPECT_LT(at("slow request done"), at("process engine stopped"));
    EXPECT_LT(at("process engine stopped"), at("probe stopped"));
    EXPECT_LT(at("probe stopped"), at("Redis closed"));
}

// Services link jemalloc (the C library's malloc in a sanitizer build, whose malloc is ASan's),
// and say which one serves them when they start.
TEST_F(application_e2e, the_start_says_which_malloc_serves_the_service) {
    auto s = serve({}, "info");
    EXPECT_EQ(s->stop(), 0);
    auto log = s->log();
    EXPECT_NE(log.find("listening on port"), std::string::npos) << log;
    EXPECT_NE(log.find(std::string("(malloc: ") + KEEL_APP_EXPECTED_MALLOC), std::string::npos)
        << log;
}

TEST_F(application_e2e, a_singleton_that_fails_to_stop_does_not_keep_redis_open) {
    auto s = serve({"--fail-stop", "true"}, "info");
    EXPECT_EQ(s->stop(), 0);
    auto log = s->log();
    auto failed = log.find("the probe would not stop");
    ASSERT_NE(failed, std::string::npos) << log;
    EXPECT_NE(log.find("probe::lifecycle_probe"), std::string::npos) << log;
    auto closed = log.find("Redis closed");
    ASSERT_NE(closed, std::string::npos) << log;
    EXPECT_LT(failed, closed) << log;
}

}  // namespace
