#pragma once

// Where an instance this worker keeps in memory is in its life, and what it still owes.
// One enum says which states there are; one table says which moves between them are legal
// (docs/architecture.md, "An instance in memory", draws it). engine::impl::move_to() is the
// only place the state changes; an illegal move is a logic error, caught by an assertion in
// debug builds. Internal to keel_process.
//
//   loaded   -> held      keep_hot of a leased instance (a start, a take, an operator's resume)
//   loaded   -> released  keep_hot of a start that waits first (stored suspended, no lease)
//   held     -> driving   ensure_driving
//   driving  -> held      the driver has nothing to do (steps in flight)
//   driving  -> released  a releasing commit (suspended)
//   released -> held      a take that reuses the journal in memory
//   held, driving, released -> dropped   drop(): settled, a lease lost, evicted, ...
//
// An instance being taken (a wake-up's take, or an emit's) is not in memory yet: the part
// keeps its id in `taking`, with the signals stored in its inbox meanwhile.

#include <cassert>
#include <cstdint>
#include <string_view>

namespace keel::process::engine_parts {

enum class phase : std::uint8_t {
    // Made from a snapshot (or a start), its handler begun; not yet in the part's map.
    loaded,
    // Leased and in the map; its driver idle: steps in flight, or nothing to do yet.
    held,
    // Leased; its driver runs (one at a time).
    driving,
    // In the map without a lease (suspended): its journal serves this worker's next take.
    released,
    // Out of the map. Whatever still refers to it (a step finishing, a driver unwinding)
    // sees this and lets it go.
    dropped,
};

constexpr bool leased(phase p) {
    return p == phase::held || p == phase::driving;
}

constexpr bool allowed_move(phase from, phase to) {
    switch (from) {
        case phase::loaded:
            return to == phase::held || to == phase::released;
        case phase::held:
            return to == phase::driving || to == phase::dropped;
        case phase::driving:
            return to == phase::held || to == phase::released || to == phase::dropped;
        case phase::released:
            return to == phase::held || to == phase::dropped;
        case phase::dropped:
            return false;
    }
    return false;
}

// Whether the move is legal; an illegal one fails an assertion in debug builds (the caller
// logs it in release builds and carries on).
inline bool checked_move(phase from, phase to) {
    bool legal = allowed_move(from, to);
    assert(legal && "illegal move of an instance's state (see lifecycle.hpp)");
    return legal;
}

constexpr std::string_view to_string(phase p) {
    switch (p) {
        case phase::loaded:
            return "loaded";
        case phase::held:
            return "held";
        case phase::driving:
            return "driving";
        case phase::released:
            return "released";
        case phase::dropped:
            return "dropped";
    }
    return "?";
}

// What a leased instance owes once its driver gets to it; a later request replaces an
// earlier one only if it outranks it (a cancel makes a wake-up moot).
enum class owed : std::uint8_t {
    nothing,
    // A signal it waits for arrived while this worker held it (handed to it during the
    // releasing commit, or seen by that commit in the store): wake it once released.
    wake_once_released,
    // An operator cancelled it: the driver settles it as cancelled at its next turn.
    cancel,
};

constexpr owed outranking(owed now, owed asked) {
    return asked > now ? asked : now;
}

}  // namespace keel::process::engine_parts
