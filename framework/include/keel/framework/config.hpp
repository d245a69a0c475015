#pragma once

/// @file
/// Configuration. A service declares its options once in a config::schema (name, type,
/// default, range, help); config::load reads them from, in increasing precedence, the
/// defaults, a JSON file (`--config FILE` or KEEL_CONFIG), environment variables
/// (`KEEL_<NAME>`) and command-line flags (`--name value` or `--name=value`). Every value is
/// validated at start; an error names the key, where it came from and why it is wrong.
/// Unknown keys in a file or on the command line are errors (a typo must not fall back to a
/// default); unknown KEEL_* environment variables are ignored and reported once, because the
/// environment is shared with scripts and other programs.
///
/// Names are snake_case in JSON (`payment_timeout`), dashed on the command line
/// (`--payment-timeout`) and upper-case in the environment (`KEEL_PAYMENT_TIMEOUT`).
/// Durations are written `250ms`, `2s`, `5m`, `1h`, `3d` (or a JSON number of seconds).

#include <chrono>
#include <cstdint>
#include <keel/framework/expected.hpp>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace keel::config {

/// An option's type.
enum class kind { string, integer, number, boolean, duration };

/// A duration option's value.
using duration = std::chrono::milliseconds;
/// An option's value: string, integer, number, boolean or duration.
using value = std::variant<std::string, std::int64_t, double, bool, duration>;

/// One option: its name, type, default, help text and range.
struct option {
    std::string name;  ///< snake_case
    /// The value's type.
    kind type = kind::string;
    std::optional<value> default_value;  ///< no default: the option is required
    /// One line for usage().
    std::string help;
    std::optional<double> min;  ///< lower bound: integers and numbers by value, durations in s
    std::optional<double> max;  ///< upper bound, likewise
    /// A string option whose flag may be given several times: the values, in order, joined
    /// with ',' (`--admin-token a --admin-token b` is "a,b"). Other sources give one value.
    bool repeatable = false;
};

/// Why loading failed: which key, from which source ("flag", "env", "file", ...), and why.
struct error {
    /// The option, as named in the schema.
    std::string key;
    /// Where the bad value came from: "flag", "env", "file", ...
    std::string source;
    /// Why it is wrong.
    std::string message;
    /// `configuration error: KEY (from SOURCE): MESSAGE`.
    std::string what() const;
};

/// The options a service declares.
class schema {
  public:
    /// Declares an option; std::logic_error when it is declared twice or its default has the wrong
    /// type.
    schema& add(option opt);
    /// Declares an option without a range.
    schema& add(std::string name, kind type, std::optional<value> default_value, std::string help);
    /// The option named `name`; nullptr if none.
    const option* find(std::string_view name) const;
    /// The options, in declaration order.
    const std::vector<option>& options() const { return options_; }
    /// The --help text for `program`: every option with its type, default and help.
    std::string usage(std::string_view program) const;

  private:
    std::vector<option> options_;
};

/// The validated values of one load. Typed getters throw std::logic_error on a name the
/// schema does not declare or a type that does not match: both are programming errors.
class values {
  public:
    /// Whether --help (or -h) was given; then nothing else was read.
    bool help_requested() const { return help_; }
    /// Whether the option has a value (from any source, its default included).
    bool has(std::string_view name) const;
    ///@{
    /// The value of an option of that type.
    const std::string& get_string(std::string_view name) const;
    std::int64_t get_int(std::string_view name) const;
    double get_number(std::string_view name) const;
    bool get_bool(std::string_view name) const;
    duration get_duration(std::string_view name) const;
    ///@}
    /// Where the value came from: "default", "file", "env", "flag".
    std::string source(std::string_view name) const;
    /// KEEL_* environment variables that name no option: not errors (the environment is
    /// shared with other programs), reported once by service_options_from as a warning.
    const std::vector<std::string>& ignored_environment() const { return ignored_env_; }

  private:
    friend class loader;
    const value& get(std::string_view name) const;

    bool help_ = false;
    std::map<std::string, std::pair<value, std::string>, std::less<>> values_;
    std::vector<std::string> ignored_env_;
};

/// Environment lookup, injectable for tests. Default: the process environment.
using environment = std::vector<std::pair<std::string, std::string>>;
/// The environment of this process.
environment process_environment();

/// Loads and validates. `args` excludes the program name.
expected<values, error> load(const schema& s, std::span<const std::string_view> args,
                             const environment& env);
/// load() with the program's own arguments, argv[0] excluded.
expected<values, error> load(const schema& s, int argc, const char* const* argv);

/// Parses `250ms`, `2s`, `5m`, `1h`, `3d`.
std::optional<duration> parse_duration(std::string_view text);

}  // namespace keel::config
