#pragma once

// The keel command line: parses the arguments (CLI11), runs the chosen command against
// the admin API and maps the outcome to the exit code (0 ok; 1 refused, failed or
// unreachable; 2 bad usage). A library function rather than main() so tests run the
// whole tool in-process, capturing what it prints.
//
//   keel [--url U] [--token T] [--timeout S]
//   <ps|show|journal|cancel|resume|retry|remove-signal|signal|stats|workers> ...
//   keel new <name> [--dir PATH]     (a new service project: new_project.hpp)
//
// --url and --token default to KEEL_ADMIN_URL and KEEL_ADMIN_TOKEN; flags win.

#include <ostream>

namespace keel::cli {

int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace keel::cli
