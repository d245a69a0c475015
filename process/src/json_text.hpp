#pragma once

// The JSON texts the Redis store writes and reads on every transition (journal entries, wait
// sets, inbox signals), written straight into a string, byte for byte as nlohmann's dump()
// writes the same value: no json value is built (and an entry's value is not copied) only to
// be printed. Texts already stored and texts written the other way stay interchangeable.

#include <keel/framework/json_text.hpp>
#include <keel/process/journal.hpp>
#include <keel/process/store.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace keel::process::detail {

// A journal entry as nlohmann::json(entry).dump() writes it.
std::string journal_text(const journal_entry& entry);
// A wait set as [{"path":...,"seq":...},...] (the Lua's waits_for() reads it).
std::string waits_text(const std::vector<signal_wait>& waits);
// An inbox entry as the inbox hash keeps it: {"at":<ms>,"key":...,"path":...,"payload":...},
// without "key" when it has none (its id is the hash's field).
std::string signal_text(const inbox_entry& signal);

// And back, without copying what nlohmann parsed. A wait set or a signal in the form the
// functions above write is read by hand (but for the signal's payload); any other form (an
// older writer's, an operator's edit) is read by nlohmann. Throw nlohmann's exceptions (or
// std::invalid_argument) on a text that is not one.
journal_entry parse_journal_text(std::string_view text);
std::vector<signal_wait> parse_waits_text(std::string_view text);
inbox_entry parse_signal_text(std::uint64_t id, std::string_view text);

}  // namespace keel::process::detail
