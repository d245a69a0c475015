#include <atomic>
#include <cmath>
#include <keel/framework/trace.hpp>
#include <random>
#include <stdexcept>

namespace keel::trace {

namespace {

constexpr char hex_digits[] = "0123456789abcdef";

template <std::size_t N>
char* write_hex(char* out, const std::array<std::uint8_t, N>& bytes) {
    for (auto b : bytes) {
        *out++ = hex_digits[b >> 4];
        *out++ = hex_digits[b & 0xf];
    }
    return out;
}

template <std::size_t N>
std::string to_hex(const std::array<std::uint8_t, N>& bytes) {
    std::string out(N * 2, '0');
    write_hex(out.data(), bytes);
    return out;
}

int lower_hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;  // upper case is invalid in traceparent
}

template <std::size_t N>
bool from_hex(std::string_view text, std::array<std::uint8_t, N>& out) {
    if (text.size() != N * 2) return false;
    for (std::size_t i = 0; i < N; ++i) {
        int hi = lower_hex(text[2 * i]), lo = lower_hex(text[2 * i + 1]);
        if (hi < 0 || lo < 0) return false;
        out[i] = static_cast<std::uint8_t>(hi << 4 | lo);
    }
    return true;
}

template <std::size_t N>
bool any_set(const std::array<std::uint8_t, N>& bytes) {
    for (auto b : bytes)
        if (b != 0) return true;
    return false;
}

// Random ids: a per-thread generator seeded from the system's entropy source. Ids must be
// unique, not secret (the specification asks for randomness in the trace id's right half).
std::mt19937_64& generator() {
    thread_local std::mt19937_64 engine{[] {
        std::random_device device;
        return (static_cast<std::uint64_t>(device()) << 32) ^ device();
    }()};
    return engine;
}

template <std::size_t N>
void fill_random(std::array<std::uint8_t, N>& bytes) {
    do {
        for (std::size_t i = 0; i < N; i += 8) {
            auto bits = generator()();
            for (std::size_t j = 0; j < 8 && i + j < N; ++j)
                bytes[i + j] = static_cast<std::uint8_t>(bits >> (8 * j));
        }
    } while (!any_set(bytes));
}

bool tracestate_acceptable(std::string_view state) {
    if (state.size() > max_tracestate_bytes) return false;
    for (char c : state)
        if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e)
            return false;
    return true;
}

}  // namespace

bool trace_id::valid() const {
    return any_set(bytes);
}
std::string trace_id::hex() const {
    return to_hex(bytes);
}
bool span_id::valid() const {
    return any_set(bytes);
}
std::string span_id::hex() const {
    return to_hex(bytes);
}

std::string span_context::traceparent() const {
    std::string out(55, '-');  // "00-" trace "-" span "-" flags
    out[0] = out[1] = '0';
    write_hex(out.data() + 3, trace.bytes);
    write_hex(out.data() + 36, span.bytes);
    out[53] = '0';
    out[54] = sampled ? '1' : '0';
    return out;
}

std::optional<span_context> parse_traceparent(std::string_view text, std::string_view state) {
    // version "-" trace-id "-" parent-id "-" flags: 2 + 1 + 32 + 1 + 16 + 1 + 2 = 55
    constexpr std::size_t length = 55;
    if (text.size() < length) return std::nullopt;
    std::array<std::uint8_t, 1> version{};
    if (!from_hex(text.substr(0, 2), version) || version[0] == 0xff) return std::nullopt;
    if (version[0] == 0 && text.size() != length) return std::nullopt;
    if (text.size() > length && text[length] != '-') return std::nullopt;
    if (text[2] != '-' || text[35] != '-' || text[52] != '-') return std::nullopt;
    span_context out;
    std::array<std::uint8_t, 1> flags{};
    if (!from_hex(text.substr(3, 32), out.trace.bytes) ||
        !from_hex(text.substr(36, 16), out.span.bytes) || !from_hex(text.substr(53, 2), flags))
        return std::nullopt;
    if (!out.trace.valid() || !out.span.valid()) return std::nullopt;
    out.sampled = (flags[0] & 0x01) != 0;
    if (tracestate_acceptable(state)) out.state = std::string(state);
    return out;
}

span_context child_of(const span_context& parent) {
    span_context out = parent;
    out.parent = parent.span;
    fill_random(out.span.bytes);
    return out;
}

namespace {

// Traces sampled: those whose id's last 8 bytes fall below this (2^64 - 1 with a ratio of 1).
std::atomic<std::uint64_t> sampled_below{~std::uint64_t{0}};
std::atomic<double> sampling_ratio{1.0};

bool sampled(const trace_id& id) {
    std::uint64_t low = 0;
    for (std::size_t i = 8; i < 16; ++i) low = (low << 8) | id.bytes[i];
    auto below = sampled_below.load(std::memory_order_relaxed);
    return below == ~std::uint64_t{0} || low < below;
}

}  // namespace

span_context new_root() {
    span_context out;
    fill_random(out.trace.bytes);
    fill_random(out.span.bytes);
    out.sampled = sampled(out.trace);
    return out;
}

void set_root_sampling(double ratio) {
    if (!(ratio >= 0.0 && ratio <= 1.0))
        throw std::invalid_argument("a sampling ratio is from 0 to 1");
    // Below 1, ratio × 2^64 is below 2^64 and converts without overflow.
    auto below =
        ratio >= 1.0 ? ~std::uint64_t{0} : static_cast<std::uint64_t>(std::ldexp(ratio, 64));
    sampled_below.store(below, std::memory_order_relaxed);
    sampling_ratio.store(ratio, std::memory_order_relaxed);
}

double root_sampling() {
    return sampling_ratio.load(std::memory_order_relaxed);
}

}  // namespace keel::trace
