// OTLP/protobuf: an ExportTraceServiceRequest in protobuf's binary wire format, written by
// hand from opentelemetry-proto (collector/trace/v1, trace/v1, common/v1, resource/v1).
// Each nested message is preceded by its length, so every size is computed before the
// bytes are written: two walks over the spans, no scratch buffers.

#include <array>
#include <cstdint>
#include <cstring>
#include <keel/http/otlp.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace keel::http {

namespace {

// The field numbers Keel writes.
namespace field {
constexpr std::uint32_t resource_spans = 1;  // ExportTraceServiceRequest
constexpr std::uint32_t resource = 1;        // ResourceSpans
constexpr std::uint32_t scope_spans = 2;
constexpr std::uint32_t resource_attributes = 1;  // Resource
constexpr std::uint32_t scope = 1;                // ScopeSpans
constexpr std::uint32_t spans = 2;
constexpr std::uint32_t scope_name = 1;  // InstrumentationScope
constexpr std::uint32_t trace_id = 1;    // Span
constexpr std::uint32_t span_id = 2;
constexpr std::uint32_t trace_state = 3;
constexpr std::uint32_t parent_span_id = 4;
constexpr std::uint32_t name = 5;
constexpr std::uint32_t kind = 6;
constexpr std::uint32_t start_time = 7;
constexpr std::uint32_t end_time = 8;
constexpr std::uint32_t attributes = 9;
constexpr std::uint32_t status = 15;
constexpr std::uint32_t status_message = 2;  // Status
constexpr std::uint32_t status_code = 3;
constexpr std::uint32_t key = 1;  // KeyValue
constexpr std::uint32_t value = 2;
constexpr std::uint32_t string_value = 1;  // AnyValue
constexpr std::uint32_t bool_value = 2;
constexpr std::uint32_t int_value = 3;
}  // namespace field

enum class wire : std::uint8_t { varint = 0, fixed64 = 1, length = 2 };

constexpr std::string_view scope_name = "keel";
constexpr std::string_view service_name_key = "service.name";

std::size_t varint_size(std::uint64_t v) {
    std::size_t n = 1;
    for (; v >= 0x80; v >>= 7) ++n;
    return n;
}

void put_varint(std::string& out, std::uint64_t v) {
    for (; v >= 0x80; v >>= 7) out += static_cast<char>((v & 0x7f) | 0x80);
    out += static_cast<char>(v);
}

std::uint64_t tag(std::uint32_t number, wire type) {
    return (std::uint64_t{number} << 3) | static_cast<std::uint8_t>(type);
}

void put_tag(std::string& out, std::uint32_t number, wire type) {
    put_varint(out, tag(number, type));
}

// A length-delimited field of `length` bytes, tag and length included.
std::size_t field_size(std::uint32_t number, std::size_t length) {
    return varint_size(tag(number, wire::length)) + varint_size(length) + length;
}

void put_length(std::string& out, std::uint32_t number, std::size_t length) {
    put_tag(out, number, wire::length);
    put_varint(out, length);
}

// Protobuf strings must be UTF-8 (a collector refuses the whole request otherwise), and span
// text comes from requests: each byte that does not begin a well-formed sequence is written
// as U+FFFD, as the JSON encoding does.
constexpr std::string_view replacement = "\xEF\xBF\xBD";

// The length of the well-formed UTF-8 sequence at the start of `s` (Unicode table 3-7), or
// 0 when there is none.
std::size_t utf8_sequence(std::string_view s) {
    auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
    auto b0 = byte(0);
    if (b0 < 0x80) return 1;
    std::size_t n = b0 >= 0xC2 && b0 <= 0xDF   ? 2
                    : b0 >= 0xE0 && b0 <= 0xEF ? 3
                    : b0 >= 0xF0 && b0 <= 0xF4 ? 4
                                               : 0;
    if (n == 0 || s.size() < n) return 0;
    unsigned char low = 0x80, high = 0xBF;  // the second byte's range
    if (b0 == 0xE0) low = 0xA0;
    if (b0 == 0xED) high = 0x9F;  // no surrogates
    if (b0 == 0xF0) low = 0x90;
    if (b0 == 0xF4) high = 0x8F;  // nothing above U+10FFFF
    if (byte(1) < low || byte(1) > high) return 0;
    for (std::size_t i = 2; i < n; ++i)
        if (byte(i) < 0x80 || byte(i) > 0xBF) return 0;
    return n;
}

// Calls `piece` with the text to write for `s`, in order.
template <class Piece>
void each_utf8_piece(std::string_view s, Piece piece) {
    std::size_t run = 0;  // the start of well-formed text not yet given
    std::size_t i = 0;
    while (i < s.size()) {
        if (static_cast<unsigned char>(s[i]) < 0x80) {
            ++i;
            continue;
        }
        if (auto n = utf8_sequence(s.substr(i))) {
            i += n;
            continue;
        }
        piece(s.substr(run, i - run));
        piece(replacement);
        run = ++i;
    }
    piece(s.substr(run));
}

// Most span text is ASCII: checked eight bytes at a time, it is written as it is.
bool is_ascii(std::string_view s) {
    std::size_t i = 0;
    for (; i + 8 <= s.size(); i += 8) {
        std::uint64_t word;
        std::memcpy(&word, s.data() + i, 8);
        if (word & 0x8080808080808080u) return false;
    }
    for (; i < s.size(); ++i)
        if (static_cast<unsigned char>(s[i]) >= 0x80) return false;
    return true;
}

std::size_t utf8_size(std::string_view s) {
    if (is_ascii(s)) return s.size();
    std::size_t size = 0;
    each_utf8_piece(s, [&](std::string_view piece) { size += piece.size(); });
    return size;
}

std::size_t string_field_size(std::uint32_t number, std::string_view s) {
    return field_size(number, utf8_size(s));
}

void put_string(std::string& out, std::uint32_t number, std::string_view s) {
    if (is_ascii(s)) {
        put_length(out, number, s.size());
        out += s;
        return;
    }
    put_length(out, number, utf8_size(s));
    each_utf8_piece(s, [&](std::string_view piece) { out += piece; });
}

template <std::size_t N>
void put_bytes(std::string& out, std::uint32_t number, const std::array<std::uint8_t, N>& b) {
    put_length(out, number, N);
    out.append(reinterpret_cast<const char*>(b.data()), N);
}

void put_fixed64(std::string& out, std::uint32_t number, std::uint64_t v) {
    put_tag(out, number, wire::fixed64);
    for (int i = 0; i < 8; ++i, v >>= 8) out += static_cast<char>(v & 0xff);
}

std::uint64_t unix_nanos(std::chrono::system_clock::time_point t) {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count());
}

