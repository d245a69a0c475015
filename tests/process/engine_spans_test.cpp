// The engine's spans (engine_options::spans): a signal's delivery continues the sender's trace
// (emit_options::trace, kept with the signal in the store), each attempt of the steps after it
// is a child of the delivery, and a timer's firing continues the instance's trace. Runs on the
// in-memory store, on Redis and on the cluster (the signal's trace then travels through Redis).

#include <gtest/gtest.h>

#include <keel/framework/trace.hpp>
#include <keel/signals/signal.hpp>
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

TEST(engine_spans, a_flow_continues_the_trace_of_the_signal_that_resumed_it) {
    captured sink;
    harness h({.spans = &sink});
    parcel_deps deps;
    h.eng->add(sending, deps);
    auto flow = h.sync(h.eng->start(sending, ref<parcel>("p-1")));
    h.settle();
    EXPECT_TRUE(sink.spans.empty()) << "nothing resumed it yet";

    signals::emit_options options{.key = "pay-1", .trace = std::string(sender)};
    auto sent = h.sync(deps.signals.paid.emit(ref<parcel>("p-1"), 250, options));
    EXPECT_EQ(sent.reached, 1u);
    h.settle();
    for (int i = 0; i < 5; ++i) h.advance(500ms);
    EXPECT_EQ(*h.sync(flow.wait()), 250);

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

TEST(engine_spans, a_signal_without_a_trace_starts_one_and_no_sink_records_nothing) {
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
    EXPECT_FALSE(signal[0]->context.parent.valid()) << "a new trace";
    auto notify = sink.named("step notify");
    ASSERT_EQ(notify.size(), 1u);
    EXPECT_EQ(notify[0]->context.trace, signal[0]->context.trace);
}

}  // namespace
}  // namespace keel::process
