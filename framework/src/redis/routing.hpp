#pragma once

// How a cluster connection routes an encoded command (internal). The command's name picks
// a key rule from a table (the keys' positions, as Redis's own key specs): its keys must
// all share one hash slot, which is where it goes; keyless commands go to any primary, and
// SCRIPT, FUNCTION, FLUSHALL and FLUSHDB to every primary. A command missing from the table
// is routed by its first argument and corrected by MOVED if that was not a key. Commands
// that need a connection of their own (MULTI, WATCH, SELECT, SUBSCRIBE...) are refused.
//
// The single-node connection never calls this: it costs nothing there.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace keel::redis::detail {

struct route {
    enum class kind : std::uint8_t { slot, any, all, cross_slot, unsupported };
    kind what = kind::any;
    std::uint16_t slot = 0;
    std::string why;  // cross_slot, unsupported: the message for the caller
};

route route_of(std::string_view payload);

// The arguments of an encoded command (a RESP array of bulk strings); empty if malformed.
std::vector<std::string_view> command_args(std::string_view payload);

}  // namespace keel::redis::detail
