# keel_precompile(<target>): compiles the headers every Keel translation unit pulls in (Asio's
# coroutine machinery, nlohmann::json, the standard library's usual suspects) once per
# target, as a precompiled header. Keel's own targets use it; the installed package
# provides it to a service's CMake project (after find_package(keel)):
#
#   add_executable(my-service main.cpp handlers.cpp)
#   target_link_libraries(my-service PRIVATE keel::app)
#   keel_precompile(my-service)
#
# Rebuilding after an edit to one handler then compiles that file against the PCH instead
# of re-parsing Asio (docs/benchmarks.md, "Building a service").

set(KEEL_PCH_HEADERS
    <boost/asio/any_io_executor.hpp>
    <boost/asio/awaitable.hpp>
    <boost/asio/co_spawn.hpp>
    <boost/asio/io_context.hpp>
    <boost/asio/steady_timer.hpp>
    <boost/asio/use_awaitable.hpp>
    <nlohmann/json.hpp>
    <chrono>
    <functional>
    <memory>
    <optional>
    <string>
    <string_view>
    <vector>)

function(keel_precompile target)
    target_precompile_headers(${target} PRIVATE ${KEEL_PCH_HEADERS})
endfunction()
