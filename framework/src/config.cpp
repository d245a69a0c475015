#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <keel/framework/config.hpp>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <utility>

extern char** environ;

namespace keel::config {
namespace {

std::string_view kind_name(kind k) {
    switch (k) {
        case kind::string:
            return "a string";
        case kind::integer:
            return "an integer";
        case kind::number:
            return "a number";
        case kind::boolean:
            return "a boolean (true/false)";
        case kind::duration:
            return "a duration such as 250ms, 2s, 5m, 1h, 3d";
    }
    return "?";
}

std::string to_flag(std::string_view name) {
    std::string flag(name);
    std::replace(flag.begin(), flag.end(), '_', '-');
    return flag;
}

std::string to_env(std::string_view name) {
    std::string env = "KEEL_";
    for (char c : name) env += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return env;
}

template <class T>
std::optional<T> parse_number(std::string_view text) {
    T out{};
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
    if (ec != std::errc{} || end != text.data() + text.size() || text.empty()) return std::nullopt;
    return out;
}

// Converts text from a flag or environment variable to the option's type.
expected<value, std::string> from_text(const option& opt, std::string_view text) {
    switch (opt.type) {
        case kind::string:
            return value{std::string(text)};
        case kind::integer:
            if (auto v = parse_number<std::int64_t>(text)) return value{*v};
            break;
        case kind::number:
            if (auto v = parse_number<double>(text)) return value{*v};
            break;
        case kind::boolean:
            if (text == "true" || text == "1" || text == "yes" || text == "on") return value{true};
            if (text == "false" || text == "0" || text == "no" || text == "off")
                return value{false};
            break;
        case kind::duration:
            if (auto v = parse_duration(text)) return value{*v};
            break;
    }
    return unexpected(fmt::format("'{}' is not {}", text, kind_name(opt.type)));
}

expected<value, std::string> from_json(const option& opt, const nlohmann::json& j) {
    switch (opt.type) {
        case kind::string:
            if (j.is_string()) return value{j.get<std::string>()};
            break;
        case kind::integer:
            if (j.is_number_integer() &&
                (!j.is_number_unsigned() || std::in_range<std::int64_t>(j.get<std::uint64_t>())))
                return value{j.get<std::int64_t>()};
            break;
        case kind::number:
            if (j.is_number()) return value{j.get<double>()};
            break;
        case kind::boolean:
            if (j.is_boolean()) return value{j.get<bool>()};
            break;
        case kind::duration:
            if (j.is_string()) return from_text(opt, j.get<std::string>());
            // Seconds; beyond a century is no duration anyone means (and would overflow).
            if (j.is_number() && j.get<double>() >= 0 && j.get<double>() <= 3.2e9)
                return value{duration{static_cast<std::int64_t>(j.get<double>() * 1000)}};
            break;
    }
    return unexpected(fmt::format("{} is not {}", j.dump(), kind_name(opt.type)));
}

std::optional<std::string> check_range(const option& opt, const value& v) {
    double x = 0;
    if (auto* i = std::get_if<std::int64_t>(&v))
        x = static_cast<double>(*i);
    else if (auto* d = std::get_if<double>(&v))
        x = *d;
    else if (auto* ms = std::get_if<duration>(&v))
        x = static_cast<double>(ms->count()) / 1000.0;
    else
        return std::nullopt;
    if (opt.min && x < *opt.min) return fmt::format("{} is below the minimum {}", x, *opt.min);
    if (opt.max && x > *opt.max) return fmt::format("{} is above the maximum {}", x, *opt.max);
    return std::nullopt;
}

}  // namespace

// Applies sources in increasing precedence; the last assignment of a key wins.
class loader {
  public:
    loader(const schema& s) : schema_(s) {}

