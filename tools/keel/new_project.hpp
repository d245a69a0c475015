#pragma once

// keel new <name> [--dir PATH]: writes a new service project (templates/) into PATH, by
// default ./<name>: a CMake project on the installed Keel package with the application
// root, a controller, a durable process with a signal and a timer, its test in virtual
// time, and a README with the commands to build, test and run it.
//
// The name is the service's executable, CMake project and (with '-' as '_') C++ namespace:
// [a-z][a-z0-9-]*, at most 64 characters, and none of the words C++ or CMake reserve.

#include <optional>
#include <ostream>
#include <string>
#include <string_view>

#include "errors.hpp"

namespace keel::cli {

struct new_options {
    std::string name;
    std::string dir;  // empty: ./<name>
};

// Why `name` cannot name a project, or nullopt when it can.
std::optional<std::string> invalid_project_name(std::string_view name);

// The template's text for project `name`: @name@ and @namespace@ replaced.
std::string render_template(std::string_view body, std::string_view name);

// Writes the project and lists what it wrote on `out`. Throws usage_error for a bad name,
// std::runtime_error when the directory exists and is not empty or cannot be written.
exit_code run_new(const new_options& options, std::ostream& out);

}  // namespace keel::cli
