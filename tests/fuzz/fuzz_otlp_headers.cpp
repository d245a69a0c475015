// fuzz_otlp_headers: the --otlp-headers text an operator gives (http::parse_otlp_headers).
//
// Input: the text. Checked: only std::invalid_argument escapes, its message naming the pair
// ("pair <n>"); what is accepted has token names and values without control characters but
// tab; written back with every value byte percent-encoded, the headers read back the same.
// (That a refusal never repeats a value is tested in otlp_test.cpp.)

#include <cstdint>
#include <cstdio>
#include <keel/http/otlp.hpp>
#include <stdexcept>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"

namespace {

bool is_token_char(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    auto text = keel::fuzz::as_text(data, size);
    std::vector<keel::http::otlp_header> headers;
    try {
        headers = keel::http::parse_otlp_headers(text);
    } catch (const std::invalid_argument& e) {
        KEEL_FUZZ_CHECK(std::string_view(e.what()).starts_with("pair "));
        return 0;
    }
    std::string again;
    for (const auto& h : headers) {
        KEEL_FUZZ_CHECK(!h.name.empty());
        for (char c : h.name) KEEL_FUZZ_CHECK(is_token_char(c));
        for (char c : h.value) {
            auto u = static_cast<unsigned char>(c);
            KEEL_FUZZ_CHECK(u == '\t' || (u >= 0x20 && u != 0x7f));
        }
        if (!again.empty()) again += ',';
        again += h.name;
        again += '=';
        char escape[4];
        for (unsigned char c : h.value) {
            std::snprintf(escape, sizeof escape, "%%%02X", c);
            again += escape;
        }
    }
    auto read = keel::http::parse_otlp_headers(again);
    KEEL_FUZZ_CHECK(read.size() == headers.size());
    for (std::size_t i = 0; i < read.size(); ++i) {
        KEEL_FUZZ_CHECK(read[i].name == headers[i].name);
        KEEL_FUZZ_CHECK(read[i].value == headers[i].value);
    }
    return 0;
}
