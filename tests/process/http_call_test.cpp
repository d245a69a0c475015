// ctx.http (keel/process/http_call.hpp): durable HTTP calls against a real partner (Keel's
// test server on loopback, which records every request it gets), by engines on the system
// clock, on the in-memory store and on the Redis store (a redis-server per test).

#include <gtest/gtest.h>

#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <future>
#include <keel/http/router.hpp>
#include <keel/http/testing.hpp>
#include <keel/process/engine.hpp>
#include <keel/process/forwarding_store.hpp>
#include <keel/process/http_call.hpp>
#include <keel/process/memory_store.hpp>
#include <keel/process/redis_store.hpp>
#include <keel/test/redis_server.hpp>
#include <keel/test/run.hpp>
#include <map>
#include <mutex>
#include <thread>

namespace keel::process {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

asio::awaitable<void> pause(steady::duration d) {
    asio::steady_timer t(co_await asio::this_coro::executor, d);
    co_await t.async_wait(asio::use_awaitable);
}

// The service called: each path answers its n-th request (from 0) with its script's reply,
// and every request is recorded with its Idempotency-Key, its body and when it came.
class partner {
  public:
    struct seen {
        std::string key;
        std::string body;
        steady::time_point at;
        std::string traceparent;
    };
    using reply = std::function<asio::awaitable<http::response>(int n)>;

    void on(const std::string& path, reply r) {
        router_.post(path, [this, path, r](http::request& req) { return answer(path, r, req); });
    }
    void serve() { server_.emplace(router_); }
    std::string url(const std::string& path) const {
        return "http://127.0.0.1:" + std::to_string(server_->port()) + path;
    }
    std::vector<seen> requests(const std::string& path) {
        std::lock_guard lock(mutex_);
        return log_[path];
    }

  private:
    asio::awaitable<http::response> answer(std::string path, reply r, http::request& req) {
        int n = 0;
        {
            std::lock_guard lock(mutex_);
            auto& seen_here = log_[path];
            n = static_cast<int>(seen_here.size());
            auto key = req.header("Idempotency-Key");
            seen_here.push_back({std::string(key.value_or("")), std::string(req.body()),
                                 steady::now(),
                                 std::string(req.header("traceparent").value_or(""))});
        }
        co_return co_await r(n);
    }

    std::mutex mutex_;
    std::map<std::string, std::vector<seen>> log_;
    http::router router_;
    std::optional<http::testing::test_server> server_;
};

asio::awaitable<http::response> text(std::string body, http::status s = http::status::ok) {
    co_return http::response::text(std::move(body), s);
}

// The engines' and the client's spans, read once the instance is final.
class span_log final : public trace::span_sink {
  public:
    void record(trace::span s) noexcept override {
        std::lock_guard lock(mutex_);
        spans_.push_back(std::move(s));
    }
    std::optional<trace::span> with_id(const trace::span_id& id) {
        std::lock_guard lock(mutex_);
        for (const auto& s : spans_)
            if (s.context.span == id) return s;
        return std::nullopt;
    }

