// The engine's spans (engine_options::spans): a start continues its caller's trace
// (start_options::trace, kept with the instance in the store), a signal's delivery continues
// the sender's (emit_options::trace, kept with the signal), each attempt of the steps after
// either is its child, and a timer's firing continues the instance's trace. Runs on the
// in-memory store, on Redis and on the cluster (the traces then travel through Redis).

#include <gtest/gtest.h>

#include <keel/framework/trace.hpp>
#include <keel/process/forwarding_store.hpp>
#include <keel/signals/signal.hpp>
#include <keel/test/refusing_span_sink.hpp>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "harness.hpp"

namespace keel::process {
namespace {

using namespace std::chrono_literals;
using test::harness;

struct parcel {
    static constexpr std::string_view model_name = "parcel";
};

struct parcel_signals : signal_group {
    signal<int, parcel> paid{this, "/parcel/:parcel/paid"};
};

// A carrier that fails its first booking.
struct carrier {
    int calls = 0;
    int book() {
        if (++calls == 1) throw std::runtime_error("carrier busy");
        return calls;
    }
};

struct parcel_deps {
    parcel_signals signals;
    carrier ship;
    template <class T>
    T& get() {
        if constexpr (std::is_same_v<T, parcel_signals>)
            return signals;
        else
            return ship;
    }
};

retry_policy quick() {
    retry_policy p;
    p.max_attempts = 3;
    p.initial_backoff = 10ms;
    p.jitter = 0;
    return p;
}

durable<int> send_parcel(context& ctx, ref<parcel>, parcel_signals& signals, carrier& ship) {
    int cents = co_await ctx.wait(signals.paid);
    int booked = co_await ctx.run("book", [&] { return ship.book(); });
    co_await ctx.sleep(1s, "cool down");
    co_await ctx.run("notify", [&] { return booked; });
    co_return cents;
}
inline constexpr auto sending = define<send_parcel>("/parcel/:parcel/send").retry(quick);

struct captured final : trace::span_sink {
    void record(trace::span s) noexcept override { spans.push_back(std::move(s)); }
    std::vector<const trace::span*> named(std::string_view name) const {
        std::vector<const trace::span*> out;
        for (const auto& s : spans)
            if (s.name == name) out.push_back(&s);
        return out;
    }
    std::vector<trace::span> spans;
};

constexpr std::string_view sender = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

// Pays for p-1 with the sender's trace, then runs its send to the end: its result.
template <class Flow>
int pay_and_finish(harness& h, parcel_deps& deps, Flow& flow) {
    signals::emit_options options{.key = "pay-1", .trace = std::string(sender)};
    auto sent = h.sync(deps.signals.paid.emit(ref<parcel>("p-1"), 250, options));
    EXPECT_EQ(sent.reached, 1u);
    h.settle();
    for (int i = 0; i < 5; ++i) h.advance(500ms);
    return *h.sync(flow.wait());
}

// Steps before its wait (they run with the start) and after it (a timer resumes it).
durable<int> hold_parcel(context& ctx, ref<parcel>) {
    co_await ctx.run("reserve", [] { return 1; });
    co_await ctx.sleep(1h, "hold");
    co_return co_await ctx.run("release", [] { return 2; });
}
inline constexpr auto holding = define<hold_parcel>("/parcel/:parcel/hold");

durable<int> pack_parcel(context& ctx, ref<parcel>) {
    co_return co_await ctx.run("pack", [] { return 3; });
}
inline constexpr auto packing = define<pack_parcel>("/parcel/:parcel/pack");

durable<int> box_parcel(context& ctx, ref<parcel> p) {
    co_return co_await ctx.call(packing, p);
}
inline constexpr auto boxing = define<box_parcel>("/parcel/:parcel/box");

// The start, the resumption and each step's attempt ask first, and make no span when refused.
TEST(engine_spans, a_sink_that_admits_nothing_is_asked_and_given_no_span) {
    keel::test::refusing_span_sink sink;
    harness h({.spans = &sink});
    parcel_deps deps;
    h.eng->add(sending, deps);
    auto flow = h.sync(h.eng->start(sending, ref<parcel>("p-1")));
    h.settle();
    EXPECT_EQ(pay_and_finish(h, deps, flow), 250);
    EXPECT_EQ(sink.recorded.load(), 0);
    EXPECT_GE(sink.asked.load(), 5) << "the start, two resumptions and two steps' attempts";
}

TEST(engine_spans, a_flow_continues_the_trace_of_the_signal_that_resumed_it) {
    captured sink;
    harness h({.spans = &sink});
    parcel_deps deps;
    h.eng->add(sending, deps);
    auto flow = h.sync(h.eng->start(sending, ref<parcel>("p-1")));
    h.settle();
    ASSERT_EQ(sink.spans.size(), 1u) << "nothing resumed it yet";
    EXPECT_EQ(sink.spans[0].name, "start /parcel/:parcel/send");

    EXPECT_EQ(pay_and_finish(h, deps, flow), 250);

    auto incoming = *trace::parse_traceparent(sender);
    auto signal = sink.named("signal /parcel/p-1/paid");
    ASSERT_EQ(signal.size(), 1u);
    EXPECT_EQ(signal[0]->context.trace, incoming.trace);
    EXPECT_EQ(signal[0]->context.parent, incoming.span) << "a child of the sender's span";

    auto book = sink.named("step book");
    ASSERT_EQ(book.size(), 2u) << "one span per attempt";
    for (const auto* attempt : book) {
        EXPECT_EQ(attempt->context.trace, incoming.trace);
        EXPECT_EQ(attempt->context.parent, signal[0]->context.span);
    }
    EXPECT_EQ(book[0]->outcome, trace::span::status::error);
    EXPECT_EQ(book[0]->message, "carrier busy");
    EXPECT_EQ(book[1]->outcome, trace::span::status::unset);
    EXPECT_NE(book[0]->context.span, book[1]->context.span);

    auto timer = sink.named("timer cool down");
    ASSERT_EQ(timer.size(), 1u);
    EXPECT_EQ(timer[0]->context.trace, incoming.trace);
    EXPECT_EQ(timer[0]->context.parent, signal[0]->context.span);
    auto notify = sink.named("step notify");
    ASSERT_EQ(notify.size(), 1u);
    EXPECT_EQ(notify[0]->context.parent, timer[0]->context.span);
    for (const auto& s : sink.spans) {
        ASSERT_GE(s.attributes.size(), 2u) << s.name;
        EXPECT_EQ(s.attributes[0].second, trace::span::attribute_value(flow.id())) << s.name;
    }
}

TEST(engine_spans, a_start_continues_its_callers_trace_which_the_instance_keeps_across_a_restart) {
    captured before;
    harness h({.spans = &before});
    h.eng->add(holding);
    auto caller = *trace::parse_traceparent(sender);
    start_options in_request{.trace = caller};
    auto flow = h.sync(h.eng->start(in_request, holding, ref<parcel>("p-3")));
    h.settle();

    auto start = before.named("start /parcel/:parcel/hold");
    ASSERT_EQ(start.size(), 1u);
    EXPECT_EQ(start[0]->context.trace, caller.trace);
    EXPECT_EQ(start[0]->context.parent, caller.span) << "a child of the caller's span";
    EXPECT_EQ(start[0]->attributes[0].second, trace::span::attribute_value(flow.id()));
    auto reserve = before.named("step reserve");
    ASSERT_EQ(reserve.size(), 1u);
    EXPECT_EQ(reserve[0]->context.parent, start[0]->context.span);
    EXPECT_EQ(h.snapshot(flow.id()).trace, start[0]->context.traceparent()) << "kept in the store";

    // Another worker takes the instance when its timer falls due: it never saw the start.
    h.eng.reset();
    h.settle();
    captured after;
    h.eng.emplace(h.io.get_executor(), h.store, h.clock,
                  engine_options{.worker = "w2", .seed = 7, .spans = &after});
    h.eng->add(holding);
    h.eng->run();
    h.settle();
    for (int i = 0; i < 4; ++i) h.advance(20min);
    EXPECT_EQ(h.status(flow.id()), instance_status::completed);
    auto timer = after.named("timer hold");
    ASSERT_EQ(timer.size(), 1u);
    EXPECT_EQ(timer[0]->context.trace, caller.trace);
    EXPECT_EQ(timer[0]->context.parent, start[0]->context.span);
    auto release = after.named("step release");
    ASSERT_EQ(release.size(), 1u);
    EXPECT_EQ(release[0]->context.parent, timer[0]->context.span);
}

TEST(engine_spans, a_child_starts_in_its_parents_trace_and_untraced_starts_begin_one) {
    captured sink;
    harness h({.spans = &sink});
    h.eng->add(packing);
    h.eng->add(boxing);
    auto flow = h.sync(h.eng->start(boxing, ref<parcel>("p-4")));
    h.settle();
    EXPECT_EQ(*h.sync(flow.wait()), 3);
    auto parent = sink.named("start /parcel/:parcel/box");
    auto child = sink.named("start /parcel/:parcel/pack");
    ASSERT_EQ(parent.size(), 1u);
    ASSERT_EQ(child.size(), 1u);
    EXPECT_FALSE(parent[0]->context.parent.valid()) << "no caller: a new trace";
    EXPECT_EQ(child[0]->context.trace, parent[0]->context.trace);
    EXPECT_EQ(child[0]->context.parent, parent[0]->context.span);
    auto pack = sink.named("step pack");
    ASSERT_EQ(pack.size(), 1u);
    EXPECT_EQ(pack[0]->context.parent, child[0]->context.span);
}

TEST(engine_spans, without_a_sink_no_trace_is_kept) {
    harness h;
    h.eng->add(holding);
    auto caller = *trace::parse_traceparent(sender);
    start_options in_request{.trace = caller};
    auto flow = h.sync(h.eng->start(in_request, holding, ref<parcel>("p-5")));
    h.settle();
    EXPECT_EQ(h.snapshot(flow.id()).trace, "");
}

// The trace each emit hands the store with its signal.
struct emitted_traces final : forwarding_store {
    using forwarding_store::forwarding_store;
    std::vector<std::string> traces;
    asio::awaitable<fan_out_result> fan_out(fan_out_request req) override {
        traces.push_back(req.signal.trace);
        co_return co_await forwarding_store::fan_out(std::move(req));
    }
};

// A signal is stored with its sender's trace only where spans are recorded: without a sink
// nothing would read it, and it would cost every emit a JSON member written and read back.
TEST(engine_spans, a_signal_is_stored_with_its_trace_only_where_spans_are_recorded) {
    for (bool recording : {false, true}) {
        captured sink;
        harness h;
        h.eng.reset();
        emitted_traces view(h.store);
        parcel_deps deps;
        engine worker(h.io.get_executor(), view, h.clock,
                      engine_options{.worker = "w1", .spans = recording ? &sink : nullptr});
        worker.add(sending, deps);
        worker.run();
        h.sync(worker.start(sending, ref<parcel>("p-7")));
        h.settle();
        signals::emit_options options{.key = "pay-7", .trace = std::string(sender)};
        EXPECT_EQ(h.sync(deps.signals.paid.emit(ref<parcel>("p-7"), 1, options)).reached, 1u);
        EXPECT_EQ(view.traces, std::vector<std::string>{recording ? std::string(sender) : ""})
            << (recording ? "with" : "without") << " a sink";
        worker.stop();
        h.settle();
    }
}

TEST(engine_spans, a_signal_without_a_trace_continues_the_instances) {
    captured sink;
    harness h({.spans = &sink});
    parcel_deps deps;
    h.eng->add(sending, deps);
    auto flow = h.sync(h.eng->start(sending, ref<parcel>("p-2")));
    h.settle();
    auto sent = h.sync(deps.signals.paid.emit(ref<parcel>("p-2"), 5));
    EXPECT_EQ(sent.reached, 1u);
    h.settle();
    for (int i = 0; i < 5; ++i) h.advance(500ms);
    EXPECT_EQ(*h.sync(flow.wait()), 5);
    auto signal = sink.named("signal /parcel/p-2/paid");
    ASSERT_EQ(signal.size(), 1u);
    EXPECT_TRUE(signal[0]->context.valid());
    auto start = sink.named("start /parcel/:parcel/send");
    ASSERT_EQ(start.size(), 1u);
    EXPECT_EQ(signal[0]->context.parent, start[0]->context.span) << "the start's trace";
    auto notify = sink.named("step notify");
    ASSERT_EQ(notify.size(), 1u);
    EXPECT_EQ(notify[0]->context.trace, signal[0]->context.trace);
}

}  // namespace
}  // namespace keel::process