    expected<values, error> run(std::span<const std::string_view> args, const environment& env) {
        std::optional<std::string> file;
        std::vector<std::pair<std::string, std::string>> flags;
        for (std::size_t i = 0; i < args.size(); ++i) {
            std::string_view arg = args[i];
            if (arg == "--help" || arg == "-h") {
                out_.help_ = true;
                return std::move(out_);
            }
            if (!arg.starts_with("--") || arg.size() == 2)
                return fail(std::string(arg), "flag", "expected --name value or --name=value");
            arg.remove_prefix(2);
            std::string name, text;
            if (auto eq = arg.find('='); eq != std::string_view::npos) {
                name = arg.substr(0, eq);
                text = arg.substr(eq + 1);
            } else {
                name = arg;
                const option* opt = find_flag(name);
                bool boolean = opt && opt->type == kind::boolean;
                if (boolean && (i + 1 >= args.size() || args[i + 1].starts_with("--"))) {
                    text = "true";
                } else if (i + 1 < args.size()) {
                    text = args[++i];
                } else {
                    return fail("--" + name, "flag", "missing value");
                }
            }
            if (name == "config")
                file = text;
            else
                flags.emplace_back(std::move(name), std::move(text));
        }

        for (const auto& opt : schema_.options()) {
            if (opt.default_value) out_.values_[opt.name] = {*opt.default_value, "default"};
        }
        if (!file) {
            for (const auto& [k, v] : env)
                if (k == "KEEL_CONFIG") file = v;
        }
        if (file) {
            if (auto err = apply_file(*file)) return unexpected(std::move(*err));
        }
        for (const auto& [k, v] : env) {
            if (!k.starts_with("KEEL_") || k == "KEEL_CONFIG") continue;
            const option* opt = find_env(k);
            if (!opt) {
                // The environment is shared with every other program: a KEEL_* variable of a
                // script or another service is not a typo in this service's settings.
                out_.ignored_env_.push_back(k);
                continue;
            }
            if (auto err = assign(*opt, from_text(*opt, v), "env", k)) return unexpected(*err);
        }
        std::map<std::string, std::string, std::less<>> repeated;  // option -> values so far
        for (const auto& [name, text] : flags) {
            const option* opt = find_flag(name);
            if (!opt) return fail("--" + name, "flag", "unknown flag (see --help)");
            std::string joined = text;
            if (opt->repeatable && opt->type == kind::string) {
                auto [it, first] = repeated.try_emplace(opt->name, text);
                if (!first) joined = it->second += "," + text;
            }
            if (auto err = assign(*opt, from_text(*opt, joined), "flag", "--" + name))
                return unexpected(*err);
        }
        for (const auto& opt : schema_.options()) {
            if (!out_.values_.contains(opt.name))
                return fail(opt.name, "config", "required but not set");
        }
        return std::move(out_);
    }

  private:
    unexpected<error> fail(std::string key, std::string source, std::string message) {
        return unexpected(error{std::move(key), std::move(source), std::move(message)});
    }

    const option* find_flag(std::string_view flag) const {
        for (const auto& opt : schema_.options())
            if (to_flag(opt.name) == flag || opt.name == flag) return &opt;
        return nullptr;
    }

    const option* find_env(std::string_view env) const {
        for (const auto& opt : schema_.options())
            if (to_env(opt.name) == env) return &opt;
        return nullptr;
    }

    std::optional<error> assign(const option& opt, expected<value, std::string> v,
                                std::string source, std::string key) {
        if (!v) return error{std::move(key), std::move(source), v.error()};
        if (auto range = check_range(opt, *v))
            return error{std::move(key), std::move(source), *range};
        out_.values_[opt.name] = {std::move(*v), std::move(source)};
        return std::nullopt;
    }

    std::optional<error> apply_file(const std::string& path) {
        std::ifstream in(path);
        if (!in) return error{path, "file", "cannot open the config file"};
        nlohmann::json doc = nlohmann::json::parse(in, nullptr, false);
        if (doc.is_discarded()) return error{path, "file", "not valid JSON"};
        if (!doc.is_object()) return error{path, "file", "the top level must be a JSON object"};
        for (const auto& [key, j] : doc.items()) {
            const option* opt = schema_.find(key);
            if (!opt) return error{key, "file " + path, "unknown key"};
            if (auto err = assign(*opt, from_json(*opt, j), "file " + path, key)) return err;
        }
        return std::nullopt;
    }