  private:
    std::mutex mutex_;
    std::vector<trace::span> spans_;
};

// What the handlers get: the client and the partner.
struct deps {
    http::client* client;
    partner* other;
    std::string refused;  // a URL where nothing listens
    template <class T>
    T& get() {
        return *this;
    }
};

nlohmann::json summary(const http::client_response& r) {
    auto type = r.header("Content-Type");
    auto other = r.header("X-Other");
    return {{"status", r.status_code()},
            {"body", r.body()},
            {"content_type", type ? nlohmann::json(std::string(*type)) : nlohmann::json()},
            {"other", other ? nlohmann::json(std::string(*other)) : nlohmann::json()}};
}

http::client_request post(deps& d, const std::string& path) {
    http::client_request req;
    req.method = http::method::post;
    req.url = d.other->url(path);
    req.body = "{}";
    return req;
}

retry_policy quick() {
    return {.max_attempts = 3, .initial_backoff = 10ms, .max_backoff = 50ms};
}

// One call, then a signal, so that the instance is suspended after the call and must be
// loaded (replayed) to go on.
durable<nlohmann::json> charge_then_wait(context& ctx, std::string n, deps& d) {
    auto req = post(d, "/charge");
    auto res = co_await ctx.http("charge", *d.client, std::move(req));
    co_await ctx.wait<int>("/go/" + n);
    co_return summary(res);
}
inline constexpr auto charging = define<charge_then_wait>("/charging/:n").retry(quick);

// Two calls: the first to a flaky path, with the key in the body too (the builder form).
durable<nlohmann::json> two_calls(context& ctx, std::string, deps& d) {
    auto build = [&d](const std::string& key) {
        auto req = post(d, "/flaky");
        req.body = nlohmann::json{{"key", key}}.dump();
        return req;
    };
    auto first = co_await ctx.http("first", *d.client, build);
    auto req = post(d, "/ok");
    auto second = co_await ctx.http("second", *d.client, std::move(req));
    co_return nlohmann::json::array({summary(first), summary(second)});
}
inline constexpr auto calling_twice = define<two_calls>("/twice/:n").retry(quick);

// One call to `path` with options chosen by `mode`; a failed step is returned as its message.
durable<nlohmann::json> one_call(context& ctx, std::string path, std::string mode, deps& d) {
    http_call_options options;
    options.retry = quick();
    options.retry->max_attempts = 5;
    if (mode == "fail") options.fail_on_error_status = true;
    if (mode == "conflict") options.retry_statuses = {409};
    if (mode == "small") options.max_body = 1000;
    auto req = post(d, "/" + path);
    if (mode == "refused") req.url = d.refused + "/" + path;
    try {
        auto res = co_await ctx.http("call", *d.client, std::move(req), std::move(options));
        co_return summary(res);
    } catch (const step_failed& e) {
        co_return nlohmann::json{{"failed", std::string(e.what())}};
    }
}
inline constexpr auto calling = define<one_call>("/call/:path/:mode");

// A partner that takes two calls a second, from every worker together.
const limit partner_rate{.name = "partner", .rate = 2, .per = 1s};

durable<int> limited_call(context& ctx, std::string, deps& d) {
    auto req = post(d, "/limited");
    auto res = co_await ctx.http("call", *d.client, std::move(req)).limited(partner_rate);
    co_return res.status_code();
}
inline constexpr auto calling_limited = define<limited_call>("/limited/:n");

// A crash: every call to the store fails from now on (the memory store's stand-in for a
// worker whose process died; on Redis the worker's connection is closed instead).
struct dying_store final : forwarding_store {
    using forwarding_store::forwarding_store;
    bool dead = false;
    asio::awaitable<void> before_call() override {
        if (dead) throw std::runtime_error("this worker died");
        co_return;
    }
};

// One worker: an engine with its own view of the store (its own Redis connection).
struct worker {
    std::optional<redis::connection> conn;
    std::optional<redis_store> on_redis;
    std::optional<dying_store> on_memory;
    store* view = nullptr;
    std::optional<engine> eng;
};

// Workers on one thread and one store (memory or Redis), the client, the partner.
class http_calls : public ::testing::TestWithParam<std::string> {
  protected:
    void SetUp() override {
        if (GetParam() == "redis") server_.emplace();
        thread_ = std::jthread([this] { io_.run(); });
    }
    void TearDown() override {
        call([this]() -> asio::awaitable<int> {
            for (auto& w : workers_) crash(*w);
            co_return 0;
        });
        guard_.reset();
        io_.stop();
        thread_.join();
    }

    worker& add_worker(std::string name) {
        auto& w = *workers_.emplace_back(std::make_unique<worker>());
        call([&]() -> asio::awaitable<int> {
            store* s = nullptr;
            if (server_) {
                w.conn.emplace(
                    redis::connection::create(io_.get_executor(), {.url = server_->url()}).value());
                w.on_redis.emplace(*w.conn, redis_store_options{.shards = 2});
                co_await w.on_redis->open();
                s = &*w.on_redis;
            } else {
                w.on_memory.emplace(memory_);
                s = &*w.on_memory;
            }
            w.view = s;
            engine_options options{.worker = name,
                                   .lease_ttl = 500ms,
                                   .poll_interval = 100ms,
                                   .seed = 7,
                                   .spans = &spans_};
            w.eng.emplace(io_.get_executor(), *s, clock_, options);
            w.eng->add(charging, deps_);
            w.eng->add(calling_twice, deps_);
            w.eng->add(calling, deps_);
            w.eng->add(calling_limited, deps_);
            w.eng->run();
            co_return 0;
        });
        return w;
    }
    // Stops a worker as a crash would: nothing more reaches the store, leases stay taken.
    void crash(worker& w) {
        if (!w.eng) return;
        if (w.on_memory) w.on_memory->dead = true;
        w.eng->stop();
        if (w.conn) w.conn->close();
    }

