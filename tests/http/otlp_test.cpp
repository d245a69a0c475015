// The OTLP/HTTP exporter: the bodies it writes in both encodings (the fields a collector
// relies on), its delivery to a receiver, and what a collector that is down or slow costs: nothing
// but counted drops.

#include <gtest/gtest.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <keel/framework/service.hpp>
#include <keel/http/middleware.hpp>
#include <keel/http/otlp.hpp>
#include <keel/http/router.hpp>
#include <keel/http/testing.hpp>
#include <keel/test/refusing_span_sink.hpp>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "otlp_collector.hpp"

namespace keel::http {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
using testing::eventually;
using testing::running_service;

trace::span sample(std::string name, bool with_parent) {
    auto root = *trace::parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                                          "congo=t61rcWkgMzE");
    trace::span s;
    s.context = with_parent ? trace::child_of(root) : trace::new_root();
    s.name = std::move(name);
    s.what = trace::span::kind::server;
    s.start =
        std::chrono::system_clock::time_point{std::chrono::nanoseconds{1'718'000'000'000'000'000}};
    s.end = s.start + 1200ms;
    s.attributes = {{"http.route", std::string("/orders/:id")},
                    {"http.response.status_code", std::int64_t{200}},
                    {"keel.replayed", false}};
    return s;
}

// Span text comes from requests: a path with bytes that are not UTF-8, or with quotes and
// control characters, still makes a body a collector can parse, and the batch is not lost.
TEST(otlp, text_from_requests_is_escaped_and_bytes_that_are_not_utf8_are_replaced) {
    auto s = sample("GET \"quoted\"\n", false);
    s.attributes = {{"url.path", std::string("/orders/\xff\xfe/x")},
                    {"note", std::string("tab\there \\ slash")}};
    s.message = "\x80 bad";
    std::vector<trace::span> spans{s};
    std::string text;
    ASSERT_NO_THROW(text = encode_otlp_json(spans, "keel-\"orders\""));
    auto body = json::parse(text);
    auto& span = body["resourceSpans"][0]["scopeSpans"][0]["spans"][0];
    EXPECT_EQ(span["name"], "GET \"quoted\"\n");
    EXPECT_EQ(span["attributes"][0]["value"]["stringValue"], "/orders/\ufffd\ufffd/x");
    EXPECT_EQ(span["attributes"][1]["value"]["stringValue"], "tab\there \\ slash");
    EXPECT_EQ(span["status"]["message"], "\ufffd bad");
    EXPECT_EQ(body["resourceSpans"][0]["resource"]["attributes"][0]["value"]["stringValue"],
              "keel-\"orders\"");
}

TEST(otlp, the_body_has_the_fields_a_collector_reads) {
    std::vector<trace::span> spans{sample("GET /orders/:id", true), sample("step charge", false)};
    spans[1].what = trace::span::kind::internal;
    spans[1].outcome = trace::span::status::error;
    spans[1].message = "card declined";
    auto body = json::parse(encode_otlp_json(spans, "keel-orders"));
    auto& resource = body["resourceSpans"][0];
    EXPECT_EQ(resource["resource"]["attributes"][0],
              json({{"key", "service.name"}, {"value", {{"stringValue", "keel-orders"}}}}));
    auto& scope = resource["scopeSpans"][0];
    EXPECT_EQ(scope["scope"]["name"], "keel");
    auto& first = scope["spans"][0];
    EXPECT_EQ(first["traceId"], "4bf92f3577b34da6a3ce929d0e0e4736");  // hex, not base64
    EXPECT_EQ(first["parentSpanId"], "00f067aa0ba902b7");
    EXPECT_EQ(first["spanId"], spans[0].context.span.hex());
    EXPECT_EQ(first["traceState"], "congo=t61rcWkgMzE");
    EXPECT_EQ(first["name"], "GET /orders/:id");
    EXPECT_EQ(first["kind"], 2);  // SPAN_KIND_SERVER
    EXPECT_EQ(first["startTimeUnixNano"], "1718000000000000000");
    EXPECT_EQ(first["endTimeUnixNano"], "1718000001200000000");
    EXPECT_EQ(first["attributes"][0],
              json({{"key", "http.route"}, {"value", {{"stringValue", "/orders/:id"}}}}));
    EXPECT_EQ(first["attributes"][1]["value"], json({{"intValue", "200"}}));
    EXPECT_EQ(first["attributes"][2]["value"], json({{"boolValue", false}}));
    EXPECT_EQ(first["status"], json({{"code", 0}}));
    auto& second = scope["spans"][1];
    EXPECT_FALSE(second.contains("parentSpanId"));  // a root span
    EXPECT_EQ(second["kind"], 1);
    EXPECT_EQ(second["status"], json({{"code", 2}, {"message", "card declined"}}));
}

