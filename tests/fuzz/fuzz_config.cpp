// fuzz_config: keel::config::load with command-line flags, environment variables and a JSON
// file, against a schema with every kind of option (ranges, a required option, a boolean
// flag), plus parse_duration on every piece.
//
// Input, split on '\n': lines up to the first empty line are the arguments, lines up to the
// next empty line are environment entries (NAME=VALUE), the rest is the config file's text.
// The file is written to one temporary file per process; every --config and KEEL_CONFIG is
// pointed at it (so the input cannot make the loader read /dev/stdin), and a non-empty file
// section is given as KEEL_CONFIG when the input names no file. Errors must come back as
// values naming a key, a source and a reason; a loaded set has every option, of its type,
// within its range, from a known source.

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <keel/framework/config.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.hpp"

namespace {

using namespace keel::config;

const schema& the_schema() {
    static const schema s = [] {
        schema built;
        built.add({"port", kind::integer, value{std::int64_t{8080}}, "HTTP port", 1, 65535});
        built.add({"threads", kind::integer, value{std::int64_t{2}}, "threads", 1, {}});
        built.add("redis", kind::string, std::nullopt, "Redis URL (required)");
        built.add({"ratio", kind::number, value{0.5}, "a ratio", 0, 1});
        built.add("verbose", kind::boolean, value{false}, "chatty");
        built.add({"payment_timeout", kind::duration, value{duration{3 * 86'400'000}},
                   "payment window", 0.001, 30 * 86'400.0});
        built.add("drain_timeout", kind::duration, value{duration{10'000}}, "drain");
        built.add("log_format", kind::string, value{std::string("text")}, "text or json");
        (void)built.usage("fuzz_config");
        return built;
    }();
    return s;
}

// A file of this process's own (libFuzzer's -jobs and -fork run several), removed at exit.
char config_path[4096];

const char* config_file() {
    if (config_path[0]) return config_path;
    const char* dir = std::getenv("TMPDIR");
    std::snprintf(config_path, sizeof config_path, "%s/keel-fuzz-config-XXXXXX",
                  dir && *dir ? dir : "/tmp");
    int fd = mkstemp(config_path);
    if (fd < 0) {
        std::perror("fuzz_config: mkstemp");
        std::abort();
    }
    close(fd);
    std::atexit([] { std::remove(config_path); });
    return config_path;
}

std::vector<std::string_view> lines_of(std::string_view& rest) {
    std::vector<std::string_view> out;
    while (!rest.empty()) {
        auto newline = rest.find('\n');
        auto line = rest.substr(0, newline);
        rest = newline == std::string_view::npos ? std::string_view{} : rest.substr(newline + 1);
        if (line.empty()) break;
        out.push_back(line);
    }
    return out;
}

void check_loaded(const values& v) {
    if (v.help_requested()) return;
    for (const auto& opt : the_schema().options()) {
        KEEL_FUZZ_CHECK(v.has(opt.name));
        auto source = v.source(opt.name);
        KEEL_FUZZ_CHECK(source == "default" || source == "env" || source == "flag" ||
                        source.starts_with("file"));
        double x = 0;
        switch (opt.type) {
            case kind::string:
                (void)v.get_string(opt.name);
                continue;
            case kind::boolean:
                (void)v.get_bool(opt.name);
                continue;
            case kind::integer:
                x = static_cast<double>(v.get_int(opt.name));
                break;
            case kind::number:
                x = v.get_number(opt.name);
                break;
            case kind::duration:
                KEEL_FUZZ_CHECK(v.get_duration(opt.name).count() >= 0);
                x = static_cast<double>(v.get_duration(opt.name).count()) / 1000.0;
                break;
        }
        if (opt.min) KEEL_FUZZ_CHECK(!(x < *opt.min));
        if (opt.max) KEEL_FUZZ_CHECK(!(x > *opt.max));
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string_view rest = keel::fuzz::as_text(data, size);
    const std::string file = config_file();
    const std::string file_flag = "--config=" + file;

    std::vector<std::string> args;
    for (auto line : lines_of(rest)) {
        if (auto d = parse_duration(line)) KEEL_FUZZ_CHECK(d->count() >= 0);
        args.emplace_back(line.starts_with("--config") ? std::string_view(file_flag) : line);
    }
    environment env;
    bool names_file = false;
    for (auto line : lines_of(rest)) {
        auto eq = line.find('=');
        std::string name(line.substr(0, eq));
        std::string text(eq == std::string_view::npos ? "" : line.substr(eq + 1));
        if (name == "KEEL_CONFIG") text = file;
        names_file = names_file || name == "KEEL_CONFIG";
        env.emplace_back(std::move(name), std::move(text));
    }
    std::ofstream(file, std::ios::binary | std::ios::trunc)
        .write(rest.data(), std::streamsize(rest.size()));
    if (!rest.empty() && !names_file) env.emplace_back("KEEL_CONFIG", file);

    std::vector<std::string_view> arg_views(args.begin(), args.end());
    auto loaded = load(the_schema(), std::span<const std::string_view>(arg_views), env);
    if (loaded) {
        check_loaded(*loaded);
    } else {
        const auto& e = loaded.error();
        KEEL_FUZZ_CHECK(!e.source.empty() && !e.message.empty());
        KEEL_FUZZ_CHECK(!e.what().empty());
    }
    return 0;
}