    template <class F>
    auto call(F f) -> typename decltype(f())::value_type {
        return keel::test::call_on(io_, std::move(f));
    }

    template <auto H, class... P>
    std::string start(worker& w, const definition<H>& def, P... params) {
        return call([&]() -> asio::awaitable<std::string> {
            auto h = co_await w.eng->start(def, params...);
            co_return h.id();
        });
    }
    instance_status status(worker& w, const std::string& id) {
        return call(
            [&]() -> asio::awaitable<instance_status> { co_return co_await w.eng->status(id); });
    }
    // The instance's result once it is final (waiting up to `limit`).
    nlohmann::json result(worker& w, const std::string& id, steady::duration limit = 15s) {
        auto deadline = steady::now() + limit;
        while (!is_final(status(w, id))) {
            if (steady::now() > deadline) {
                ADD_FAILURE() << id << " did not finish in time";
                return nullptr;
            }
            std::this_thread::sleep_for(10ms);
        }
        auto r = call([&]() -> asio::awaitable<expected<nlohmann::json, failure>> {
            co_return co_await w.eng->wait(id);
        });
        if (!r) ADD_FAILURE() << id << ": " << r.error().message;
        return r ? *r : nullptr;
    }
    // Waits until `done` (up to 10 s).
    template <class P>
    bool eventually(P done) {
        auto deadline = steady::now() + 10s;
        while (!done() && steady::now() < deadline) std::this_thread::sleep_for(5ms);
        return done();
    }

    static bool is_final(instance_status s) {
        return s == instance_status::completed || s == instance_status::failed ||
               s == instance_status::cancelled;
    }

    // First: the client's sockets must be closed while the io_context that made them lives.
    asio::io_context io_;
    partner other_;
    span_log spans_;
    http::client client_{io_, http::client_options{.spans = &spans_}};
    deps deps_{&client_, &other_, {}};

