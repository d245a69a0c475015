#pragma once

// Logging. A keel::log::logger is a cheap value carrying a component name and context
// fields (a request id, a process instance id); every line it writes carries them, in
// plain text or as one JSON object per line. Output goes through spdlog to stderr.

#include <fmt/format.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace keel::log {

enum class level { trace, debug, info, warn, error, critical, off };
enum class format { text, json };

struct options {
    level min_level = level::info;
    format output = format::text;
};

// Sets the process-wide level and output format. Call once at start (service does).
void configure(const options& opts);
std::optional<level> parse_level(std::string_view name);
std::optional<format> parse_format(std::string_view name);
bool enabled(level lvl);

class logger {
  public:
    explicit logger(std::string component = "keel");

    // A child logger whose lines also carry key=value.
    logger with(std::string_view key, std::string_view value) const;
    const std::string& component() const { return ctx_->component; }

    template <class... Args>
    void log(level lvl, fmt::format_string<Args...> f, Args&&... args) const {
        if (enabled(lvl)) write(lvl, fmt::format(f, std::forward<Args>(args)...));
    }
    template <class... Args>
    void trace(fmt::format_string<Args...> f, Args&&... args) const {
        log(level::trace, f, std::forward<Args>(args)...);
    }
    template <class... Args>
    void debug(fmt::format_string<Args...> f, Args&&... args) const {
        log(level::debug, f, std::forward<Args>(args)...);
    }
    template <class... Args>
    void info(fmt::format_string<Args...> f, Args&&... args) const {
        log(level::info, f, std::forward<Args>(args)...);
    }
    template <class... Args>
    void warn(fmt::format_string<Args...> f, Args&&... args) const {
        log(level::warn, f, std::forward<Args>(args)...);
    }
    template <class... Args>
    void error(fmt::format_string<Args...> f, Args&&... args) const {
        log(level::error, f, std::forward<Args>(args)...);
    }

    void write(level lvl, std::string_view message) const;

  private:
    struct context {
        std::string component;
        std::vector<std::pair<std::string, std::string>> fields;
    };
    explicit logger(std::shared_ptr<const context> ctx) : ctx_(std::move(ctx)) {}

    std::shared_ptr<const context> ctx_;
};

}  // namespace keel::log
