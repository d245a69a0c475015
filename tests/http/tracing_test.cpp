// Spans of Keel's server and client, exported with OTLP to a collector in the test: one
// trace across two Keel servers (the caller's traceparent, the front's server span, its
// client span, the back's server span), the spans' names and attributes, failures, and a
// collector that is down or a queue that is full: requests are answered all the same.

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <keel/http/builtin.hpp>
#include <keel/http/client.hpp>
#include <keel/http/middleware.hpp>
#include <keel/http/otlp.hpp>
#include <keel/http/router.hpp>
#include <keel/http/testing.hpp>
#include <keel/test/refusing_span_sink.hpp>
#include <memory>
#include <string>

#include "otlp_collector.hpp"

namespace keel::http {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
using testing::attribute;
using testing::eventually;

const std::string incoming_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
const std::string incoming_span = "00f067aa0ba902b7";
const std::string incoming_traceparent = "00-" + incoming_trace + "-" + incoming_span + "-01";

std::string origin(std::uint16_t port) {
    return "http://127.0.0.1:" + std::to_string(port);
}

json str(const std::string& v) {
    return {{"stringValue", v}};
}
json num(std::int64_t v) {
    return {{"intValue", std::to_string(v)}};
}

// A collector on loopback and an exporter sending to it (or to `endpoint`), by default
// every 50 ms.
struct tracing {
    explicit tracing(std::string endpoint = {}, otlp_options options = {.interval = 50ms}) {
        options.endpoint = endpoint.empty() ? origin(receiving.port()) : std::move(endpoint);
        options.service_name = "keel-test";
        traces = std::make_unique<otlp_exporter>(exporting.service, std::move(options));
    }
    testing::otlp_collector collector;
    testing::test_server receiving{collector.router};
    testing::running_service exporting;
    std::unique_ptr<otlp_exporter> traces;
};

// The service called: says which traceparent it was sent.
struct back_service {
    back_service() {
        router.use(trace_context());
        router.get("/stock/:sku", [](request& req) -> asio::awaitable<response> {
            co_return response::json(
                {{"traceparent", std::string(req.header("traceparent").value_or(""))}});
        });
    }
    http::router router;
};

TEST(tracing, one_trace_across_two_keel_servers) {
    tracing t;
    back_service back;
    testing::test_server back_server(back.router);
    back_server.service().set_span_sink(t.traces.get());

    router front;
    front.use(trace_context());
    std::unique_ptr<client> calls;
    const auto stock = origin(back_server.port()) + "/stock/sku-1?verbose=1";
    front.get("/orders/:id", [&](request& req) -> asio::awaitable<response> {
        auto call = client_request::get(stock).in(req.trace());
        auto got = co_await calls->request(std::move(call));
        if (!got) co_return response::text(got.error().message, status::bad_gateway);
        co_return response::json(
            {{"sent", got->json()["traceparent"]}, {"served_in", req.trace().span.hex()}});
    });
    testing::test_server front_server(front);
    front_server.service().set_span_sink(t.traces.get());
    // No span option: the client records to the service's sink.
    calls = std::make_unique<client>(front_server.service());
    struct destroy_before_its_service {
        std::unique_ptr<client>& c;
        ~destroy_before_its_service() { c.reset(); }
    } guard{calls};

    auto res = front_server.client().get("/orders/o-7", {{"traceparent", incoming_traceparent}});
    ASSERT_EQ(res.status, status::ok) << res.body;
    ASSERT_TRUE(eventually([&] { return t.collector.count() >= 3; })) << t.traces->render_metrics();

    auto served = t.collector.find("GET /orders/:id");
    auto called = t.collector.find("GET 127.0.0.1");
    auto downstream = t.collector.find("GET /stock/:sku");
    ASSERT_TRUE(served && called && downstream) << json(t.collector.all()).dump(2);

    // The front's server span: the caller's trace, the caller's span as its parent, the span
    // the handler was served in.
    EXPECT_EQ((*served)["traceId"], incoming_trace);
    EXPECT_EQ((*served)["parentSpanId"], incoming_span);
    EXPECT_EQ((*served)["spanId"], res.json()["served_in"]);
    EXPECT_EQ((*served)["kind"], 2);
    EXPECT_EQ(attribute(*served, "http.request.method"), str("GET"));
    EXPECT_EQ(attribute(*served, "http.route"), str("/orders/:id"));
    EXPECT_EQ(attribute(*served, "url.path"), str("/orders/o-7"));
    EXPECT_EQ(attribute(*served, "url.scheme"), str("http"));
    EXPECT_EQ(attribute(*served, "http.response.status_code"), num(200));
    EXPECT_EQ(attribute(*served, "server.address"), str("127.0.0.1"));
    EXPECT_EQ(attribute(*served, "server.port"), num(front_server.port()));
    EXPECT_EQ((*served)["status"]["code"], 0);

    // The client span: a child of the server span, its id the one sent in traceparent.
    EXPECT_EQ((*called)["traceId"], incoming_trace);
    EXPECT_EQ((*called)["parentSpanId"], (*served)["spanId"]);
    EXPECT_EQ((*called)["kind"], 3);
    EXPECT_EQ(attribute(*called, "http.request.method"), str("GET"));
    EXPECT_EQ(attribute(*called, "server.address"), str("127.0.0.1"));
    EXPECT_EQ(attribute(*called, "server.port"), num(back_server.port()));
    EXPECT_EQ(attribute(*called, "url.full"),
              str(origin(back_server.port()) + "/stock/sku-1"));  // no query
    EXPECT_EQ(attribute(*called, "http.response.status_code"), num(200));
    auto sent = trace::parse_traceparent(res.json()["sent"].get<std::string>());
    ASSERT_TRUE(sent) << res.body;
    EXPECT_EQ(sent->trace.hex(), incoming_trace);
    EXPECT_EQ(sent->span.hex(), (*called)["spanId"]);

    // The back's server span: a child of the client span.
    EXPECT_EQ((*downstream)["traceId"], incoming_trace);
    EXPECT_EQ((*downstream)["parentSpanId"], (*called)["spanId"]);
    EXPECT_EQ(attribute(*downstream, "http.route"), str("/stock/:sku"));
    EXPECT_EQ(attribute(*downstream, "url.path"), str("/stock/sku-1"));

    std::lock_guard lock(t.collector.mutex);
    for (const auto& name : t.collector.service_names) EXPECT_EQ(name, "keel-test");
}

TEST(tracing, server_spans_name_the_route_not_the_path_and_a_5xx_is_an_error) {
    tracing t;
    router r;
    metrics m;
    health h;
    install_defaults(r, m, h);
    r.get("/boom", [](request&) -> asio::awaitable<response> {
        throw std::runtime_error("broken");
        co_return response::text("never");
    });
    r.get("/fine/:n<int>",
          [](request&) -> asio::awaitable<response> { co_return response::text("fine"); });
    testing::test_server server(r, {.server = {.spans = t.traces.get()}});  // the server's option
    auto c = server.client();
    EXPECT_EQ(c.get("/boom").status, status::internal_server_error);
    EXPECT_EQ(c.get("/nowhere/123").status, status::not_found);
    EXPECT_EQ(c.get("/fine/1").status, status::ok);
    EXPECT_EQ(c.get("/fine/2").status, status::ok);
    // A caller that does not sample its trace: no span.
    auto unsampled = "00-" + incoming_trace + "-" + incoming_span + "-00";
    EXPECT_EQ(c.get("/fine/3", {{"traceparent", unsampled}}).status, status::ok);
    ASSERT_TRUE(eventually([&] { return t.collector.count() >= 4; }));
    std::this_thread::sleep_for(200ms);  // a fifth span would have come by now
    auto spans = t.collector.all();
    ASSERT_EQ(spans.size(), 4u) << json(spans).dump(2);

    auto boom = t.collector.find("GET /boom");
    ASSERT_TRUE(boom);
    EXPECT_EQ((*boom)["status"]["code"], 2);
    EXPECT_EQ(attribute(*boom, "error.type"), str("500"));
    EXPECT_EQ(attribute(*boom, "http.response.status_code"), num(500));
    EXPECT_FALSE(boom->contains("parentSpanId"));  // no traceparent: a new trace

    auto missing = t.collector.find("GET");  // no route: the method only
    ASSERT_TRUE(missing);
    EXPECT_EQ(attribute(*missing, "http.route"), nullptr);
    EXPECT_EQ(attribute(*missing, "url.path"), str("/nowhere/123"));
    EXPECT_EQ((*missing)["status"]["code"], 0);  // a 4xx is the caller's error

    int fine = 0;
    for (const auto& s : spans)
        if (s["name"] == "GET /fine/:n<int>") ++fine;
    EXPECT_EQ(fine, 2);
}

// Runs `work` (a coroutine) on `service`'s thread 0 and waits for it.
template <class T>
T run_in(keel::service& service, asio::awaitable<T> work) {
    return asio::co_spawn(service.executor(0), std::move(work), asio::use_future).get();
}

TEST(tracing, client_spans_say_how_a_call_failed) {
    tracing t;
    back_service back;
    testing::test_server back_server(back.router);
    testing::running_service calling;
    client c(calling.service, {.spans = t.traces.get()});  // the client's option
    auto parent = *trace::parse_traceparent(incoming_traceparent);

    auto refused = client_request::get("http://127.0.0.1:1/x").in(parent);
    auto r1 = run_in(calling.service, c.request(std::move(refused)));
    EXPECT_FALSE(r1);
    auto missing = client_request::get(origin(back_server.port()) + "/nothing").in(parent);
    auto r2 = run_in(calling.service, c.request(std::move(missing)));
    ASSERT_TRUE(r2) << r2.error().message;
    EXPECT_EQ(r2->status(), status::not_found);
    // Without a trace of the caller's, the call starts one, and sends it.
    auto alone = client_request::get(origin(back_server.port()) + "/stock/sku-2");
    auto r3 = run_in(calling.service, c.request(std::move(alone)));
    ASSERT_TRUE(r3) << r3.error().message;

    ASSERT_TRUE(eventually([&] { return t.collector.count() >= 3; }));
    auto spans = t.collector.all();
    auto by_port = [&](std::int64_t port) {
        for (const auto& s : spans)
            if (attribute(s, "server.port") == num(port)) return s;
        return json();
    };
    auto failed = by_port(1);
    ASSERT_FALSE(failed.is_null()) << json(spans).dump(2);
    EXPECT_EQ(failed["parentSpanId"], incoming_span);
    EXPECT_EQ(failed["status"]["code"], 2);
    EXPECT_EQ(attribute(failed, "error.type"), str("connect"));
    EXPECT_EQ(attribute(failed, "http.response.status_code"), nullptr);
    EXPECT_FALSE(failed["status"]["message"].get<std::string>().empty());

    std::optional<json> not_found, started;
    for (const auto& s : spans) {
        if (attribute(s, "http.response.status_code") == num(404)) not_found = s;
        if (attribute(s, "url.full") == str(origin(back_server.port()) + "/stock/sku-2"))
            started = s;
    }
    ASSERT_TRUE(not_found && started) << json(spans).dump(2);
    EXPECT_EQ((*not_found)["status"]["code"], 2);
    EXPECT_EQ(attribute(*not_found, "error.type"), str("404"));
    EXPECT_FALSE(started->contains("parentSpanId"));
    auto sent = trace::parse_traceparent(r3->json()["traceparent"].get<std::string>());
    ASSERT_TRUE(sent) << r3->body();
    EXPECT_EQ(sent->span.hex(), (*started)["spanId"]);
    EXPECT_EQ(sent->trace.hex(), (*started)["traceId"]);
}

// The client asks its sink before it makes a call's span (an exporter whose collector is
// down refuses); refused, the call still carries its trace.
TEST(tracing, a_client_whose_sink_admits_nothing_makes_no_span_and_still_sends_the_trace) {
    keel::test::refusing_span_sink sink;
    back_service back;
    testing::test_server back_server(back.router);
    testing::running_service calling;
    client c(calling.service, {.spans = &sink});
    auto call = client_request::get(origin(back_server.port()) + "/stock/sku-2");
    auto r = run_in(calling.service, c.request(std::move(call)));
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_TRUE(trace::parse_traceparent(r->json()["traceparent"].get<std::string>())) << r->body();
    EXPECT_EQ(sink.asked.load(), 1);
    EXPECT_EQ(sink.recorded.load(), 0);
}

TEST(tracing, with_no_sink_a_call_without_a_trace_sends_none) {
    back_service back;
    testing::test_server back_server(back.router);
    testing::running_service calling;
    client c(calling.service);
    auto alone = client_request::get(origin(back_server.port()) + "/stock/sku-3");
    auto r = run_in(calling.service, c.request(std::move(alone)));
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->json()["traceparent"], "");
}

