#pragma once

// An instance started on a queue (keel/process/queue.hpp) runs its handler behind a marker
// and, unless it was admitted at its enqueue, a wait for its admission. The engine and the
// replay of recorded journals (testing::replay) wrap the handler alike, from the journal's
// first entry, so a queued instance's journal replays like any other.

#include <keel/process/engine.hpp>
#include <string>

namespace keel::process::detail {

// The handler behind queue `queue`'s marker, then its admission unless `admitted_at_enqueue`.
durable<nlohmann::json> admitted_then(context& ctx, std::string queue, bool admitted_at_enqueue,
                                      engine::factory handler, nlohmann::json params);

// `handler` as an instance with `journal` runs it: behind its queue's marker when the journal
// begins with one, else as it is.
engine::factory as_journaled(engine::factory handler, const std::vector<journal_entry>& journal);

}  // namespace keel::process::detail
