#pragma once

/// @file
/// Logging. A keel::log::logger is a cheap value carrying a component name and context
/// fields (a request id, a process instance id); every line it writes carries them, in
/// plain text or as one JSON object per line. Output goes through spdlog to stderr.

#include <fmt/format.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace keel::log {

/// Severity, lowest first; `off` writes nothing.
enum class level { trace, debug, info, warn, error, critical, off };
/// How lines are written: plain text, or one JSON object per line.
enum class format { text, json };

/// The process-wide logging settings.
struct options {
    /// Lines below this level are dropped.
    level min_level = level::info;
    /// Text or JSON.
    format output = format::text;
};

/// Sets the process-wide level and output format. Call once at start (service does).
void configure(const options& opts);
/// "trace", "debug", "info", "warn", "error", "critical" or "off"; nullopt for anything else.
std::optional<level> parse_level(std::string_view name);
/// "text" or "json"; nullopt for anything else.
std::optional<format> parse_format(std::string_view name);
/// Whether lines at `lvl` are written.
bool enabled(level lvl);

/// A component name and context fields that every line it writes carries; a cheap value.
class logger {
  public:
    /// A logger for `component`, without fields.
    explicit logger(std::string component = "keel");

    /// A child logger whose lines also carry key=value; a key this one carries already
    /// takes the new value (a span's logger moving to the next span).
    logger with(std::string_view key, std::string_view value) const;
    /// The component name.
    const std::string& component() const { return ctx_->component; }

    /// Writes a line at `lvl`, formatted with fmt, when that level is enabled.
    template <class... Args>
    void log(level lvl, fmt::format_string<Args...> f, Args&&... args) const {
        if (enabled(lvl)) write(lvl, fmt::format(f, std::forward<Args>(args)...));
    }
    ///@{
    /// Writes a line at that level (see log()).
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
    ///@}

    /// Writes `message` at `lvl`, with the component and fields, whatever the level.
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
