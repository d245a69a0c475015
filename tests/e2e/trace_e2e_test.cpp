// One order's trace end to end: keel-orders with --otlp-endpoint exports (as OTLP/protobuf)
// to a collector in the test. The order is created (its flow's start a child of the create's
// span), the service restarted, then the payment and the delivery webhooks arrive with the shop's
// trace context: the collector receives the webhooks' server spans, the resumptions they caused
// (children of the webhooks' spans, although the instance was started before the restart) and the
// steps after them, all in the shop's trace. The service's log lines of the flow carry the same
// trace_id, and the span_id of the span each line was written in.

#include <gtest/gtest.h>

#include <keel/http/testing.hpp>
#include <keel/test/redis_server.hpp>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "otlp_collector.hpp"
#include "service_process.hpp"

namespace {

using namespace std::chrono_literals;
using keel::e2e::service_process;
using keel::http::status;
using keel::http::testing::attribute;
using keel::http::testing::eventually;
using keel::http::testing::otlp_collector;
using keel::http::testing::test_server;
using json = nlohmann::json;

constexpr std::string_view shop_trace = "0af7651916cd43dd8448eb211c80319c";

// The service's JSON log lines (--log-format json) about `instance` whose message starts with
// `message`.
std::vector<json> instance_lines(const std::string& log, std::string_view instance,
                                 std::string_view message) {
    std::vector<json> out;
    std::istringstream lines(log);
    for (std::string line; std::getline(lines, line);) {
        if (!line.starts_with("{")) continue;
        auto j = json::parse(line, nullptr, false);
        if (j.is_discarded() || j.value("instance", "") != instance) continue;
        if (j.value("msg", "").starts_with(message)) out.push_back(std::move(j));
    }
    return out;
}

// The shop's traceparent for one of its own spans.
keel::http::headers from_shop(std::string_view span) {
    return {{"traceparent", "00-" + std::string(shop_trace) + "-" + std::string(span) + "-01"}};
}

TEST(trace_e2e, an_order_is_one_trace_from_its_webhooks_to_its_steps_across_a_restart) {
    otlp_collector collector;
    test_server receiver(collector.router);
    keel::test::redis_server redis;
    service_process service({
        .binary = KEEL_ORDERS_BINARY,
        .redis_url = redis.url(),
        .log_level = "info",
        .extra_args = {"--otlp-endpoint", "http://127.0.0.1:" + std::to_string(receiver.port()),
                       "--otlp-protocol", "http/protobuf", "--admin-token", "trace-admin-token",
                       "--log-format", "json"},
    });
    auto c = service.client();
    auto created = c.post_json("/orders",
                               {{"id", "o-t"},
                                {"email", "o-t@example.com"},
                                {"address", "1 Harbour Road"},
                                {"total", 42.5}},
                               from_shop("00f067aa0ba90201"));
    ASSERT_EQ(created.status, status::created) << created.body;

    service.restart();  // the instance waits in Redis; this process never saw it start
    c = service.client();
    keel::http::headers operator_auth{{"Authorization", "Bearer trace-admin-token"}};
    auto seen = c.get("/admin/instances/order/o-t/fulfillment", operator_auth);
    ASSERT_EQ(seen.status, status::ok) << seen.body;
    EXPECT_EQ(json::parse(seen.body)["trace"], shop_trace) << "the operators see its trace";
    auto paid = c.post_json("/webhooks/payment",
                            {{"orderId", "o-t"}, {"transactionId", "tx-t"}, {"amount", 42.5}},
                            from_shop("00f067aa0ba90202"));
    ASSERT_EQ(paid.status, status::ok) << paid.body;
    ASSERT_TRUE(eventually([&] { return collector.find("step dispatch").has_value(); }, 10s));
    auto delivered =
        c.post_json("/webhooks/delivered", {{"orderId", "o-t"}}, from_shop("00f067aa0ba90203"));
    ASSERT_EQ(delivered.status, status::ok) << delivered.body;
    ASSERT_TRUE(eventually([&] { return collector.find("step mark delivered").has_value(); }, 10s))
        << service.log();

    auto create = collector.find("POST /orders");
    auto start = collector.find("start /order/:order/fulfillment");
    ASSERT_TRUE(create && start);
    EXPECT_EQ((*create)["parentSpanId"], "00f067aa0ba90201");
    EXPECT_EQ((*start)["traceId"], shop_trace);
    EXPECT_EQ((*start)["parentSpanId"], (*create)["spanId"]) << "the flow's start, in the create";

    auto webhook = collector.find("POST /webhooks/payment");
    ASSERT_TRUE(webhook);
    EXPECT_EQ((*webhook)["traceId"], shop_trace);
    EXPECT_EQ((*webhook)["parentSpanId"], "00f067aa0ba90202");

    auto resumed = collector.find("signal /payment/o-t/received");
    ASSERT_TRUE(resumed);
    EXPECT_EQ((*resumed)["traceId"], shop_trace);
    EXPECT_EQ((*resumed)["parentSpanId"], (*webhook)["spanId"]) << "a child of the webhook's span";
    EXPECT_EQ(attribute(*resumed, "keel.instance"),
              json({{"stringValue", "order/o-t/fulfillment"}}));

    for (const auto* step : {"step record payment", "step dispatch"}) {
        auto s = collector.find(step);
        ASSERT_TRUE(s) << step;
        EXPECT_EQ((*s)["traceId"], shop_trace) << step;
        EXPECT_EQ((*s)["parentSpanId"], (*resumed)["spanId"]) << step;
    }

    auto delivery_hook = collector.find("POST /webhooks/delivered");
    auto delivery = collector.find("signal /shipping/o-t/delivered");
    auto marked = collector.find("step mark delivered");
    ASSERT_TRUE(delivery_hook && delivery && marked);
    EXPECT_EQ((*delivery)["parentSpanId"], (*delivery_hook)["spanId"]);
    EXPECT_EQ((*marked)["parentSpanId"], (*delivery)["spanId"]);
    EXPECT_EQ((*marked)["traceId"], shop_trace);

    // The flow's log lines: each in the span it was written in.
    const auto log = service.log();
    constexpr std::string_view flow = "order/o-t/fulfillment";
    auto started = instance_lines(log, flow, "started");
    ASSERT_EQ(started.size(), 1u) << log;
    EXPECT_EQ(started[0]["trace_id"], shop_trace);
    EXPECT_EQ(started[0]["span_id"], (*start)["spanId"]);
    for (const auto& [message, span] :
         {std::pair{"resumed by signal /payment/o-t/received", resumed},
          std::pair{"resumed by signal /shipping/o-t/delivered", delivery}}) {
        auto lines = instance_lines(log, flow, message);
        ASSERT_EQ(lines.size(), 1u) << message << "\n" << log;
        EXPECT_EQ(lines[0]["trace_id"], shop_trace) << message;
        EXPECT_EQ(lines[0]["span_id"], (*span)["spanId"]) << message;
    }
}

}  // namespace
