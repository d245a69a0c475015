// fuzz_otlp_protobuf: the OTLP/protobuf encoding of spans whose text comes from requests
// (http/src/client/otlp_protobuf.cpp). Its nested messages carry lengths computed before
// the bytes are written, and its strings must be UTF-8, or a collector refuses the batch.
//
// Input: a flags byte (bit 0: the span has a parent; bits 1-2: its kind; bits 3-4: its
// status; bits 5-7: how many spans the batch repeats it in, 1 to 8), then text fields split
// by \xff: the name, the tracestate, the status message, then attribute keys and values in
// turn (a value that is all digits, with an optional '-', is an integer attribute).
// Checked: the body reads to its end with every length in bounds (the tests' reader, written
// from opentelemetry-proto's field numbers); every string read is UTF-8; when every input
// text is UTF-8, the body says what the JSON encoding says, field for field.

#include <charconv>
#include <cstdint>
#include <keel/http/otlp.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.hpp"
#include "otlp_protobuf_reader.hpp"

namespace {

std::vector<std::string_view> split(std::string_view text) {
    std::vector<std::string_view> out;
    for (std::size_t at = 0;;) {
        auto end = text.find('\xff', at);
        out.push_back(text.substr(at, end == std::string_view::npos ? end : end - at));
        if (end == std::string_view::npos) return out;
        at = end + 1;
    }
}

bool is_utf8(std::string_view s) {
    try {
        static_cast<void>(nlohmann::json(std::string(s)).dump());
        return true;
    } catch (const nlohmann::json::type_error&) {
        return false;
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace keel;
    if (size == 0) return 0;
    const auto flags = data[0];
    auto fields = split(fuzz::as_text(data + 1, size - 1));
    auto field = [&](std::size_t i) { return i < fields.size() ? fields[i] : std::string_view{}; };

    trace::span s;
    auto root =
        *trace::parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
    s.context = (flags & 1) ? trace::child_of(root) : trace::new_root();
    s.context.state = std::string(field(1));
    s.name = std::string(field(0));
    s.what = static_cast<trace::span::kind>(1 + ((flags >> 1) & 3) % 3);
    s.outcome = static_cast<trace::span::status>(((flags >> 3) & 3) % 3);
    s.message = std::string(field(2));
    s.start =
        std::chrono::system_clock::time_point{std::chrono::nanoseconds{1'718'000'000'000'000'000}};
    s.end = s.start + std::chrono::milliseconds(size);
    bool all_utf8 = is_utf8(field(0)) && is_utf8(field(1)) && is_utf8(field(2));
    for (std::size_t i = 3; i < fields.size(); i += 2) {
        auto key = fields[i];
        auto value = field(i + 1);
        std::int64_t number = 0;
        auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), number);
        if (!value.empty() && ec == std::errc() && end == value.data() + value.size())
            s.attributes.emplace_back(std::string(key), number);
        else
            s.attributes.emplace_back(std::string(key), std::string(value));
        all_utf8 = all_utf8 && is_utf8(key) && is_utf8(value);
    }
    std::vector<trace::span> spans(1 + (flags >> 5), s);

    auto body = http::encode_otlp_protobuf(spans, "keel");
    nlohmann::json read;
    try {
        read = http::testing::otlp_protobuf::request(body);
    } catch (const std::exception&) {
        fuzz::invariant_broken("the protobuf body reads to its end", __FILE__, __LINE__);
    }
    try {
        static_cast<void>(read.dump());  // strict: throws on a string that is not UTF-8
    } catch (const nlohmann::json::type_error&) {
        fuzz::invariant_broken("every string in the protobuf body is UTF-8", __FILE__, __LINE__);
    }
    const auto& got = read["resourceSpans"][0]["scopeSpans"][0]["spans"];
    KEEL_FUZZ_CHECK(got.size() == spans.size());
    if (all_utf8)
        KEEL_FUZZ_CHECK(read == nlohmann::json::parse(http::encode_otlp_json(spans, "keel")));
    return 0;
}