    const schema& schema_;
    values out_;
};

std::string error::what() const {
    return fmt::format("configuration error: {} (from {}): {}", key, source, message);
}

schema& schema::add(option opt) {
    if (find(opt.name)) throw std::logic_error("config option declared twice: " + opt.name);
    if (opt.default_value) {
        auto matches = [&] {
            switch (opt.type) {
                case kind::string:
                    return std::holds_alternative<std::string>(*opt.default_value);
                case kind::integer:
                    return std::holds_alternative<std::int64_t>(*opt.default_value);
                case kind::number:
                    return std::holds_alternative<double>(*opt.default_value);
                case kind::boolean:
                    return std::holds_alternative<bool>(*opt.default_value);
                case kind::duration:
                    return std::holds_alternative<duration>(*opt.default_value);
            }
            return false;
        }();
        if (!matches)
            throw std::logic_error("config option " + opt.name + ": default has the wrong type");
    }
    options_.push_back(std::move(opt));
    return *this;
}

schema& schema::add(std::string name, kind type, std::optional<value> default_value,
                    std::string help) {
    return add(option{std::move(name), type, std::move(default_value), std::move(help), {}, {}});
}

const option* schema::find(std::string_view name) const {
    auto it = std::find_if(options_.begin(), options_.end(),
                           [&](const option& o) { return o.name == name; });
    return it == options_.end() ? nullptr : &*it;
}

std::string schema::usage(std::string_view program) const {
    std::string out =
        fmt::format("usage: {} [--config FILE] [--name value ...]\n\noptions:\n", program);
    for (const auto& opt : options_) {
        std::string def = "required";
        if (opt.default_value) {
            def = std::visit(
                [](const auto& v) -> std::string {
                    using V = std::decay_t<decltype(v)>;
                    if constexpr (std::is_same_v<V, std::string>)
                        return '"' + v + '"';
                    else if constexpr (std::is_same_v<V, bool>)
                        return v ? "true" : "false";
                    else if constexpr (std::is_same_v<V, duration>)
                        return fmt::format("{}ms", v.count());
                    else
                        return fmt::format("{}", v);
                },
                *opt.default_value);
            def = "default " + def;
        }
        fmt::format_to(std::back_inserter(out), "  --{:<24} {} [{}; env {}]\n", to_flag(opt.name),
                       opt.help, def, to_env(opt.name));
    }
    return out;
}

bool values::has(std::string_view name) const {
    return values_.find(name) != values_.end();
}

const value& values::get(std::string_view name) const {
    auto it = values_.find(name);
    if (it == values_.end())
        throw std::logic_error(fmt::format("config option not declared: {}", name));
    return it->second.first;
}

template <class T>
static const T& typed(const value& v, std::string_view name) {
    if (auto* p = std::get_if<T>(&v)) return *p;
    throw std::logic_error(fmt::format("config option {} read with the wrong type", name));
}

const std::string& values::get_string(std::string_view n) const {
    return typed<std::string>(get(n), n);
}
std::int64_t values::get_int(std::string_view n) const {
    return typed<std::int64_t>(get(n), n);
}
double values::get_number(std::string_view n) const {
    return typed<double>(get(n), n);
}
bool values::get_bool(std::string_view n) const {
    return typed<bool>(get(n), n);
}
duration values::get_duration(std::string_view n) const {
    return typed<duration>(get(n), n);
}

std::string values::source(std::string_view name) const {
    auto it = values_.find(name);
    return it == values_.end() ? std::string{} : it->second.second;
}

environment process_environment() {
    environment env;
    for (char** e = environ; e && *e; ++e) {
        std::string_view entry(*e);
        auto eq = entry.find('=');
        if (eq == std::string_view::npos) continue;
        env.emplace_back(entry.substr(0, eq), entry.substr(eq + 1));
    }
    return env;
}

expected<values, error> load(const schema& s, std::span<const std::string_view> args,
                             const environment& env) {
    return loader(s).run(args, env);
}

expected<values, error> load(const schema& s, int argc, const char* const* argv) {
    std::vector<std::string_view> args(argv + (argc > 0 ? 1 : 0), argv + argc);
    return load(s, args, process_environment());
}

std::optional<duration> parse_duration(std::string_view text) {
    using namespace std::chrono;
    struct unit {
        std::string_view suffix;
        std::int64_t ms;
    };
    static constexpr unit units[] = {
        {"ms", 1}, {"s", 1000}, {"m", 60'000}, {"h", 3'600'000}, {"d", 86'400'000}};
    for (const auto& u : units) {
        if (!text.ends_with(u.suffix)) continue;
        auto digits = text.substr(0, text.size() - u.suffix.size());
        // "5ms" also ends with "s": only accept when what is left is a number.
        auto n = parse_number<std::int64_t>(digits);
        if (!n || *n < 0) continue;
        if (*n > std::numeric_limits<std::int64_t>::max() / u.ms) return std::nullopt;
        return duration{*n * u.ms};
    }
    return std::nullopt;
}

}  // namespace keel::config
