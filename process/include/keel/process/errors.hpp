#pragma once

/// @file
/// The exceptions a handler may see from its context besides step_failed (journal.hpp):
/// a signal payload of the wrong type, a cancelled branch joined, an entity lock lost.

#include <stdexcept>

namespace keel::process {

/// Thrown into the handler when a signal's payload does not decode as the awaited type
/// (identically on replay: the signal was consumed and stays recorded).
class bad_signal_payload : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

/// Thrown when joining a branch that was cancelled.
class branch_cancelled : public std::runtime_error {
  public:
    /// The exception, saying "branch cancelled".
    branch_cancelled() : std::runtime_error("branch cancelled") {}
};

/// Thrown by held<T>::value() (and * and ->) when the lock could not be taken again when the
/// instance resumed: the entity was not read again, so there is no current value to give.
class lock_lost : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

}  // namespace keel::process