// A collector that is down: every request is answered, the lost spans are counted, and
// /metrics says so.
TEST(tracing, a_collector_that_is_down_changes_nothing_but_the_counts) {
    tracing t("http://127.0.0.1:1");
    router r;
    metrics m;
    health h;
    install_defaults(r, m, h);
    m.add_source([&t]() -> asio::awaitable<std::string> { co_return t.traces->render_metrics(); });
    r.get("/ok", [](request&) -> asio::awaitable<response> { co_return response::text("ok"); });
    testing::test_server server(r);
    server.service().set_span_sink(t.traces.get());
    auto c = server.client();
    for (int i = 0; i < 20; ++i) ASSERT_EQ(c.get("/ok").status, status::ok);
    ASSERT_TRUE(eventually([&] { return t.traces->stats().dropped_export_failed == 20; }))
        << t.traces->render_metrics();
    auto metrics_text = c.get("/metrics").body;
    EXPECT_NE(metrics_text.find("keel_trace_spans_dropped_total{reason=\"export_failed\"} 20"),
              std::string::npos)
        << metrics_text;
    EXPECT_NE(metrics_text.find("keel_trace_spans_exported_total 0"), std::string::npos);
}

// A queue that is full: the request is answered, its span dropped and counted.
TEST(tracing, a_full_queue_drops_spans_not_requests) {
    tracing t("http://127.0.0.1:1", {.max_queue = 5, .interval = 1h});
    router r;
    r.use(trace_context());
    r.get("/ok", [](request&) -> asio::awaitable<response> { co_return response::text("ok"); });
    testing::test_server server(r);
    server.service().set_span_sink(t.traces.get());
    auto c = server.client();
    for (int i = 0; i < 20; ++i) ASSERT_EQ(c.get("/ok").status, status::ok);
    // A span is recorded once its response is written: the last one just after the client
    // read it.
    EXPECT_TRUE(eventually([&] { return t.traces->stats().dropped_queue_full == 15; }));
    EXPECT_NE(
        t.traces->render_metrics().find("keel_trace_spans_dropped_total{reason=\"queue_full\"} 15"),
        std::string::npos);
}

}  // namespace
}  // namespace keel::http
