#pragma once

// Reads an OTLP/protobuf ExportTraceServiceRequest into the shape of its OTLP/JSON
// encoding, so that the tests' collector checks both encodings with the same assertions.
// Written from opentelemetry-proto's field numbers, apart from the encoder: a field the
// encoder numbers wrongly is missing or misread here. Malformed input throws
// std::runtime_error (the collector answers 400).

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>

namespace keel::http::testing {

class protobuf_reader {
  public:
    explicit protobuf_reader(std::string_view bytes) : rest_(bytes) {}

    bool done() const { return rest_.empty(); }

    // The next field's number and wire type.
    std::pair<std::uint32_t, int> next_tag() {
        auto t = varint();
        if ((t >> 3) == 0) throw std::runtime_error("protobuf: field number 0");
        return {static_cast<std::uint32_t>(t >> 3), static_cast<int>(t & 7)};
    }
    std::uint64_t varint() {
        std::uint64_t v = 0;
        for (int shift = 0; shift < 64; shift += 7) {
            if (rest_.empty()) throw std::runtime_error("protobuf: truncated varint");
            auto b = static_cast<unsigned char>(rest_.front());
            rest_.remove_prefix(1);
            v |= std::uint64_t{b & 0x7fu} << shift;
            if (b < 0x80) return v;
        }
        throw std::runtime_error("protobuf: varint longer than 10 bytes");
    }
    std::uint64_t fixed64() {
        auto b = take(8);
        std::uint64_t v = 0;
        for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[i]);
        return v;
    }
    std::string_view length_delimited() { return take(varint()); }
    void skip(int wire_type) {
        switch (wire_type) {
            case 0:
                varint();
                return;
            case 1:
                take(8);
                return;
            case 2:
                length_delimited();
                return;
            case 5:
                take(4);
                return;
            default:
                throw std::runtime_error("protobuf: unknown wire type");
        }
    }

  private:
    std::string_view take(std::uint64_t n) {
        if (n > rest_.size()) throw std::runtime_error("protobuf: field longer than its message");
        auto out = rest_.substr(0, n);
        rest_.remove_prefix(n);
        return out;
    }
    std::string_view rest_;
};

