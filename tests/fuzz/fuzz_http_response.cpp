// fuzz_http_response: the HTTP client's response reader (http/src/client/response_reader.hpp)
// on bytes from a server, as a hostile one could send them.
//
// Input: byte 0 picks the request (bit 0: HEAD) and how the bytes arrive (the other bits
// seed the sizes of the pieces); byte 1 the response limit (64 bytes to 16 KiB) and byte 2
// the header limit (32 bytes to 8 KiB); the rest is what the server sends, followed by the
// server closing the connection. Checked: the reader ends done or failed once the close is
// fed, never still reading; the verdict, the error's kind, the status, the fields, the body
// and keep-alive are the same whether the bytes arrive at once or in pieces; a failure is
// protocol or too_large with a message; a response read whole stays within the response
// limit (header and body, interim responses included), a HEAD response has no body, and a
// body announced by one Content-Length has exactly that length.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "../../http/src/client/response_reader.hpp"
#include "fuzz_check.hpp"

namespace {

using namespace keel::http;
using detail::response_reader;

struct outcome {
    response_reader::state state;
    std::optional<client_error> error;
    std::optional<client_response> response;
    bool keep_alive = false;
    std::size_t received = 0;
};

outcome read(std::string_view bytes, detail::response_limits limits, bool head,
             std::uint32_t seed) {
    response_reader reader(limits, head);
    std::uint32_t x = seed * 2654435761u + 1;
    while (!bytes.empty() && reader.current() == response_reader::state::reading) {
        std::size_t n = bytes.size();
        if (seed != 0) {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            n = std::min<std::size_t>(bytes.size(), 1 + x % 97);
        }
        reader.feed(bytes.substr(0, n));
        bytes.remove_prefix(n);
    }
    // What arrives after a verdict is fed too: a done response followed by bytes fails.
    if (!bytes.empty()) reader.feed(bytes);
    reader.feed_eof();
    outcome out{reader.current()};
    out.received = reader.received();
    if (out.state == response_reader::state::failed) out.error = reader.error();
    if (out.state == response_reader::state::done) {
        out.keep_alive = reader.keep_alive();
        out.response = reader.take("http://fuzz:80/");
    }
    return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 3) return 0;
    const bool head = data[0] & 1;
    const std::uint32_t seed = data[0] >> 1;
    detail::response_limits limits{.max_header_bytes = 32 + std::size_t(data[2]) * 32,
                                   .max_response_bytes = 64 + std::size_t(data[1]) * 64};
    auto bytes = keel::fuzz::as_text(data + 3, size - 3);

    auto whole = read(bytes, limits, head, 0);
    auto pieces = read(bytes, limits, head, seed | 1);

    KEEL_FUZZ_CHECK(whole.state != response_reader::state::reading);
    KEEL_FUZZ_CHECK(whole.state == pieces.state);
    if (whole.error) {
        KEEL_FUZZ_CHECK(whole.error->kind == pieces.error->kind);
        KEEL_FUZZ_CHECK(whole.error->kind == client_error_kind::protocol ||
                        whole.error->kind == client_error_kind::too_large);
        KEEL_FUZZ_CHECK(!whole.error->message.empty());
    }
    if (whole.response) {
        const auto& a = *whole.response;
        const auto& b = *pieces.response;
        KEEL_FUZZ_CHECK(a.status_code() == b.status_code());
        KEEL_FUZZ_CHECK(a.status_code() >= 200 && a.status_code() <= 599);
        KEEL_FUZZ_CHECK(a.headers().fields() == b.headers().fields());
        KEEL_FUZZ_CHECK(a.body() == b.body());
        KEEL_FUZZ_CHECK(whole.keep_alive == pieces.keep_alive);
        KEEL_FUZZ_CHECK(whole.received <= limits.max_response_bytes);
        KEEL_FUZZ_CHECK(a.body().size() <= limits.max_response_bytes);
        if (head) KEEL_FUZZ_CHECK(a.body().empty());
        std::size_t lengths = 0;
        std::string length;
        bool chunked = false;
        for (const auto& [name, value] : a.headers()) {
            if (iequals(name, "content-length")) {
                ++lengths;
                length = value;
            }
            if (iequals(name, "transfer-encoding")) chunked = true;
        }
        const int code = a.status_code();
        const bool bodiless = head || code == 204 || code == 304;
        if (lengths == 1 && !chunked && !bodiless) {
            // A list of equal lengths ("10, 10") is accepted as one (RFC 9110 8.6).
            length = length.substr(0, length.find(','));
            while (!length.empty() && (length.back() == ' ' || length.back() == '\t'))
                length.pop_back();
            auto digits = length.find_first_not_of('0');
            auto number = digits == std::string::npos ? std::string("0") : length.substr(digits);
            KEEL_FUZZ_CHECK(std::to_string(a.body().size()) == number);
        }
    }
    return 0;
}
