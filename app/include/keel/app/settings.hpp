#pragma once

/// @file
/// keel::app::settings_schema: a service's own settings bound to a struct, so that the code
/// that uses them reads members, not string keys. Each option's default is the member's
/// default; its type follows the member's (std::string, bool, integers, floating point,
/// std::chrono durations):
///
/// @code
///   struct settings {
///       keel::duration payment_timeout = std::chrono::hours(72);
///       std::string webhook_secret;
///   };
///   void declare(keel::app::settings_schema<settings>& s) {
///       s.add("payment_timeout", &settings::payment_timeout,
///             "how long an order waits for its payment", {.min = 0.001, .max = 3.2e7})
///        .add("webhook_secret", &settings::webhook_secret, "HMAC key of the webhooks");
///   }
/// @endcode
///
/// The options are read like every Keel option: --payment-timeout 3d, KEEL_PAYMENT_TIMEOUT,
/// or a JSON file; keel::app::application registers the filled struct for injection
/// (`const settings&` or `settings&` in an inject list).
///
/// A value the type and bounds cannot judge (a list in a string, a cron expression) gets a
/// check: a function that returns why the value is refused, or nullopt. The application
/// runs every check before anything starts, and a refused value stops the start like any
/// bad option (exit 2, the option named as it was given: --dunning, KEEL_DUNNING, dunning):
///
/// @code
///   s.add("dunning", &settings::dunning, "waits before each retry, e.g. 1d,3d,5d",
///         [](const std::string& list) { return dunning_error(list); });
/// @endcode

#include <chrono>
#include <concepts>
#include <functional>
#include <keel/framework/config.hpp>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace keel::app {

/// Bounds of a numeric or duration option (durations in seconds).
struct range {
    /// The smallest value allowed; nullopt: no bound.
    std::optional<double> min;
    /// The largest value allowed; nullopt: no bound.
    std::optional<double> max;
};

/// Why an option's value of type M is refused, or nullopt: see the file's description.
template <class M>
using setting_check = std::function<std::optional<std::string>(const M&)>;

/// An option whose check refused its value: the option's name and why.
struct refused_setting {
    std::string name;    ///< the option, as declared (e.g. "dunning")
    std::string reason;  ///< what the check said
};

/// A service's settings bound to the members of struct S; see the file's description.
template <class S>
class settings_schema {
  public:
    /// Declares the option `name` for `member`: its default is the member's, its type follows the
    /// member's type, `bounds` limits a number or duration (integers are limited to what the member
    /// can hold).
    template <class M>
    settings_schema& add(std::string name, M S::*member, std::string help, range bounds = {}) {
        const S defaults{};
        if constexpr (std::integral<M> && !std::same_as<M, bool>) {
            // What the member can hold, unless narrower bounds are given.
            if (!bounds.min) bounds.min = static_cast<double>(std::numeric_limits<M>::min());
            if (!bounds.max) bounds.max = static_cast<double>(std::numeric_limits<M>::max());
        }
        options_.push_back(config::option{name, kind_of<M>(), to_value(defaults.*member),
                                          std::move(help), bounds.min, bounds.max});
        readers_.push_back([name, member](const config::values& v, S& out) {
            out.*member = from_values<M>(v, name);
        });
        return *this;
    }

    /// Declares the option as above, with a check of its value beyond type and bounds.
    template <class M>
    settings_schema& add(std::string name, M S::*member, std::string help, setting_check<M> check,
                         range bounds = {}) {
        add(name, member, std::move(help), bounds);
        checks_.push_back([name, member, check = std::move(check)](
                              const config::values& v) -> std::optional<refused_setting> {
            if (auto why = check(from_values<M>(v, name))) return refused_setting{name, *why};
            return std::nullopt;
        });
        return *this;
    }

    /// The first option whose check refuses its value in `values`; nullopt when all pass.
    std::optional<refused_setting> refused(const config::values& values) const {
        for (const auto& c : checks_)
            if (auto r = c(values)) return r;
        return std::nullopt;
    }

    /// Adds the options to a service's schema.
    void declare(config::schema& schema) const {
        for (const auto& o : options_) schema.add(o);
    }
    /// A struct S with every option's validated value.
    S read(const config::values& values) const {
        S out{};
        for (const auto& r : readers_) r(values, out);
        return out;
    }

  private:
    template <class M>
    static constexpr bool is_duration = requires {
        typename M::rep;
        typename M::period;
    };

    template <class M>
    static constexpr config::kind kind_of() {
        if constexpr (std::same_as<M, std::string>)
            return config::kind::string;
        else if constexpr (std::same_as<M, bool>)
            return config::kind::boolean;
        else if constexpr (std::integral<M>)
            return config::kind::integer;
        else if constexpr (std::floating_point<M>)
            return config::kind::number;
        else if constexpr (is_duration<M>)
            return config::kind::duration;
        else
            static_assert(is_duration<M>,
                          "keel::app::settings_schema: a setting is a std::string, bool, integer, "
                          "floating-point number or std::chrono duration");
    }
    template <class M>
    static config::value to_value(const M& m) {
        if constexpr (is_duration<M>)
            return std::chrono::duration_cast<config::duration>(m);
        else if constexpr (std::same_as<M, bool> || std::same_as<M, std::string>)
            return m;
        else if constexpr (std::integral<M>)
            return static_cast<std::int64_t>(m);
        else
            return static_cast<double>(m);
    }
    template <class M>
    static M from_values(const config::values& v, const std::string& name) {
        if constexpr (is_duration<M>)
            return std::chrono::duration_cast<M>(v.get_duration(name));
        else if constexpr (std::same_as<M, std::string>)
            return v.get_string(name);
        else if constexpr (std::same_as<M, bool>)
            return v.get_bool(name);
        else if constexpr (std::integral<M>)
            return static_cast<M>(v.get_int(name));
        else
            return static_cast<M>(v.get_number(name));
    }

    std::vector<config::option> options_;
    std::vector<std::function<void(const config::values&, S&)>> readers_;
    std::vector<std::function<std::optional<refused_setting>(const config::values&)>> checks_;
};

}  // namespace keel::app