namespace otlp_protobuf {

inline std::string hex(std::string_view bytes) {
    std::string out;
    char two[3];
    for (unsigned char b : bytes) {
        std::snprintf(two, sizeof two, "%02x", b);
        out += two;
    }
    return out;
}

// AnyValue: string_value 1, bool_value 2, int_value 3.
inline nlohmann::json any_value(std::string_view bytes) {
    protobuf_reader r(bytes);
    nlohmann::json v = nlohmann::json::object();
    while (!r.done()) {
        auto [number, type] = r.next_tag();
        if (number == 1 && type == 2)
            v["stringValue"] = std::string(r.length_delimited());
        else if (number == 2 && type == 0)
            v["boolValue"] = r.varint() != 0;
        else if (number == 3 && type == 0)
            v["intValue"] = std::to_string(static_cast<std::int64_t>(r.varint()));
        else
            r.skip(type);
    }
    return v;
}

// KeyValue: key 1, value 2.
inline nlohmann::json key_value(std::string_view bytes) {
    protobuf_reader r(bytes);
    nlohmann::json kv = nlohmann::json::object();
    while (!r.done()) {
        auto [number, type] = r.next_tag();
        if (number == 1 && type == 2)
            kv["key"] = std::string(r.length_delimited());
        else if (number == 2 && type == 2)
            kv["value"] = any_value(r.length_delimited());
        else
            r.skip(type);
    }
    return kv;
}

// Status: message 2, code 3. An absent status is code 0, as in the JSON encoding.
inline nlohmann::json status(std::string_view bytes) {
    protobuf_reader r(bytes);
    nlohmann::json s{{"code", 0}};
    while (!r.done()) {
        auto [number, type] = r.next_tag();
        if (number == 2 && type == 2)
            s["message"] = std::string(r.length_delimited());
        else if (number == 3 && type == 0)
            s["code"] = r.varint();
        else
            r.skip(type);
    }
    return s;
}

// Span: trace_id 1, span_id 2, trace_state 3, parent_span_id 4, name 5, kind 6,
// start_time_unix_nano 7, end_time_unix_nano 8, attributes 9, status 15.
inline nlohmann::json span(std::string_view bytes) {
    protobuf_reader r(bytes);
    nlohmann::json s{
        {"name", ""}, {"attributes", nlohmann::json::array()}, {"status", {{"code", 0}}}};
    while (!r.done()) {
        auto [number, type] = r.next_tag();
        if (number == 1 && type == 2)
            s["traceId"] = hex(r.length_delimited());
        else if (number == 2 && type == 2)
            s["spanId"] = hex(r.length_delimited());
        else if (number == 3 && type == 2)
            s["traceState"] = std::string(r.length_delimited());
        else if (number == 4 && type == 2)
            s["parentSpanId"] = hex(r.length_delimited());
        else if (number == 5 && type == 2)
            s["name"] = std::string(r.length_delimited());
        else if (number == 6 && type == 0)
            s["kind"] = r.varint();
        else if (number == 7 && type == 1)
            s["startTimeUnixNano"] = std::to_string(r.fixed64());
        else if (number == 8 && type == 1)
            s["endTimeUnixNano"] = std::to_string(r.fixed64());
        else if (number == 9 && type == 2)
            s["attributes"].push_back(key_value(r.length_delimited()));
        else if (number == 15 && type == 2)
            s["status"] = status(r.length_delimited());
        else
            r.skip(type);
    }
    return s;
}

// A repeated message field `wanted` of a message, each read by `read`, appended to `out`.
template <class Read>
void each(std::string_view message, std::uint32_t wanted, nlohmann::json& out, Read read) {
    protobuf_reader r(message);
    while (!r.done()) {
        auto [number, type] = r.next_tag();
        if (number == wanted && type == 2)
            out.push_back(read(r.length_delimited()));
        else
            r.skip(type);
    }
}

// InstrumentationScope: name 1.
inline nlohmann::json scope(std::string_view bytes) {
    protobuf_reader r(bytes);
    nlohmann::json s = nlohmann::json::object();
    while (!r.done()) {
        auto [number, type] = r.next_tag();
        if (number == 1 && type == 2)
            s["name"] = std::string(r.length_delimited());
        else
            r.skip(type);
    }
    return s;
}

// ScopeSpans: scope 1, spans 2.
inline nlohmann::json scope_spans(std::string_view bytes) {
    nlohmann::json out{{"spans", nlohmann::json::array()}};
    protobuf_reader r(bytes);
    while (!r.done()) {
        auto [number, type] = r.next_tag();
        if (number == 1 && type == 2)
            out["scope"] = scope(r.length_delimited());
        else if (number == 2 && type == 2)
            out["spans"].push_back(span(r.length_delimited()));
        else
            r.skip(type);
    }
    return out;
}

// ResourceSpans: resource 1 (Resource: attributes 1), scope_spans 2.
inline nlohmann::json resource_spans(std::string_view bytes) {
    nlohmann::json out{{"resource", {{"attributes", nlohmann::json::array()}}},
                       {"scopeSpans", nlohmann::json::array()}};
    protobuf_reader r(bytes);
    while (!r.done()) {
        auto [number, type] = r.next_tag();
        if (number == 1 && type == 2)
            each(r.length_delimited(), 1, out["resource"]["attributes"], key_value);
        else if (number == 2 && type == 2)
            out["scopeSpans"].push_back(scope_spans(r.length_delimited()));
        else
            r.skip(type);
    }
    return out;
}

// ExportTraceServiceRequest: resource_spans 1.
inline nlohmann::json request(std::string_view bytes) {
    nlohmann::json out{{"resourceSpans", nlohmann::json::array()}};
    each(bytes, 1, out["resourceSpans"], resource_spans);
    return out;
}

}  // namespace otlp_protobuf

}  // namespace keel::http::testing
