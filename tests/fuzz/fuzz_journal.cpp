// fuzz_journal: decoding journal entries (keel::process::journal_entry's from_json), as the
// Redis store does for every entry of an instance it loads.
//
// Input: JSON text, one entry or an array of entries (a journal). Text that is not JSON is
// skipped (nlohmann's parser is not what is under test). The documented failure mode of
// from_json, read from process/src/journal.cpp, is an exception of two kinds: nlohmann's
// json::exception (a missing member: out_of_range from at(); a member of the wrong type:
// type_error from get() or value()) and std::invalid_argument (an unknown kind). Any other
// exception escapes and is reported by libFuzzer; a crash or undefined behaviour is a
// finding too. An entry that decodes encodes back to JSON that decodes to the same entry.

#include <keel/process/journal.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>

#include "fuzz_check.hpp"

namespace {

using keel::process::journal_entry;

std::optional<journal_entry> decode(const nlohmann::json& j) {
    try {
        return j.get<journal_entry>();
    } catch (const nlohmann::json::exception&) {
    } catch (const std::invalid_argument&) {
    }
    return std::nullopt;
}

void check_entry(const nlohmann::json& j) {
    auto entry = decode(j);
    if (!entry) return;
    KEEL_FUZZ_CHECK(keel::process::parse_op_kind(keel::process::to_string(entry->kind)) ==
                    entry->kind);
    KEEL_FUZZ_CHECK(!keel::process::describe(entry->kind, entry->name).empty());

    nlohmann::json encoded = *entry;
    auto again = decode(encoded);
    KEEL_FUZZ_CHECK(again && *again == *entry);

    auto text = encoded.dump();
    auto reparsed = nlohmann::json::parse(text, nullptr, false);
    KEEL_FUZZ_CHECK(!reparsed.is_discarded());
    auto from_text = decode(reparsed);
    KEEL_FUZZ_CHECK(from_text && *from_text == *entry);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    auto doc = nlohmann::json::parse(keel::fuzz::as_text(data, size), nullptr, false);
    if (doc.is_discarded()) return 0;
    if (doc.is_array()) {
        for (const auto& j : doc) check_entry(j);
    } else {
        check_entry(doc);
    }
    return 0;
}
