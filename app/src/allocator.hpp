#pragma once

// Which malloc this process runs on, for the start-up log: services built on keel::app link
// jemalloc unless configured otherwise (docs/architecture.md, "Build").

#include <string>

namespace keel::app::detail {

// "jemalloc <version>" when jemalloc serves malloc in this process, else "the C library's".
std::string allocator_in_use();

}  // namespace keel::app::detail
