#!/usr/bin/env bash
# Installs Keel from a build tree into a temporary prefix, then configures and builds the
# user service in tests/install/user_service against it, as a user of the package would, and
# runs it with --help. With --timing (docs/benchmarks.md, "Building a service") it also times
# a clean build and the rebuild after an edit to the handler, with and without
# keel_precompile, and prints them. With KEEL_INSTALLED_PREFIX set (ctest does: the install
# tests share one install), it builds against the package installed there instead.
#
#   tests/install/build_user_service.sh <keel build dir> [--timing]
set -euo pipefail
build=$(cd "$1" && pwd)
timing=${2:-}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

prefix=${KEEL_INSTALLED_PREFIX:-$work/prefix}
if [[ -z ${KEEL_INSTALLED_PREFIX:-} ]]; then
    cmake --install "$build" --prefix "$prefix" >/dev/null
fi
cp -r "$here/user_service" "$work/src"

# One configuration and build; prints "<clean s> <rebuild s>".
build_once() {
    local dir=$1
    shift
    cmake -S "$work/src" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_PREFIX_PATH="$prefix" "$@" >/dev/null
    local t0=$(date +%s.%N)
    ninja -C "$dir" >/dev/null
    local t1=$(date +%s.%N)
    echo "// edited $(date +%s%N)" >>"$work/src/greeting_controller.cpp"
    ninja -C "$dir" >/dev/null
    local t2=$(date +%s.%N)
    awk -v a="$t0" -v b="$t1" -v c="$t2" 'BEGIN { print b - a, c - b }'
}

# Outputs are read whole before grep -q looks at them: it stops reading at its match, and
# under pipefail the writer's SIGPIPE would fail a pipeline whose answer was yes.

# No compiler cache here: the figures are what a user's machine does.
export CCACHE_DISABLE=1
result=$(build_once "$work/pch")
help=$("$work/pch/greeter" --help)
grep -q -- "--greeting" <<<"$help" || {
    echo "greeter --help does not list --greeting" >&2
    exit 1
}
# The package's allocator comes with keel::app: a jemalloc build links every service to it.
libraries=$(ldd "$work/pch/greeter")
if grep -q 'KEEL_SERVICE_ALLOCATOR "jemalloc"' "$prefix"/lib*/cmake/keel/keel-config.cmake &&
    ! grep -q libjemalloc <<<"$libraries"; then
    echo "the package was built with jemalloc, but greeter does not link it" >&2
    exit 1
fi
echo "user service built and ran against the installed package"
if [[ $timing == --timing ]]; then
    plain=$(build_once "$work/plain" -DGREETER_NO_PCH=ON)
    printf 'with keel_precompile:    clean %6.1f s, rebuild after one handler %5.1f s\n' $result
    printf 'without keel_precompile: clean %6.1f s, rebuild after one handler %5.1f s\n' $plain
fi
