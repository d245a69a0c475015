// fuzz_traceparent: the W3C trace context a request names (framework/src/trace.cpp).
//
// Input: the `traceparent` value, then (after the first newline, if any) the `tracestate`
// value. Checked: an accepted context has valid ids and a tracestate within the bound and
// free of control characters; what Keel sends for it (traceparent()) is accepted again
// with the same ids, flag and state; a child keeps the trace and names the span as parent.

#include <cstdint>
#include <keel/framework/trace.hpp>
#include <string_view>

#include "fuzz_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace keel::trace;
    auto text = keel::fuzz::as_text(data, size);
    auto newline = text.find('\n');
    auto parent = text.substr(0, newline);
    auto state = newline == std::string_view::npos ? std::string_view{} : text.substr(newline + 1);

    auto c = parse_traceparent(parent, state);
    if (!c) return 0;
    KEEL_FUZZ_CHECK(c->valid());
    KEEL_FUZZ_CHECK(!c->parent.valid());
    KEEL_FUZZ_CHECK(c->state.size() <= max_tracestate_bytes);
    for (char ch : c->state) KEEL_FUZZ_CHECK(ch >= 0x20 && ch <= 0x7e);
    KEEL_FUZZ_CHECK(c->state.empty() || c->state == state);

    auto sent = c->traceparent();
    KEEL_FUZZ_CHECK(sent.size() == 55);
    auto again = parse_traceparent(sent, c->state);
    KEEL_FUZZ_CHECK(again.has_value());
    KEEL_FUZZ_CHECK(*again == *c);
    // A version-00 field is sent back as it came, but for flag bits other than "sampled".
    if (parent.size() == 55 && parent.starts_with("00-"))
        KEEL_FUZZ_CHECK(sent.substr(0, 53) == parent.substr(0, 53));

    auto child = child_of(*c);
    KEEL_FUZZ_CHECK(child.trace == c->trace);
    KEEL_FUZZ_CHECK(child.parent == c->span);
    KEEL_FUZZ_CHECK(child.span.valid());
    return 0;
}
