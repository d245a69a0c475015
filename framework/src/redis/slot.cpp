#include <array>
#include <keel/framework/redis/slot.hpp>

namespace keel::redis {
namespace {

// CRC16-CCITT (XMODEM): polynomial 0x1021, initial value 0, as the Redis Cluster spec.
constexpr std::array<std::uint16_t, 256> crc16_table = [] {
    std::array<std::uint16_t, 256> table{};
    for (unsigned i = 0; i < 256; ++i) {
        unsigned crc = i << 8;
        for (int bit = 0; bit < 8; ++bit) crc = (crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1;
        table[i] = static_cast<std::uint16_t>(crc);
    }
    return table;
}();

std::uint16_t crc16(std::string_view bytes) {
    std::uint16_t crc = 0;
    for (unsigned char c : bytes)
        crc = static_cast<std::uint16_t>((crc << 8) ^ crc16_table[((crc >> 8) ^ c) & 0xff]);
    return crc;
}

}  // namespace

std::string_view hash_tag(std::string_view key) {
    auto open = key.find('{');
    if (open == std::string_view::npos) return key;
    auto close = key.find('}', open + 1);
    if (close == std::string_view::npos || close == open + 1) return key;
    return key.substr(open + 1, close - open - 1);
}

std::uint16_t key_slot(std::string_view key) {
    return crc16(hash_tag(key)) & (slot_count - 1);
}

}  // namespace keel::redis
