#include <cstdio>
#include <keel/process/context.hpp>

namespace keel::process {

immediate_op<time_point> context::now() {
    return immediate_op<time_point>(*rt_, op_kind::now, [](detail::runtime& rt) {
        return nlohmann::json(rt.clock().now().time_since_epoch().count());
    });
}

immediate_op<std::uint64_t> context::random() {
    return immediate_op<std::uint64_t>(
        *rt_, op_kind::random, [](detail::runtime& rt) { return nlohmann::json(rt.random_u64()); });
}

immediate_op<std::string> context::uuid() {
    return immediate_op<std::string>(*rt_, op_kind::uuid, [](detail::runtime& rt) {
        std::uint64_t hi = rt.random_u64();
        std::uint64_t lo = rt.random_u64();
        hi = (hi & 0xffffffffffff0fffULL) | 0x0000000000004000ULL;  // version 4
        lo = (lo & 0x3fffffffffffffffULL) | 0x8000000000000000ULL;  // RFC 4122 variant
        char text[37];
        std::snprintf(text, sizeof text, "%08x-%04x-%04x-%04x-%012llx",
                      static_cast<unsigned>(hi >> 32), static_cast<unsigned>((hi >> 16) & 0xffff),
                      static_cast<unsigned>(hi & 0xffff), static_cast<unsigned>(lo >> 48),
                      static_cast<unsigned long long>(lo & 0xffffffffffffULL));
        return nlohmann::json(std::string(text));
    });
}

}  // namespace keel::process
