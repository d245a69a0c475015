#pragma once

/// @file
/// What an instance's journal says about the child processes it started (context::start):
/// for operators (the admin API's instance view, `keel show`) and for the engine, which
/// cancels the unfinished ones when the parent ends (parent_close::cancel).

#include <keel/process/child.hpp>
#include <keel/process/journal.hpp>
#include <span>
#include <string>
#include <vector>

namespace keel::process {

/// A child process as its parent's journal records it: its start step, and whether the
/// parent consumed its outcome.
struct started_child {
    std::string id;  ///< the child's instance id (its path, definition::instance_id)
    /// What becomes of the child when the parent ends, as given at the start.
    parent_close on_close = parent_close::cancel;
    bool joined = false;  ///< its outcome reached the parent's handler
};

/// The children a journal started, in order (detached starts are not children).
std::vector<started_child> children_started(std::span<const journal_entry> journal);

}  // namespace keel::process
