#pragma once

// The prelude a store script carries (redis_store.cpp): of the helpers final.lua and
// prelude.lua define, those the script's body refers to and those they refer to, in the
// order of their definitions. Redis runs a script's whole text on every call, so each helper
// it carries is a closure made on every call (all of them together cost about a microsecond
// per call); a script carries only what it uses. Internal to keel_process.

#include <string>
#include <string_view>

namespace keel::process::detail {

// `helpers`: top-level definitions, each starting at a line "local function <name>" or
// "local <name>[, <name>...] =" and running to the next; comment lines may precede the first.
// A helper is kept when one of its names appears as a word in `body` or in a kept helper.
// std::logic_error when `helpers` has code before its first definition.
std::string prelude_for(std::string_view helpers, std::string_view body);

}  // namespace keel::process::detail
