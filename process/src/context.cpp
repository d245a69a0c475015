#include <cstdio>
#include <keel/framework/path_pattern.hpp>
#include <keel/process/context.hpp>
#include <stdexcept>

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

std::string context::signal_path(
    const signals::signal_base& s,
    std::vector<std::pair<std::string_view, std::string>> others) const {
    std::vector<std::string_view> params;
    for (auto seg : keel::pattern_segments(s.pattern()))
        if (seg.starts_with(':')) params.push_back(seg);
    std::vector<std::string> values;
    std::vector<bool> used(others.size(), false);
    for (std::size_t p = 0; p < s.models().size(); ++p) {
        auto model = s.models()[p];
        auto seg = params[p];
        const std::string* value = nullptr;
        for (const auto& [m, eid] : entities_)
            if (m == model) {
                value = &eid;
                break;
            }
        for (std::size_t i = 0; !value && i < others.size(); ++i)
            if (!used[i] && others[i].first == model) {
                used[i] = true;
                value = &others[i].second;
            }
        if (!value)
            throw std::logic_error("process instance " + id() + " cannot wait for signal " +
                                   std::string(s.pattern()) + ": no parameter of model " +
                                   std::string(model) + " binds its " + std::string(seg) +
                                   "; pass a ref<" + std::string(model) + "> to wait()");
        values.push_back(*value);
    }
    return keel::fill_pattern(s.pattern(), values, "signal");
}

durable<void> context::continue_as_new(nlohmann::json params) {
    auto may = run("continue as new", [rt = rt_] { return detail::runtime::may_restart(rt); });
    bool now = co_await std::move(may);
    if (now) throw detail::restart_requested{std::move(params)};
}

}  // namespace keel::process
