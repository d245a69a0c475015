// fuzz_rfc3339: keel::parse_rfc3339, the parser of times given to the admin API (`since`,
// `until`) and read back by `keel`.
//
// Input: the text. A time that parses is written by format_rfc3339 as UTC with milliseconds,
// which parses back to the same time and is written again the same way; a text that parses
// has the shape "YYYY-MM-DD?hh:mm:ss" before its fraction and offset.

#include <keel/framework/rfc3339.hpp>
#include <string>

#include "fuzz_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    auto text = keel::fuzz::as_text(data, size);
    auto at = keel::parse_rfc3339(text);
    if (!at) return 0;
    KEEL_FUZZ_CHECK(text.size() >= 20 && text[4] == '-' && text[7] == '-' && text[13] == ':' &&
                    text[16] == ':');
    auto written = keel::format_rfc3339(*at);
    KEEL_FUZZ_CHECK(written.size() == 24 && written.back() == 'Z');
    auto again = keel::parse_rfc3339(written);
    KEEL_FUZZ_CHECK(again.has_value() && *again == *at);
    KEEL_FUZZ_CHECK(keel::format_rfc3339(*again) == written);
    return 0;
}
