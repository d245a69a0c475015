// fuzz_signal_text: reading a signal as the Redis store keeps it in an inbox
// (process/src/json_text.cpp, parse_signal_text), as it does for every signal of an instance it
// loads or takes. The store's own form is read by hand, with only the payload given to
// nlohmann; any other form goes to nlohmann whole.
//
// Input: any text. The documented failure mode is an exception of nlohmann's
// (json::exception: not JSON, a missing or mistyped member) or std::invalid_argument; any
// other escapes and is reported by libFuzzer. A signal that reads is written back by
// signal_text and reads back the same, in the own form and in nlohmann's spaced form.

#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>

#include "fuzz_check.hpp"
#include "json_text.hpp"

namespace {

using keel::process::inbox_entry;

std::optional<inbox_entry> read(std::string_view text) {
    try {
        return keel::process::detail::parse_signal_text(7, text);
    } catch (const nlohmann::json::exception&) {
    } catch (const std::invalid_argument&) {
    }
    return std::nullopt;
}

bool same(const inbox_entry& a, const inbox_entry& b) {
    return a.id == b.id && a.key == b.key && a.path == b.path && a.payload == b.payload &&
           a.at == b.at && a.trace == b.trace;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    auto signal = read(keel::fuzz::as_text(data, size));
    if (!signal) return 0;
    std::string text;
    try {
        text = keel::process::detail::signal_text(*signal);
    } catch (const nlohmann::json::exception&) {
        return 0;  // a payload nlohmann cannot write (not UTF-8), as nlohmann's own dump
    }
    auto again = read(text);
    KEEL_FUZZ_CHECK(again && same(*again, *signal));
    auto spaced = nlohmann::json::parse(text).dump(1);
    auto from_spaced = read(spaced);
    KEEL_FUZZ_CHECK(from_spaced && same(*from_spaced, *signal));
    return 0;
}
