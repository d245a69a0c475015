// W3C trace context: what parse_traceparent accepts and refuses (the cases of the
// specification's "traceparent" section), and the ids Keel makes.

#include <gtest/gtest.h>

#include <keel/framework/trace.hpp>
#include <set>
#include <stdexcept>
#include <string>

namespace keel::trace {
namespace {

constexpr const char* example = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

TEST(trace_context, reads_the_specifications_example) {
    auto c = parse_traceparent(example, "congo=t61rcWkgMzE");
    ASSERT_TRUE(c);
    EXPECT_EQ(c->trace.hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
    EXPECT_EQ(c->span.hex(), "00f067aa0ba902b7");
    EXPECT_FALSE(c->parent.valid());
    EXPECT_TRUE(c->sampled);
    EXPECT_EQ(c->state, "congo=t61rcWkgMzE");
    EXPECT_EQ(c->traceparent(), example);
}

TEST(trace_context, reads_the_sampled_flag_alone) {
    auto c = parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
    ASSERT_TRUE(c);
    EXPECT_FALSE(c->sampled);
    // Other flag bits are not ours: only the sampled bit is read and passed on.
    auto d = parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03");
    ASSERT_TRUE(d);
    EXPECT_TRUE(d->sampled);
    EXPECT_TRUE(d->traceparent().ends_with("-01"));
}

TEST(trace_context, refuses_what_the_specification_calls_invalid) {
    for (const char* bad : {
             "",
             "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",      // no flags
             "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",  // v00 is 55 exactly
             "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
             "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  // version ff
             "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  // zero trace id
             "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  // zero parent id
             "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  // upper case
             "00-4bf92f3577b34da6a3ce929d0e0e4736-00F067AA0BA902B7-01",
             "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",  // separators
             "0-04bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
             "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",  // not hex
             "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
             " 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  // padded
         })
        EXPECT_FALSE(parse_traceparent(bad)) << "'" << bad << "'";
}

TEST(trace_context, reads_a_later_version_by_its_first_four_fields) {
    auto c = parse_traceparent(
        "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-adds");
    ASSERT_TRUE(c);
    EXPECT_EQ(c->span.hex(), "00f067aa0ba902b7");
    EXPECT_EQ(c->traceparent(), example);  // sent on as the version Keel speaks
    EXPECT_TRUE(parse_traceparent("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"));
    EXPECT_FALSE(parse_traceparent("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x"));
}

TEST(trace_context, drops_a_tracestate_too_long_or_not_printable) {
    std::string long_state(max_tracestate_bytes + 1, 'a');
    auto c = parse_traceparent(example, long_state);
    ASSERT_TRUE(c);
    EXPECT_EQ(c->state, "");
    EXPECT_EQ(parse_traceparent(example, std::string(max_tracestate_bytes, 'a'))->state.size(),
              max_tracestate_bytes);
    EXPECT_EQ(parse_traceparent(example, "a=b\r\nX-Injected: 1")->state, "");
}

TEST(trace_context, a_child_keeps_the_trace_and_names_its_parent) {
    auto parent = *parse_traceparent(example, "congo=t61rcWkgMzE");
    auto child = child_of(parent);
    EXPECT_EQ(child.trace, parent.trace);
    EXPECT_EQ(child.parent, parent.span);
    EXPECT_NE(child.span, parent.span);
    EXPECT_TRUE(child.span.valid());
    EXPECT_EQ(child.sampled, parent.sampled);
    EXPECT_EQ(child.state, parent.state);
    auto round_trip = parse_traceparent(child.traceparent(), child.state);
    ASSERT_TRUE(round_trip);
    EXPECT_EQ(round_trip->span, child.span);
}

TEST(trace_context, new_ids_are_valid_and_distinct) {
    std::set<std::string> traces, spans;
    for (int i = 0; i < 10'000; ++i) {
        auto root = new_root();
        ASSERT_TRUE(root.valid());
        EXPECT_FALSE(root.parent.valid());
        EXPECT_TRUE(root.sampled);
        traces.insert(root.trace.hex());
        spans.insert(root.span.hex());
    }
    EXPECT_EQ(traces.size(), 10'000u);
    EXPECT_EQ(spans.size(), 10'000u);
}

TEST(trace_context, new_traces_are_sampled_by_their_id_at_the_ratio_set) {
    EXPECT_EQ(root_sampling(), 1.0);
    EXPECT_TRUE(new_root().sampled) << "all of them by default";
    EXPECT_THROW(set_root_sampling(1.5), std::invalid_argument);
    EXPECT_THROW(set_root_sampling(-0.1), std::invalid_argument);

    set_root_sampling(0.25);
    int sampled = 0;
    for (int i = 0; i < 20'000; ++i) {
        auto root = new_root();
        // The decision is the id's: the last 8 bytes below a quarter of 2^64.
        bool below = root.trace.bytes[8] < 0x40;
        EXPECT_EQ(root.sampled, below) << root.trace.hex();
        sampled += root.sampled ? 1 : 0;
        if (::testing::Test::HasFailure()) break;
    }
    EXPECT_GT(sampled, 4'500);
    EXPECT_LT(sampled, 5'500);
    auto unsampled = new_root();
    while (unsampled.sampled) unsampled = new_root();
    EXPECT_FALSE(child_of(unsampled).sampled) << "a child keeps the decision";

    set_root_sampling(0);
    for (int i = 0; i < 1'000; ++i) EXPECT_FALSE(new_root().sampled);
    set_root_sampling(1);
    for (int i = 0; i < 1'000; ++i) EXPECT_TRUE(new_root().sampled);
}

}  // namespace

}  // namespace keel::trace
