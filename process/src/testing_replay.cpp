#include <keel/framework/clock.hpp>
#include <keel/process/context.hpp>
#include <keel/process/detail/runtime.hpp>
#include <keel/process/testing/replay.hpp>
#include <stdexcept>

#include "queued_handler.hpp"

namespace keel::process::testing {

std::vector<journal_entry> journal_of(const nlohmann::json& exported) {
    const nlohmann::json* entries = &exported;
    if (exported.is_object()) {
        auto it = exported.find("entries");
        if (it == exported.end())
            throw std::invalid_argument("an exported journal has \"entries\"");
        entries = &*it;
    }
    if (!entries->is_array())
        throw std::invalid_argument("an exported journal's entries are an array");
    std::vector<journal_entry> out;
    out.reserve(entries->size());
    for (const auto& e : *entries) out.push_back(e.get<journal_entry>());
    return out;
}

// The engine's drive loop (engine/driver.cpp) without a store: run what is ready, feed the
// next journal entry when everything waits, stop at the frontier. An instance started on a
// queue runs behind its marker, as the engine runs it.
replay_report replay_journal(const engine::factory& handler, const nlohmann::json& params,
                             std::vector<journal_entry> journal) {
    manual_clock clock;
    auto build = detail::as_journaled(handler, journal);
    auto entries = journal.size();
    detail::runtime rt("replay", clock, std::move(journal), {}, {}, 1);
    context ctx(rt);
    replay_report report;
    try {
        rt.start(build(ctx, params));
    } catch (const std::exception& e) {
        report.mismatch = std::string("cannot start the handler: ") + e.what();
        return report;
    }
    for (;;) {
        rt.run_ready();
        if (rt.parked()) {
            report.mismatch = rt.park_message();
            return report;
        }
        if (rt.finished()) {
            report.finished = true;
            if (rt.replaying())
                report.mismatch = "the handler returned before the end of the journal (" +
                                  std::to_string(entries) + " entries)";
            return report;
        }
        if (!rt.replaying()) return report;
        rt.replay_next();
    }
}

}  // namespace keel::process::testing
