#include "allocator.hpp"

#include <dlfcn.h>

#include <cstddef>

namespace keel::app::detail {

std::string allocator_in_use() {
    // jemalloc's control interface: present exactly when jemalloc is linked in (or preloaded).
    using mallctl_fn = int (*)(const char*, void*, std::size_t*, void*, std::size_t);
    auto* ctl = reinterpret_cast<mallctl_fn>(dlsym(RTLD_DEFAULT, "mallctl"));
    if (!ctl) return "the C library's";
    const char* version = nullptr;
    std::size_t size = sizeof version;
    if (ctl("version", &version, &size, nullptr, 0) != 0 || !version) return "jemalloc";
    return std::string("jemalloc ") + version;
}

}  // namespace keel::app::detail
