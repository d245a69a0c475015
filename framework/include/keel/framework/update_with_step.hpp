#pragma once

/// @file
/// Deprecated: keel::update_with_step is keel::signals::update_with_step, in
/// <keel/signals/update_with_step.hpp>, beside the emit and the start it serves. This header
/// forwards to it and will be removed.

#pragma message( \
    "keel/framework/update_with_step.hpp is deprecated: include keel/signals/update_with_step.hpp")

#include <keel/signals/update_with_step.hpp>

namespace keel {

using signals::max_step_refusals;
using signals::update_with_step;

}  // namespace keel