  private:
    asio::executor_work_guard<asio::io_context::executor_type> guard_{io_.get_executor()};
    system_clock clock_;
    std::optional<keel::test::redis_server> server_;
    memory_store memory_;
    std::vector<std::unique_ptr<worker>> workers_;
    std::jthread thread_;
};

TEST_P(http_calls, replay_returns_the_journaled_response_without_calling_again) {
    other_.on("/charge", [](int n) -> asio::awaitable<http::response> {
        auto res = http::response::json({{"charge", "ch_" + std::to_string(n)}});
        res.header("X-Other", "not kept");
        co_return res;
    });
    other_.serve();
    auto& a = add_worker("a");
    auto id = start(a, charging, std::string("1"));
    ASSERT_TRUE(eventually([&] { return status(a, id) == instance_status::suspended; }));
    ASSERT_EQ(other_.requests("/charge").size(), 1u);
    crash(a);  // the instance is now only in the store

    auto& b = add_worker("b");
    call([&]() -> asio::awaitable<int> {
        co_await b.eng->deliver(id, "/go/1", nlohmann::json(1), "go");
        co_return 0;
    });
    auto r = result(b, id);
    EXPECT_EQ(other_.requests("/charge").size(), 1u);  // replayed, not sent again
    EXPECT_EQ(r["status"], 200);
    EXPECT_EQ(r["body"], R"({"charge":"ch_0"})");
    EXPECT_EQ(r["content_type"], "application/json");  // kept by default
    EXPECT_TRUE(r["other"].is_null());                 // not asked for: not journaled
}

TEST_P(http_calls, a_500_is_retried_with_the_same_key_and_each_call_has_its_own) {
    other_.on("/flaky", [](int n) {
        return n == 0 ? text("down", http::status::internal_server_error) : text("done");
    });
    other_.on("/ok", [](int) { return text("fine"); });
    other_.serve();
    auto& a = add_worker("a");
    auto id = start(a, calling_twice, std::string("1"));
    auto r = result(a, id);
    EXPECT_EQ(r[0]["status"], 200);
    EXPECT_EQ(r[0]["body"], "done");
    EXPECT_EQ(r[1]["body"], "fine");
    auto flaky = other_.requests("/flaky");
    auto ok = other_.requests("/ok");
    ASSERT_EQ(flaky.size(), 2u);
    ASSERT_EQ(ok.size(), 1u);
    EXPECT_FALSE(flaky[0].key.empty());
    EXPECT_EQ(flaky[0].key, flaky[1].key);  // the retry carries the same key
    EXPECT_EQ(nlohmann::json::parse(flaky[0].body)["key"], flaky[0].key);  // the builder's
    EXPECT_NE(ok[0].key, flaky[0].key);  // another operation, another key
    EXPECT_EQ(flaky[0].key, idempotency_key(id, 0, "first"));
}

TEST_P(http_calls, a_call_taken_over_by_another_worker_carries_the_same_key) {
    // The first request is answered only after its worker has died; the second at once.
    other_.on("/charge", [](int n) -> asio::awaitable<http::response> {
        if (n == 0) co_await pause(1500ms);
        co_return http::response::text("charged once");
    });
    other_.serve();
    auto& a = add_worker("a");
    auto& b = add_worker("b");
    auto id = call([&]() -> asio::awaitable<std::string> {
        co_return (co_await a.eng->start(charging, std::string("7"))).id();
    });
    ASSERT_TRUE(eventually([&] { return other_.requests("/charge").size() == 1; }));
    crash(a);  // in the middle of the call
    ASSERT_TRUE(eventually([&] { return other_.requests("/charge").size() == 2; }));
    auto seen = other_.requests("/charge");
    EXPECT_FALSE(seen[0].key.empty());
    EXPECT_EQ(seen[0].key, seen[1].key);
    call([&]() -> asio::awaitable<int> {
        co_await b.eng->deliver(id, "/go/7", nlohmann::json(1), "go");
        co_return 0;
    });
    EXPECT_EQ(result(b, id)["body"], "charged once");
}

TEST_P(http_calls, each_attempt_is_sent_in_the_step_attempts_span) {
    other_.on("/flaky", [](int n) {
        return n == 0 ? text("down", http::status::internal_server_error) : text("done");
    });
    other_.on("/ok", [](int) { return text("fine"); });
    other_.serve();
    auto& a = add_worker("a");
    auto id = start(a, calling_twice, std::string("2"));
    result(a, id);
    auto flaky = other_.requests("/flaky");
    ASSERT_EQ(flaky.size(), 2u);
    std::optional<trace::trace_id> one_trace;
    std::vector<trace::span_id> attempts;
    for (const auto& seen : flaky) {
        auto sent = trace::parse_traceparent(seen.traceparent);
        ASSERT_TRUE(sent) << "traceparent: " << seen.traceparent;
        auto client_span = spans_.with_id(sent->span);  // the partner's parent
        ASSERT_TRUE(client_span) << "the client's span names itself in traceparent";
        auto attempt = spans_.with_id(client_span->context.parent);
        ASSERT_TRUE(attempt) << "the client span's parent is one of the engine's";
        EXPECT_EQ(attempt->name, "step first");
        EXPECT_EQ(attempt->context.trace, sent->trace);
        if (one_trace) {
            EXPECT_EQ(*one_trace, sent->trace);
        }
        one_trace = sent->trace;
        attempts.push_back(attempt->context.span);
    }
    EXPECT_NE(attempts[0], attempts[1]) << "each attempt in its own span";
}

TEST_P(http_calls, a_429_with_retry_after_is_retried_no_sooner) {
    other_.on("/busy", [](int n) -> asio::awaitable<http::response> {
        if (n > 0) co_return http::response::text("served");
        auto res = http::response::text("slow down", http::status::too_many_requests);
        res.header("Retry-After", "2");
        co_return res;
    });
    other_.serve();
    auto& a = add_worker("a");
    auto id = start(a, calling, std::string("busy"), std::string("plain"));
    auto r = result(a, id);
    EXPECT_EQ(r["body"], "served");
    auto seen = other_.requests("/busy");
    ASSERT_EQ(seen.size(), 2u);
    EXPECT_GE(seen[1].at - seen[0].at, 2s);  // the policy alone would wait 10 ms
    EXPECT_EQ(seen[0].key, seen[1].key);
}

TEST_P(http_calls, a_400_is_returned_at_once_and_not_retried) {
    other_.on("/bad", [](int) { return text("no such card", http::status::bad_request); });
    other_.serve();
    auto& a = add_worker("a");
    auto r = result(a, start(a, calling, std::string("bad"), std::string("plain")));
    EXPECT_EQ(r["status"], 400);
    EXPECT_EQ(r["body"], "no such card");
    EXPECT_EQ(other_.requests("/bad").size(), 1u);
}

TEST_P(http_calls, an_error_status_fails_the_step_when_asked) {
    other_.on("/bad", [](int) { return text("no such card", http::status::bad_request); });
    other_.serve();
    auto& a = add_worker("a");
    auto r = result(a, start(a, calling, std::string("bad"), std::string("fail")));
    EXPECT_NE(r["failed"].get<std::string>().find("answered 400"), std::string::npos) << r;
    EXPECT_EQ(other_.requests("/bad").size(), 1u);
}

TEST_P(http_calls, a_4xx_listed_in_retry_statuses_is_retried) {
    other_.on("/busy", [](int n) {
        return n == 0 ? text("in progress", http::status::conflict) : text("done");
    });
    other_.serve();
    auto& a = add_worker("a");
    auto r = result(a, start(a, calling, std::string("busy"), std::string("conflict")));
    EXPECT_EQ(r["body"], "done");
    EXPECT_EQ(other_.requests("/busy").size(), 2u);
}

TEST_P(http_calls, the_last_5xx_is_returned_once_the_attempts_run_out) {
    other_.on("/down", [](int) { return text("unavailable", http::status::service_unavailable); });
    other_.serve();
    auto& a = add_worker("a");
    auto r = result(a, start(a, calling, std::string("down"), std::string("plain")));
    EXPECT_EQ(r["status"], 503);
    EXPECT_EQ(other_.requests("/down").size(), 5u);  // options.retry: 5 attempts
}

TEST_P(http_calls, a_body_over_the_bound_fails_the_step_saying_so) {
    other_.on("/big", [](int) { return text(std::string(1024 * 1024 + 1, 'x')); });
    other_.on("/medium", [](int) { return text(std::string(1001, 'x')); });
    other_.serve();
    auto& a = add_worker("a");
    auto big = result(a, start(a, calling, std::string("big"), std::string("plain")));
    auto medium = result(a, start(a, calling, std::string("medium"), std::string("small")));
    EXPECT_NE(big["failed"].get<std::string>().find("over the bound of 1048576"), std::string::npos)
        << big;
    EXPECT_NE(medium["failed"].get<std::string>().find("over the bound of 1000"), std::string::npos)
        << medium;
    EXPECT_EQ(other_.requests("/big").size(), 1u);  // not retried
}

TEST_P(http_calls, a_transport_failure_after_the_retries_fails_the_step) {
    other_.serve();
    {
        asio::io_context io;  // a port nobody listens on once the acceptor is gone
        asio::ip::tcp::acceptor probe(io, {asio::ip::make_address("127.0.0.1"), 0});
        deps_.refused = "http://127.0.0.1:" + std::to_string(probe.local_endpoint().port());
    }
    auto& a = add_worker("a");
    auto id = start(a, calling, std::string("nowhere"), std::string("refused"));
    auto r = result(a, id);
    ASSERT_TRUE(r.contains("failed")) << r;
    EXPECT_NE(r["failed"].get<std::string>().find("POST " + deps_.refused + "/nowhere"),
              std::string::npos)
        << r;
    auto recorded = call([&]() -> asio::awaitable<std::optional<instance_snapshot>> {
        co_return co_await a.view->load(id, true);
    });
    ASSERT_TRUE(recorded);
    ASSERT_FALSE(recorded->journal.empty());
    EXPECT_TRUE(recorded->journal[0].failed);
    EXPECT_EQ(recorded->journal[0].attempts, 5u);  // every attempt the policy allows
}

// .limited(l): each attempt takes a permit of the shared limit first, on every worker.
TEST_P(http_calls, a_limited_call_keeps_to_the_rate_across_workers) {
    other_.on("/limited", [](int) { return text("ok"); });
    other_.serve();
    auto& a = add_worker("a");
    auto& b = add_worker("b");
    std::vector<std::pair<worker*, std::string>> started;
    for (int i = 0; i < 6; ++i) {
        auto& w = i % 2 == 0 ? a : b;
        started.emplace_back(&w, start(w, calling_limited, std::to_string(i)));
    }
    for (auto& [w, id] : started) EXPECT_EQ(result(*w, id), 200) << id;
    auto seen = other_.requests("/limited");
    ASSERT_EQ(seen.size(), 6u);
    std::sort(seen.begin(), seen.end(), [](auto& x, auto& y) { return x.at < y.at; });
    // A sliding window of a second holds two at most; the permit is taken just before the
    // send, so arrivals may differ from the grants by the loopback's latency.
    for (std::size_t i = 0; i + 2 < seen.size(); ++i)
        EXPECT_GE(seen[i + 2].at - seen[i].at, 900ms) << "the calls " << i << " to " << i + 2;
}

INSTANTIATE_TEST_SUITE_P(stores, http_calls, ::testing::Values("memory", "redis"),
                         [](const auto& info) { return info.param; });

TEST(http_call, a_retry_after_is_seconds_or_an_http_date) {
    auto now = std::chrono::system_clock::from_time_t(784111777);  // Sun, 06 Nov 1994 08:49:37
    EXPECT_EQ(parse_retry_after("2", now), duration(2s));
    EXPECT_EQ(parse_retry_after(" 120 ", now), duration(120s));
    EXPECT_EQ(parse_retry_after("Sun, 06 Nov 1994 08:49:42 GMT", now), duration(5s));
    EXPECT_EQ(parse_retry_after("Sunday, 06-Nov-94 08:49:47 GMT", now), duration(10s));
    EXPECT_EQ(parse_retry_after("Sun Nov  6 08:49:57 1994", now), duration(20s));
    EXPECT_EQ(parse_retry_after("Sun, 06 Nov 1994 08:00:00 GMT", now), duration::zero());
    EXPECT_FALSE(parse_retry_after("soon", now));
    EXPECT_FALSE(parse_retry_after("-1", now));
    EXPECT_FALSE(parse_retry_after("", now));
}

TEST(http_call, the_key_is_stable_and_distinct_per_operation) {
    auto k = idempotency_key("order/o-1/fulfillment", 3, "charge");
    EXPECT_EQ(k, idempotency_key("order/o-1/fulfillment", 3, "charge"));
    EXPECT_EQ(k.size(), 35u);
    EXPECT_EQ(k.rfind("k1-", 0), 0u);
    EXPECT_NE(k, idempotency_key("order/o-1/fulfillment", 4, "charge"));
    EXPECT_NE(k, idempotency_key("order/o-2/fulfillment", 3, "charge"));
    EXPECT_NE(k, idempotency_key("order/o-1/fulfillment", 3, "refund"));
}

TEST(http_call, a_response_round_trips_through_its_journaled_form) {
    constexpr char bytes[] = "\x00\xff\xfe text \xc3\x28";
    std::string binary(bytes, sizeof bytes - 1);
    http::headers fields{{"Content-Type", "application/octet-stream"}, {"Set-Cookie", "s=1"}};
    http::client_response res(http::status::accepted, fields, binary, "http://x/y");
    auto j = detail::encode_response(res, {"content-type"});
    EXPECT_TRUE(j.contains("body_base64"));
    auto back = detail::decode_response(nlohmann::json::parse(j.dump()));
    EXPECT_EQ(back.status_code(), 202);
    EXPECT_EQ(back.body(), binary);
    EXPECT_EQ(back.header("Content-Type"), "application/octet-stream");
    EXPECT_FALSE(back.header("Set-Cookie"));
    EXPECT_EQ(back.url(), "http://x/y");
    http::client_response plain(http::status::ok, {}, "héllo", "http://x/");
    EXPECT_EQ(detail::encode_response(plain, {})["body"], "héllo");
}

}  // namespace
}  // namespace keel::process
