#pragma once

/// @file
/// keel::process::testing::replay: runs a handler against a recorded journal, the way a
/// worker rebuilds an instance, and reports the first difference. No store, no Redis, no
/// engine. Keep real journals as regression cases, so that a change that would park running
/// instances fails a test instead (docs/versioning.md):
///
/// @code
///   $ keel journal order/o-1/fulfillment --json > tests/journals/paid-and-shipped.json
///
///   auto recorded = nlohmann::json::parse(std::ifstream("tests/journals/paid-and-shipped.json"));
///   auto report = keel::process::testing::replay(orders::order_fulfillment, deps, recorded,
///                                                keel::ref<orders::order>("o-1"));
///   EXPECT_TRUE(report.ok()) << *report.mismatch;
/// @endcode
///
/// Steps are answered from the journal and never run; timers and signals complete with
/// their recorded values; where the journal ends (the instance's frontier) replay stops. A
/// journal that begins with a queue's marker (an instance started on a queue) is replayed
/// behind it, as the engine runs such an instance.
/// `deps` are the handler's dependencies as for engine::add (fakes are fine: they are not
/// called by steps the journal answers).

#include <cstddef>
#include <keel/process/definition.hpp>
#include <keel/process/engine.hpp>
#include <keel/process/journal.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace keel::process::testing {

/// What a replay found: the first difference between the handler and the journal, if any.
struct replay_report {
    std::optional<std::string> mismatch;  ///< the first difference, naming both operations
    bool finished = false;                ///< the handler returned within the journal
    /// Whether the handler replayed the journal without a difference.
    bool ok() const noexcept { return !mismatch; }
};

/// The entries of an exported journal: `keel journal ID --json`, a page of the admin API's
/// `GET /admin/journal/<id>` ({"entries": [...]}), or a plain array of entries.
/// std::invalid_argument when it is none of these.
std::vector<journal_entry> journal_of(const nlohmann::json& exported);

/// The core of replay(): runs the handler `build` makes from `params` (as stored: see
/// engine::factory) against `journal`.
replay_report replay_journal(const engine::factory& build, const nlohmann::json& params,
                             std::vector<journal_entry> journal);

/// Replays `exported` (see journal_of) against the handler of `def` started with `params`,
/// its dependencies resolved from `deps`; the report says whether the journal still fits.
template <auto H, class Resolver, class... P>
requires(!std::is_same_v<std::remove_cvref_t<Resolver>, nlohmann::json>) replay_report
    replay(const definition<H>& def, Resolver& deps, const nlohmann::json& exported,
           const P&... params) {
    return replay_journal(
        [&](context& ctx, const nlohmann::json& p) { return def.instantiate(ctx, p, deps); },
        definition<H>::encode_params(params...), journal_of(exported));
}

/// For a handler without dependencies.
template <auto H, class... P>
replay_report replay(const definition<H>& def, const nlohmann::json& exported, const P&... params) {
    no_dependencies none;
    return replay(def, none, exported, params...);
}

}  // namespace keel::process::testing
