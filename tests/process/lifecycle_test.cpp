// The instance lifecycle's table (process/src/engine/lifecycle.hpp): the moves the engine
// makes are legal, the others are refused, and an illegal move stops a debug build.

#include "engine/lifecycle.hpp"

#include <gtest/gtest.h>

#include <array>
#include <utility>

namespace {

using keel::process::engine_parts::allowed_move;
using keel::process::engine_parts::checked_move;
using keel::process::engine_parts::leased;
using keel::process::engine_parts::outranking;
using keel::process::engine_parts::owed;
using keel::process::engine_parts::phase;

constexpr std::array all{phase::loaded, phase::held, phase::driving, phase::released,
                         phase::dropped};

// Every move the engine makes, as lifecycle.hpp draws it.
constexpr std::array<std::pair<phase, phase>, 9> drawn{{
    {phase::loaded, phase::held},       // keep_hot of a leased instance
    {phase::loaded, phase::released},   // keep_hot of a start that waits first
    {phase::held, phase::driving},      // ensure_driving
    {phase::driving, phase::held},      // the driver has nothing to do
    {phase::driving, phase::released},  // a releasing commit
    {phase::released, phase::held},     // a take that reuses the journal in memory
    {phase::held, phase::dropped},      // drop: a lease lost, left to a newer worker
    {phase::driving, phase::dropped},   // drop: settled, or a commit refused
    {phase::released, phase::dropped},  // drop: evicted, acted on by an operator
}};

TEST(instance_lifecycle, allows_exactly_the_drawn_moves) {
    for (auto from : all)
        for (auto to : all) {
            bool drawn_move = false;
            for (auto [f, t] : drawn) drawn_move = drawn_move || (f == from && t == to);
            EXPECT_EQ(allowed_move(from, to), drawn_move)
                << to_string(from) << " -> " << to_string(to);
        }
}

TEST(instance_lifecycle, nothing_comes_back_from_dropped_and_nothing_drives_unleased) {
    for (auto to : all) EXPECT_FALSE(allowed_move(phase::dropped, to)) << to_string(to);
    EXPECT_FALSE(allowed_move(phase::released, phase::driving));
    EXPECT_FALSE(allowed_move(phase::loaded, phase::driving));
    EXPECT_FALSE(allowed_move(phase::loaded, phase::dropped));  // never in the map: no drop
}

TEST(instance_lifecycle, a_lease_is_held_while_held_or_driving) {
    for (auto p : all)
        EXPECT_EQ(leased(p), p == phase::held || p == phase::driving) << to_string(p);
}

TEST(instance_lifecycle, a_cancel_outranks_a_wake_up_and_is_not_undone_by_one) {
    EXPECT_EQ(outranking(owed::nothing, owed::wake_once_released), owed::wake_once_released);
    EXPECT_EQ(outranking(owed::wake_once_released, owed::cancel), owed::cancel);
    EXPECT_EQ(outranking(owed::cancel, owed::wake_once_released), owed::cancel);
}

TEST(instance_lifecycle_death, an_illegal_move_stops_a_debug_build) {
    EXPECT_TRUE(checked_move(phase::held, phase::driving));
    EXPECT_DEBUG_DEATH(checked_move(phase::dropped, phase::held), "illegal move");
}

}  // namespace
