#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <keel/framework/log.hpp>
#include <nlohmann/json.hpp>

namespace keel::log {
namespace {

std::atomic<level> current_level{level::info};
std::atomic<format> current_format{format::text};

spdlog::level::level_enum to_spdlog(level lvl) {
    return static_cast<spdlog::level::level_enum>(static_cast<int>(lvl));
}

spdlog::logger& sink() {
    static const std::shared_ptr<spdlog::logger> instance = [] {
        auto l = std::make_shared<spdlog::logger>(
            "keel", std::make_shared<spdlog::sinks::stderr_sink_mt>());
        l->set_level(spdlog::level::trace);
        l->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
        return l;
    }();
    return *instance;
}

constexpr std::array<std::string_view, 7> level_names{"trace", "debug",    "info", "warn",
                                                      "error", "critical", "off"};

}  // namespace

void configure(const options& opts) {
    current_level = opts.min_level;
    current_format = opts.output;
    if (opts.output == format::json) {
        sink().set_pattern(R"({"ts":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l",%v})",
                           spdlog::pattern_time_type::utc);
    } else {
        sink().set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
    }
}

std::optional<level> parse_level(std::string_view name) {
    for (std::size_t i = 0; i < level_names.size(); ++i) {
        if (level_names[i] == name) return static_cast<level>(i);
    }
    if (name == "warning") return level::warn;
    return std::nullopt;
}

std::optional<format> parse_format(std::string_view name) {
    if (name == "text") return format::text;
    if (name == "json") return format::json;
    return std::nullopt;
}

bool enabled(level lvl) {
    return lvl != level::off && lvl >= current_level.load();
}

logger::logger(std::string component)
    : ctx_(std::make_shared<const context>(context{std::move(component), {}})) {}

logger logger::with(std::string_view key, std::string_view value) const {
    auto child = std::make_shared<context>(*ctx_);
    auto known = std::ranges::find(child->fields, key, [](const auto& f) { return f.first; });
    if (known != child->fields.end())
        known->second = value;
    else
        child->fields.emplace_back(key, value);
    return logger(std::shared_ptr<const context>(std::move(child)));
}

void logger::write(level lvl, std::string_view message) const {
    std::string line;
    if (current_format.load() == format::json) {
        nlohmann::json fields = nlohmann::json::object();
        fields["component"] = ctx_->component;
        for (const auto& [k, v] : ctx_->fields) fields[k] = v;
        fields["msg"] = message;
        // Splice the object's members after the timestamp and level of the pattern.
        auto text = fields.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        line.assign(text, 1, text.size() - 2);
    } else {
        line = fmt::format("[{}] {}", ctx_->component, message);
        for (const auto& [k, v] : ctx_->fields)
            fmt::format_to(std::back_inserter(line), " {}={}", k, v);
    }
    sink().log(to_spdlog(lvl), "{}", line);
}

}  // namespace keel::log
