// fuzz_response_head: the server's response writer (http/src/response_head.hpp) given any
// status, framing and header fields a handler could set, read back by Beast's response
// parser, a strict reader of RFC 9112.
//
// Input: byte 0 and 1 pick the status (100 to 599), byte 2 the framing (bit 0: HTTP/1.0,
// bit 1: keep-alive, bit 2: HEAD); the rest is fields and body: "name\xfevalue" fields split
// by '\xff', then '\xfd' and the body. Checked: the head and body parse as one complete
// response with that status and version; its fields are exactly the handler's fields whose
// names are tokens and that the server does not own, each value with its control characters
// as spaces and less the whitespace the parser trims at its ends, then Server, Date,
// Content-Length when there is a body to announce and Connection as the framing says (in
// order within each name: Beast's field list groups a name's fields); the body is the
// handler's when one is sent; and the count of fields left out or mended is what the input
// calls for.

#include <algorithm>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <keel/http/response.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../../http/src/response_head.hpp"
#include "fuzz_check.hpp"

namespace {

using namespace keel::http;
namespace bhttp = boost::beast::http;

bool is_token(std::string_view name) {
    if (name.empty()) return false;
    for (unsigned char c : name) {
        bool alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        if (!alnum && std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) ==
                          std::string_view::npos)
            return false;
    }
    return true;
}

bool owned(std::string_view name) {
    for (std::string_view o : {"content-length", "transfer-encoding", "connection",
                               "proxy-connection", "server", "date"})
        if (iequals(name, o)) return true;
    return false;
}

std::string lowercase(std::string_view s) {
    std::string out(s);
    for (auto& c : out)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return out;
}

// What a conforming reader sees of a value the writer mended: controls as spaces, the
// whitespace at both ends trimmed.
std::string as_read(std::string_view value, bool& mended) {
    std::string out(value);
    for (auto& c : out) {
        auto u = static_cast<unsigned char>(c);
        if ((u < 0x20 && c != '\t') || u == 0x7f) {
            c = ' ';
            mended = true;
        }
    }
    auto first = out.find_first_not_of(" \t");
    if (first == std::string::npos) return {};
    auto last = out.find_last_not_of(" \t");
    return out.substr(first, last - first + 1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 3) return 0;
    int code = 100 + (data[0] * 256 + data[1]) % 500;
    detail::response_framing framing{.version = (data[2] & 1) ? 10u : 11u,
                                     .keep_alive = (data[2] & 2) != 0,
                                     .is_head = (data[2] & 4) != 0,
                                     .server = "keel",
                                     .date = "Sat, 28 Nov 2026 05:00:00 GMT"};
    auto rest = keel::fuzz::as_text(data + 3, size - 3);
    auto body_at = rest.find('\xfd');
    std::string_view fields = rest.substr(0, body_at);
    std::string_view body = body_at == std::string_view::npos ? "" : rest.substr(body_at + 1);

    response res(static_cast<status>(code));
    res.body(std::string(body));
    std::vector<std::pair<std::string, std::string>> expected;
    std::size_t repairs = 0;
    while (!fields.empty()) {
        auto end = fields.find('\xff');
        auto field = fields.substr(0, end);
        fields = end == std::string_view::npos ? "" : fields.substr(end + 1);
        auto split = field.find('\xfe');
        if (split == std::string_view::npos) continue;
        auto name = field.substr(0, split), value = field.substr(split + 1);
        res.headers().add(std::string(name), std::string(value));
        if (!is_token(name)) {
            ++repairs;
            continue;
        }
        if (owned(name)) continue;
        bool mended = false;
        expected.emplace_back(std::string(name), as_read(value, mended));
        if (mended) ++repairs;
    }
    bool bodiless = code < 200 || code == 204 || code == 304;
    expected.emplace_back("Server", "keel");
    expected.emplace_back("Date", std::string(framing.date));
    if (!bodiless) expected.emplace_back("Content-Length", std::to_string(body.size()));
    if (framing.version == 10 && framing.keep_alive)
        expected.emplace_back("Connection", "keep-alive");
    if (framing.version == 11 && !framing.keep_alive) expected.emplace_back("Connection", "close");

    std::string wire;
    KEEL_FUZZ_CHECK(detail::append_response_head(wire, res, framing) == repairs);
    bool sent = detail::sends_body(res, framing.is_head);
    KEEL_FUZZ_CHECK(sent == (!bodiless && !framing.is_head));
    if (sent) wire += body;

    bhttp::response_parser<bhttp::string_body> parser;
    parser.header_limit(1u << 30);
    parser.body_limit(1u << 30);
    parser.eager(true);
    if (framing.is_head) parser.skip(true);
    boost::system::error_code ec;
    auto used = parser.put(boost::asio::buffer(wire), ec);
    KEEL_FUZZ_CHECK(!ec);
    KEEL_FUZZ_CHECK(parser.is_done());
    KEEL_FUZZ_CHECK(used == wire.size());

    const auto& got = parser.get();
    KEEL_FUZZ_CHECK(got.result_int() == static_cast<unsigned>(code));
    KEEL_FUZZ_CHECK(got.version() == framing.version);
    // Beast's field list keeps fields of one name together, so both sides are compared
    // grouped by name, in order within a name.
    std::vector<std::pair<std::string, std::string>> read;
    for (const auto& f : got) read.emplace_back(f.name_string(), f.value());
    auto by_name = [](const auto& a, const auto& b) {
        return lowercase(a.first) < lowercase(b.first);
    };
    std::stable_sort(read.begin(), read.end(), by_name);
    std::stable_sort(expected.begin(), expected.end(), by_name);
    KEEL_FUZZ_CHECK(read == expected);
    KEEL_FUZZ_CHECK(got.body() == (sent ? body : std::string_view()));
    return 0;
}
