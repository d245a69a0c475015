#!/usr/bin/env bash
# Compiles one guide page's samples without the build system, for writing a page:
#   docs/guide/samples/check.sh docs/guide/<page>.md [build dir, default build]
# The build does the same for every page (docs/guide/samples/CMakeLists.txt).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
page=$1
build=${2:-$root/build}
stem=$(basename "$page" .md)
unit=$(mktemp --suffix=.cpp)
trap 'rm -f "$unit"' EXIT
python3 "$root/docs/guide/samples/extract.py" "$page" "$unit" "$root"
pch=$build/tools/keel/CMakeFiles/keel_pch.dir/cmake_pch.hxx   # the usual headers, if built
includes=()
[[ -f $pch ]] && includes+=(-include "$pch")
for m in app admin http framework di process signals; do includes+=(-I"$root/$m/include"); done
g++ -std=c++20 -fsyntax-only -Wall -Wextra -Wno-missing-field-initializers \
    -DBOOST_ASIO_NO_DEPRECATED -DBOOST_ASIO_SEPARATE_COMPILATION -DBOOST_BEAST_SEPARATE_COMPILATION \
    -DSPDLOG_FMT_EXTERNAL -DSPDLOG_COMPILED_LIB -D_FILE_OFFSET_BITS=64 \
    "${includes[@]}" -I"$root/docs/guide/samples" "$unit"
echo "docs/guide/$stem.md: its samples compile"