// The protobuf body, read by a reader written apart from the encoder (otlp_protobuf_reader.hpp),
// says what the JSON body says, field for field: ids, times, kinds, every attribute type,
// negative and large integers, trace state, status with and without a message.
TEST(otlp, the_protobuf_body_says_what_the_json_body_says) {
    std::vector<trace::span> spans{sample("GET /orders/:id", true), sample("step charge", false),
                                   sample("", false)};
    spans[0].attributes.emplace_back("keel.retry", std::int64_t{-3});
    spans[0].attributes.emplace_back("keel.big", std::int64_t{1} << 62);
    spans[0].attributes.emplace_back("keel.empty", std::string());
    spans[0].attributes.emplace_back("keel.yes", true);
    spans[1].what = trace::span::kind::client;
    spans[1].outcome = trace::span::status::error;
    spans[1].message = "card declined";
    spans[2].outcome = trace::span::status::ok;
    spans[2].attributes.clear();
    spans[2].attributes.emplace_back(std::string(300, 'k'), std::string(20'000, 'v'));
    auto json_body = json::parse(encode_otlp_json(spans, "keel-orders"));
    auto protobuf_body =
        testing::otlp_protobuf::request(encode_otlp_protobuf(spans, "keel-orders"));
    EXPECT_EQ(protobuf_body, json_body) << "protobuf:\n"
                                        << protobuf_body.dump(1) << "\njson:\n"
                                        << json_body.dump(1);
    // No batch at all is an empty scope, as in the JSON.
    EXPECT_EQ(testing::otlp_protobuf::request(encode_otlp_protobuf({}, "k")),
              json::parse(encode_otlp_json({}, "k")));
}

// Protobuf strings must be UTF-8 or a collector refuses the whole batch: each byte that does
// not begin a well-formed sequence becomes U+FFFD, well-formed multi-byte text is kept.
TEST(otlp, protobuf_text_that_is_not_utf8_is_replaced_and_utf8_is_kept) {
    auto s = sample("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x9a\x80", false);
    s.attributes = {{"url.path", std::string("/orders/\xff\xfe/x")},
                    {"overlong", std::string("\xc0\xaf")},
                    {"surrogate", std::string("\xed\xa0\x80")},
                    {"too high", std::string("\xf4\x90\x80\x80")},
                    {"cut short", std::string("ab\xe2\x82")}};
    s.message = "\x80 bad";
    std::vector<trace::span> spans{s};
    auto body = testing::otlp_protobuf::request(encode_otlp_protobuf(spans, "keel"));
    auto& span = body["resourceSpans"][0]["scopeSpans"][0]["spans"][0];
    EXPECT_EQ(span["name"], "caf\u00e9 \u20ac \U0001F680");
    auto value = [&](int i) { return span["attributes"][i]["value"]["stringValue"]; };
    EXPECT_EQ(value(0), "/orders/\ufffd\ufffd/x");
    EXPECT_EQ(value(1), "\ufffd\ufffd");
    EXPECT_EQ(value(2), "\ufffd\ufffd\ufffd");
    EXPECT_EQ(value(3), "\ufffd\ufffd\ufffd\ufffd");
    EXPECT_EQ(value(4), "ab\ufffd\ufffd");
    EXPECT_EQ(span["status"]["message"], "\ufffd bad");
    // Every string read back is UTF-8 a JSON dump accepts.
    EXPECT_NO_THROW(static_cast<void>(body.dump()));
}

TEST(otlp, spans_reach_the_collector_in_batches) {
    testing::otlp_collector collector;
    testing::test_server server(collector.router);
    running_service run;
    otlp_exporter traces(run.service,
                         {.endpoint = "http://127.0.0.1:" + std::to_string(server.port()) + "/",
                          .service_name = "keel-test",
                          .max_batch = 4,
                          .interval = 100ms});
    for (int i = 0; i < 10; ++i) traces.record(sample("span " + std::to_string(i), true));
    ASSERT_TRUE(eventually([&] { return traces.stats().exported == 10; }))
        << traces.render_metrics();
    EXPECT_EQ(collector.count(), 10u);
    EXPECT_GE(traces.stats().batches, 3u);  // at most 4 spans per request
    std::lock_guard lock(collector.mutex);
    EXPECT_EQ(collector.content_types.front(), "application/json");
    EXPECT_EQ(collector.spans.front()["name"], "span 0");
}

TEST(otlp, spans_reach_the_collector_as_protobuf) {
    testing::otlp_collector collector;
    testing::test_server server(collector.router);
    running_service run;
    otlp_exporter traces(run.service,
                         {.endpoint = "http://127.0.0.1:" + std::to_string(server.port()),
                          .service_name = "keel-test",
                          .max_batch = 4,
                          .interval = 100ms,
                          .encoding = otlp_encoding::protobuf,
                          .headers = {{"Authorization", "Bearer t0ken"}}});
    for (int i = 0; i < 6; ++i) traces.record(sample("span " + std::to_string(i), true));
    ASSERT_TRUE(eventually([&] { return traces.stats().exported == 6; }))
        << traces.render_metrics();
    std::lock_guard lock(collector.mutex);
    EXPECT_EQ(collector.content_types.front(), "application/x-protobuf");
    EXPECT_EQ(collector.spans.front()["name"], "span 0");
    EXPECT_EQ(collector.spans.front()["traceId"], "4bf92f3577b34da6a3ce929d0e0e4736");
    EXPECT_EQ(collector.service_names.front(), "keel-test");
    EXPECT_EQ(collector.authorizations.front(), "Bearer t0ken");
}

// --otlp-headers as OpenTelemetry spells it: name=value pairs, values percent-decoded. A bad
// pair is named by its place and name, never by its value (a credential, most often).
TEST(otlp, headers_are_read_from_pairs_and_a_bad_one_is_named_without_its_value) {
    EXPECT_TRUE(parse_otlp_headers("").empty());
    EXPECT_TRUE(parse_otlp_headers("  ").empty());
    auto two = parse_otlp_headers("Authorization=Bearer%20abc, x-team = orders ,k=a=b");
    ASSERT_EQ(two.size(), 3u);
    EXPECT_EQ(two[0].name, "Authorization");
    EXPECT_EQ(two[0].value, "Bearer abc");
    EXPECT_EQ(two[1].name, "x-team");
    EXPECT_EQ(two[1].value, "orders");
    EXPECT_EQ(two[2].value, "a=b");
    struct bad {
        const char* text;
        const char* said;
    };
    for (auto [text, said] : {
             bad{"s3cret", "pair 1: is not name=value"},
             bad{"a=s3cret,b c=s3cret", "pair 2: the name is not a token"},
             bad{"x=s3cret%zz", "pair 1 (x): the value has a malformed %-escape"},
             bad{"x=s3cret%0d%0aInjected: 1", "pair 1 (x): the value has a control character"},
             bad{"content-type=s3cret", "pair 1 (content-type): is a header the exporter"},
             bad{"a=s3cret,", "pair 2: is not name=value"},
         }) {
        try {
            parse_otlp_headers(text);
            ADD_FAILURE() << "accepted " << text;
        } catch (const std::invalid_argument& e) {
            std::string what = e.what();
            EXPECT_NE(what.find(said), std::string::npos) << what;
            EXPECT_EQ(what.find("s3cret"), std::string::npos) << what;
        }
    }
}

TEST(otlp, a_collector_that_refuses_or_is_down_costs_only_counted_spans) {
    testing::otlp_collector refusing(503);
    testing::test_server server(refusing.router);
    running_service run;
    otlp_exporter refused(
        run.service,
        {.endpoint = "http://127.0.0.1:" + std::to_string(server.port()), .interval = 50ms});
    otlp_exporter nobody(run.service, {.endpoint = "http://127.0.0.1:1", .interval = 50ms});
    for (int i = 0; i < 5; ++i) {
        refused.record(sample("refused", true));
        nobody.record(sample("nobody", true));
    }
    EXPECT_TRUE(eventually([&] { return refused.stats().dropped_export_failed == 5; }));
    EXPECT_TRUE(eventually([&] { return nobody.stats().dropped_export_failed == 5; }));
    EXPECT_EQ(refused.stats().exported, 0u);
    EXPECT_NE(
        nobody.render_metrics().find("keel_trace_spans_dropped_total{reason=\"export_failed\"} 5"),
        std::string::npos);
}

// A collector that is down is tried once per interval, not in a loop of refused
// connections: what waits meanwhile fills the queue and is dropped, counted.
TEST(otlp, a_collector_that_is_down_is_tried_once_per_interval) {
    running_service run;
    otlp_exporter nobody(run.service, {.endpoint = "http://127.0.0.1:1",
                                       .max_queue = 100'000,
                                       .max_batch = 10,
                                       .interval = 200ms});
    auto began = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - began < 1s) {
        for (int i = 0; i < 100; ++i) nobody.record(sample("s", true));
        std::this_thread::sleep_for(10ms);
    }
    auto tried = nobody.stats().batches;
    EXPECT_GE(tried, 2u);
    EXPECT_LE(tried, 8u) << "one attempt per 200 ms over a second, not one per queued batch";
}

TEST(otlp, a_full_queue_drops_new_spans_without_waiting) {
    running_service run;
    otlp_exporter traces(run.service,
                         {.endpoint = "http://127.0.0.1:1", .max_queue = 10, .interval = 10s});
    for (int i = 0; i < 1000; ++i) traces.record(sample("s", true));
    EXPECT_EQ(traces.stats().dropped_queue_full, 990u);
}

// Once the queue is full, admit() refuses the next spans before they are made (a collector
// that is down costs no span's making) and counts each as dropped; a batch taken makes room.
TEST(otlp, a_full_queue_refuses_spans_before_they_are_made_and_counts_them) {
    running_service run;
    otlp_exporter traces(run.service,
                         {.endpoint = "http://127.0.0.1:1", .max_queue = 10, .interval = 10s});
    EXPECT_TRUE(traces.admit());
    for (int i = 0; i < 10; ++i) traces.record(sample("s", true));
    for (int i = 0; i < 5; ++i) EXPECT_FALSE(traces.admit());
    EXPECT_EQ(traces.stats().dropped_queue_full, 5u);
    EXPECT_NE(
        traces.render_metrics().find("keel_trace_spans_dropped_total{reason=\"queue_full\"} 5"),
        std::string::npos)
        << traces.render_metrics();
}

// The server asks its sink before it makes a request's span.
TEST(otlp, a_server_whose_sink_admits_nothing_makes_no_span) {
    keel::test::refusing_span_sink sink;
    router r;
    r.use(trace_context());
    r.get("/x", [](request&) -> asio::awaitable<response> { co_return response::text("x"); });
    testing::test_server server(r);
    server.service().set_span_sink(&sink);
    EXPECT_EQ(server.client().get("/x").status, status::ok);
    server.begin_stop();
    server.wait_stopped();
    EXPECT_EQ(sink.asked.load(), 1);
    EXPECT_EQ(sink.recorded.load(), 0);
}

TEST(otlp, shutdown_sends_what_waits) {
    testing::otlp_collector collector;
    testing::test_server server(collector.router);
    otlp_stats figures;
    {
        running_service run;
        otlp_exporter traces(
            run.service,
            {.endpoint = "http://127.0.0.1:" + std::to_string(server.port()), .interval = 1h});
        for (int i = 0; i < 3; ++i) traces.record(sample("s", true));
        std::this_thread::sleep_for(100ms);
        EXPECT_EQ(collector.count(), 0u);  // an hour before the first batch
        run.stop();
        figures = traces.stats();
    }
    EXPECT_EQ(collector.count(), 3u);
    EXPECT_EQ(figures.exported, 3u);
}

// The spans of requests that finish while the service drains are sent too: the last batch
// goes once the drain is over.
TEST(otlp, the_spans_of_requests_drained_at_shutdown_are_sent) {
    testing::otlp_collector collector;
    testing::test_server receiving(collector.router);
    router slow;
    slow.use(trace_context());
    slow.get("/slow", [](request&) -> asio::awaitable<response> {
        asio::steady_timer wait(co_await asio::this_coro::executor, 300ms);
        co_await wait.async_wait(asio::use_awaitable);
        co_return response::text("done");
    });
    testing::test_server server(slow);
    otlp_exporter traces(
        server.service(),
        {.endpoint = "http://127.0.0.1:" + std::to_string(receiving.port()), .interval = 1h});
    server.service().set_span_sink(&traces);
    std::thread caller([&] { EXPECT_EQ(server.client().get("/slow").status, status::ok); });
    std::this_thread::sleep_for(100ms);  // the request is being handled
    server.begin_stop();
    server.wait_stopped();
    caller.join();
    EXPECT_TRUE(collector.find("GET /slow")) << traces.render_metrics();
    EXPECT_EQ(traces.stats().exported, 1u);
}

// A collector that takes the connection and never answers: the flush at shutdown gives up
// after `timeout` in all, not per batch.
TEST(otlp, a_silent_collector_delays_shutdown_by_at_most_the_timeout) {
    asio::io_context io;
    asio::ip::tcp::acceptor silent(io, {asio::ip::make_address("127.0.0.1"), 0});  // no accept
    running_service run;
    otlp_exporter traces(run.service, {.endpoint = "http://127.0.0.1:" +
                                                   std::to_string(silent.local_endpoint().port()),
                                       .max_batch = 1,
                                       .interval = 1h,
                                       .timeout = 300ms});
    for (int i = 0; i < 10; ++i) traces.record(sample("s", true));
    auto began = std::chrono::steady_clock::now();
    run.stop();
    auto took = std::chrono::steady_clock::now() - began;
    EXPECT_GE(took, 250ms);
    EXPECT_LT(took, 1500ms);  // ten batches of 300 ms each would be 3 s
    EXPECT_EQ(traces.stats().dropped_export_failed, 10u);
}

TEST(otlp, the_service_options_name_the_endpoint_and_the_service) {
    config::schema schema;
    add_otlp_options(schema);
    auto load = [&](std::vector<std::string_view> args) {
        auto values = config::load(schema, args, {});
        EXPECT_TRUE(values) << values.error().what();
        return read_otlp_options(*values, "keel-orders");
    };
    EXPECT_FALSE(load({}));  // no endpoint: no export
    auto named = load({"--otlp-endpoint", "http://collector:4318"});
    ASSERT_TRUE(named);
    EXPECT_EQ(named->endpoint, "http://collector:4318");
    EXPECT_EQ(named->service_name, "keel-orders");
    auto renamed =
        load({"--otlp-endpoint", "http://collector:4318", "--otlp-service-name", "orders-eu"});
    ASSERT_TRUE(renamed);
    EXPECT_EQ(renamed->service_name, "orders-eu");
    EXPECT_THROW(load({"--otlp-endpoint", "collector:4318"}), std::invalid_argument);
    EXPECT_EQ(named->encoding, otlp_encoding::json);
    auto binary = load({"--otlp-endpoint", "http://c:4318", "--otlp-protocol", "http/protobuf"});
    ASSERT_TRUE(binary);
    EXPECT_EQ(binary->encoding, otlp_encoding::protobuf);
    for (auto bad : {"grpc", "protobuf", "HTTP/JSON", ""}) {
        try {
            load({"--otlp-endpoint", "http://c:4318", "--otlp-protocol", bad});
            ADD_FAILURE() << "accepted " << bad;
        } catch (const std::invalid_argument& e) {
            EXPECT_NE(std::string(e.what()).find("otlp_protocol"), std::string::npos) << e.what();
        }
    }
}

TEST(otlp, an_endpoint_that_is_not_a_url_is_refused_naming_it) {
    running_service run;
    try {
        otlp_exporter traces(run.service, {.endpoint = "collector:4318"});
        FAIL() << "accepted";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("collector:4318"), std::string::npos);
    }
    for (auto bad : {"", "ftp://collector:4318", "http://", "http://collector:4318/?x=1",
                     "http://user@collector:4318"})
        EXPECT_THROW(check_otlp_endpoint(bad), std::invalid_argument) << bad;
    for (auto good :
         {"http://collector:4318", "https://otel.example.com/otlp/", "http://[::1]:4318"})
        EXPECT_NO_THROW(check_otlp_endpoint(good)) << good;
}

}  // namespace
}  // namespace keel::http