// AnyValue's content.
std::size_t value_size(const trace::span::attribute_value& v) {
    if (auto* text = std::get_if<std::string>(&v))
        return string_field_size(field::string_value, *text);
    if (auto* number = std::get_if<std::int64_t>(&v))
        return 1 + varint_size(static_cast<std::uint64_t>(*number));
    return 2;  // bool
}

void put_value(std::string& out, const trace::span::attribute_value& v) {
    if (auto* text = std::get_if<std::string>(&v)) {
        put_string(out, field::string_value, *text);
    } else if (auto* number = std::get_if<std::int64_t>(&v)) {
        put_tag(out, field::int_value, wire::varint);
        put_varint(out, static_cast<std::uint64_t>(*number));  // int64: two's complement
    } else {
        put_tag(out, field::bool_value, wire::varint);
        put_varint(out, std::get<bool>(v) ? 1 : 0);
    }
}

// KeyValue's content.
std::size_t attribute_size(std::string_view key, const trace::span::attribute_value& v) {
    return string_field_size(field::key, key) + field_size(field::value, value_size(v));
}

void put_attribute(std::string& out, std::uint32_t number, std::string_view key,
                   const trace::span::attribute_value& v) {
    put_length(out, number, attribute_size(key, v));
    put_string(out, field::key, key);
    put_length(out, field::value, value_size(v));
    put_value(out, v);
}

// Status's content; zero for the default status, which is then left out.
std::size_t status_size(const trace::span& s) {
    std::size_t size = 0;
    if (!s.message.empty()) size += string_field_size(field::status_message, s.message);
    if (s.outcome != trace::span::status::unset) size += 2;
    return size;
}

// Span's content.
std::size_t span_size(const trace::span& s) {
    std::size_t size = field_size(field::trace_id, 16) + field_size(field::span_id, 8);
    if (!s.context.state.empty()) size += string_field_size(field::trace_state, s.context.state);
    if (s.context.parent.valid()) size += field_size(field::parent_span_id, 8);
    if (!s.name.empty()) size += string_field_size(field::name, s.name);
    size += 2;            // kind
    size += 2 * (1 + 8);  // start and end
    for (const auto& [key, value] : s.attributes)
        size += field_size(field::attributes, attribute_size(key, value));
    if (auto status = status_size(s)) size += field_size(field::status, status);
    return size;
}

void put_span(std::string& out, const trace::span& s, std::size_t size) {
    put_length(out, field::spans, size);
    put_bytes(out, field::trace_id, s.context.trace.bytes);
    put_bytes(out, field::span_id, s.context.span.bytes);
    if (!s.context.state.empty()) put_string(out, field::trace_state, s.context.state);
    if (s.context.parent.valid()) put_bytes(out, field::parent_span_id, s.context.parent.bytes);
    if (!s.name.empty()) put_string(out, field::name, s.name);
    put_tag(out, field::kind, wire::varint);
    put_varint(out, static_cast<std::uint8_t>(s.what));
    put_fixed64(out, field::start_time, unix_nanos(s.start));
    put_fixed64(out, field::end_time, unix_nanos(s.end));
    for (const auto& [key, value] : s.attributes) put_attribute(out, field::attributes, key, value);
    if (auto status = status_size(s)) {
        put_length(out, field::status, status);
        if (!s.message.empty()) put_string(out, field::status_message, s.message);
        if (s.outcome != trace::span::status::unset) {
            put_tag(out, field::status_code, wire::varint);
            put_varint(out, static_cast<std::uint8_t>(s.outcome));
        }
    }
}

}  // namespace

std::string encode_otlp_protobuf(std::span<const trace::span> spans,
                                 std::string_view service_name) {
    std::vector<std::size_t> sizes;
    sizes.reserve(spans.size());
    auto scope = string_field_size(field::scope_name, scope_name);
    auto scope_spans = field_size(field::scope, scope);
    for (const auto& s : spans) {
        sizes.push_back(span_size(s));
        scope_spans += field_size(field::spans, sizes.back());
    }
    const trace::span::attribute_value name{std::string(service_name)};
    auto resource = field_size(field::resource_attributes, attribute_size(service_name_key, name));
    auto resource_spans =
        field_size(field::resource, resource) + field_size(field::scope_spans, scope_spans);

    std::string out;
    out.reserve(field_size(field::resource_spans, resource_spans));
    put_length(out, field::resource_spans, resource_spans);
    put_length(out, field::resource, resource);
    put_attribute(out, field::resource_attributes, service_name_key, name);
    put_length(out, field::scope_spans, scope_spans);
    put_length(out, field::scope, scope);
    put_string(out, field::scope_name, scope_name);
    for (std::size_t i = 0; i < spans.size(); ++i) put_span(out, spans[i], sizes[i]);
    return out;
}

}  // namespace keel::http
