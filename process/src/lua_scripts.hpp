#pragma once

// The Redis store's Lua scripts: process/src/lua/*.lua, embedded at build time by
// cmake/embed_files.cmake (without each file's leading comment, which documents the script's
// KEYS and ARGV). Internal to keel_process.

#include <span>
#include <string_view>

namespace keel::process::detail {

struct lua_file {
    std::string_view name;  // "commit.lua"
    std::string_view body;
};
std::span<const lua_file> lua_files();

// The body of one embedded script; std::logic_error when there is none of that name.
std::string_view lua(std::string_view name);

}  // namespace keel::process::detail
