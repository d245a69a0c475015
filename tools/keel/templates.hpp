#pragma once

// The files `keel new` writes, embedded from templates/ at build time (CMakeLists.txt):
// each template's name is the file's name with ".in" appended, and its body the file's text
// with @name@ and @namespace@ in place of the project's name and C++ namespace.

#include <span>
#include <string_view>

namespace keel::cli {

struct project_template {
    std::string_view name;  // "main.cpp.in"
    std::string_view body;
};

std::span<const project_template> project_templates();

}  // namespace keel::cli
