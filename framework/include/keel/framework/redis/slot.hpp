#pragma once

/// @file
/// Redis Cluster hash slots. A key's slot is CRC16 (XMODEM) of the key modulo 16384, or of its
/// hash tag when it has one: the text between the first `{` and the next `}`, if not empty.
/// Keys that share a tag share a slot, which a cluster needs for a multi-key command or a
/// script: `keel:{7}:wake` and `keel:{7}:i:o-1:meta` are both in the slot of "7".

#include <cstdint>
#include <string_view>

namespace keel::redis {

/// The number of hash slots of a Redis Cluster.
inline constexpr std::uint16_t slot_count = 16384;

/// The slot of `key`: CRC16 of its hash tag, or of the whole key, modulo slot_count.
std::uint16_t key_slot(std::string_view key);

/// The part of the key that is hashed: its tag, or the whole key.
std::string_view hash_tag(std::string_view key);

}  // namespace keel::redis
