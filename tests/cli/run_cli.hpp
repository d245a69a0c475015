#pragma once

// Runs the keel command line in process, as a shell would run `keel <args>`: its exit code
// and what it wrote to stdout and stderr. For the CLI's tests.

#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "cli.hpp"

namespace keel::cli::testing {

struct cli_result {
    int code = -1;
    std::string out;
    std::string err;
};

inline cli_result run(std::vector<std::string> args) {
    args.insert(args.begin(), "keel");
    std::vector<const char*> argv;
    for (const auto& a : args) argv.push_back(a.c_str());
    std::ostringstream out, err;
    int code = run_cli(static_cast<int>(argv.size()), argv.data(), out, err);
    return {code, out.str(), err.str()};
}

inline bool contains(const std::string& text, std::string_view part) {
    return text.find(part) != std::string::npos;
}

}  // namespace keel::cli::testing
