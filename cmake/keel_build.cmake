# Build-speed and hygiene settings shared by every Keel target.

find_program(KEEL_CCACHE ccache)
if(KEEL_CCACHE)
    # Precompiled headers need these sloppiness settings to be cacheable. BASEDIR and
    # NOHASHDIR let a fresh clone in another directory (CI) reuse the cache.
    set(CMAKE_CXX_COMPILER_LAUNCHER
        ${CMAKE_COMMAND} -E env
        CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
        CCACHE_BASEDIR=${CMAKE_SOURCE_DIR} CCACHE_NOHASHDIR=1
        ${KEEL_CCACHE})
    message(STATUS "keel: using ccache at ${KEEL_CCACHE}")
endif()

add_compile_options(-Wall -Wextra -Wno-missing-field-initializers)
# hiredis's pkg-config flags define this for its users (keel_framework); defining it for every
# target (a no-op on 64-bit glibc) keeps the shared precompiled headers valid for all of them.
add_compile_definitions(_FILE_OFFSET_BITS=64)

if(KEEL_SANITIZE)
    add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer
                        -fno-sanitize-recover=undefined)
    add_link_options(-fsanitize=address,undefined)
endif()

# Headers every heavy translation unit pulls in, as a precompiled header: the list is in
# keel-pch.cmake, installed with the package so that a user's service gets the same
# (keel_precompile, one PCH per target).
include(${CMAKE_CURRENT_LIST_DIR}/keel-pch.cmake)

# keel_use_pch(target): Keel's own ~30 targets share two PCHs per build directory instead of
# compiling one each: one position-independent (the libraries) and one not (executables), as
# GCC refuses a PCH built with the other -fPIC/-fPIE setting. Each PCH is ~170 MB with debug
# info, so one per target cost ~5 GB per build directory (disk, not only time). Every sharer
# must define BOOST_ASIO_SEPARATE_COMPILATION like the owner (they all link keel_asio); GCC
# warns (-Winvalid-pch) and parses the headers instead when a target's flags do not match.
function(keel_use_pch target)
    if(NOT KEEL_USE_PCH)
        return()
    endif()
    get_target_property(pic ${target} POSITION_INDEPENDENT_CODE)
    if(pic)
        set(owner keel_pch_pic)
    else()
        set(owner keel_pch)
        set(pic OFF)
    endif()
    if(NOT TARGET ${owner})
        add_library(${owner} OBJECT ${PROJECT_SOURCE_DIR}/cmake/keel_pch.cpp)
        target_link_libraries(${owner} PRIVATE keel_asio nlohmann_json::nlohmann_json)
        set_target_properties(${owner} PROPERTIES POSITION_INDEPENDENT_CODE ${pic})
        keel_precompile(${owner})
    endif()
    target_precompile_headers(${target} REUSE_FROM ${owner})
endfunction()

# keel_add_library(<target> <export-name> SOURCES ...): a module's static library, aliased and
# exported as keel::<export-name>, with the module's include/ directory public (headers are
# installed by the module itself, once).
function(keel_add_library target export_name)
    cmake_parse_arguments(arg "" "" "SOURCES" ${ARGN})
    add_library(${target} STATIC ${arg_SOURCES})
    add_library(keel::${export_name} ALIAS ${target})
    target_include_directories(${target} PUBLIC
        $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
        $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
    set_target_properties(${target} PROPERTIES EXPORT_NAME ${export_name}
                                               POSITION_INDEPENDENT_CODE ON)
    set_property(GLOBAL APPEND PROPERTY KEEL_EXPORTED_TARGETS ${target})
endfunction()

# keel_embed_files(<target> DIR <dir> FILES <f>... OUTPUT <name.cpp> INCLUDE <header>
#                  NAMESPACE <ns> TYPE <struct> FUNCTION <name> [COMMENT <text>]
#                  [OPTIONS -D<option>=<value>...]):
# embeds the files (relative to DIR) into a generated source of <target>, regenerated when one
# of them changes (cmake/embed_files.cmake says what the source defines and which OPTIONS it
# takes). The header is looked up in <target>'s private src/ directory.
function(keel_embed_files target)
    cmake_parse_arguments(arg "" "DIR;OUTPUT;INCLUDE;NAMESPACE;TYPE;FUNCTION;COMMENT"
                          "FILES;OPTIONS" ${ARGN})
    set(sources ${arg_FILES})
    list(TRANSFORM sources PREPEND ${arg_DIR}/)
    list(JOIN arg_FILES "," files)  # a list would split the argument
    set(generated ${CMAKE_CURRENT_BINARY_DIR}/${arg_OUTPUT})
    set(script ${PROJECT_SOURCE_DIR}/cmake/embed_files.cmake)
    add_custom_command(
        OUTPUT ${generated}
        COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${arg_DIR} -DFILES=${files} -DOUTPUT=${generated}
                -DINCLUDE=${arg_INCLUDE} -DNAMESPACE=${arg_NAMESPACE} -DTYPE=${arg_TYPE}
                -DFUNCTION=${arg_FUNCTION} ${arg_OPTIONS} -P ${script}
        DEPENDS ${sources} ${script}
        COMMENT "${arg_COMMENT}"
        VERBATIM)
    target_sources(${target} PRIVATE ${generated})
    target_include_directories(${target} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
    set_source_files_properties(${generated} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
endfunction()
