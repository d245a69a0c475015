# Install and export rules so another CMake project can `find_package(keel)` and link
# keel::framework, keel::http, ... Each module appends its targets to KEEL_EXPORTED_TARGETS.

include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

get_property(keel_exported GLOBAL PROPERTY KEEL_EXPORTED_TARGETS)
install(TARGETS ${keel_exported}
        EXPORT keel-targets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT keel-targets
        NAMESPACE keel::
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/keel)

configure_package_config_file(
    ${CMAKE_CURRENT_LIST_DIR}/keel-config.cmake.in
    ${CMAKE_CURRENT_BINARY_DIR}/keel-config.cmake
    INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/keel)
write_basic_package_version_file(
    ${CMAKE_CURRENT_BINARY_DIR}/keel-config-version.cmake
    COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/keel-config.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/keel-config-version.cmake
              ${CMAKE_CURRENT_LIST_DIR}/keel-pch.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/keel)
