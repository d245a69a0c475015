#!/usr/bin/env bash
# deploy/Dockerfile's build stage copies a chosen set of the repository's directories: this
# copies exactly those (its COPY lines) into an empty directory and configures them with the
# Dockerfile's flags, so a module the build needs and the Dockerfile leaves out fails here,
# not in a user's `docker build`. Configuring is enough: a missing module is a missing target.
#   tests/e2e/dockerfile_sources_test.sh <repository root>
set -euo pipefail
root=$(cd "$1" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dockerfile="$root/deploy/Dockerfile"

copies=0
while read -r source _; do
    mkdir -p "$work/src/$(dirname "$source")"
    cp -r "$root/$source" "$work/src/$source"
    copies=$((copies + 1))
done < <(awk '/^FROM .* AS build/ { build = 1; next } /^FROM / { build = 0 }
              build && $1 == "COPY" && $2 !~ /^--/ { print $2, $3 }' "$dockerfile")
if ((copies == 0)); then
    echo "no COPY lines found in the build stage of $dockerfile" >&2
    exit 1
fi

# The flags of the build stage's deploy/build.sh line, joined across its continuation lines.
flags=$(awk '/^FROM .* AS build/ { build = 1 } /^FROM / && !/AS build/ { build = 0 }
             build { print }' "$dockerfile" | sed -e ':a' -e '/\\$/N; s/\\\n//; ta' |
    grep 'deploy/build.sh' | grep -o -- '-D[A-Z_]*=[A-Za-z0-9_]*' | tr '\n' ' ')
# shellcheck disable=SC2086
if ! cmake -S "$work/src" -B "$work/build" -G Ninja $flags >"$work/configure.log" 2>&1; then
    cat "$work/configure.log" >&2
    echo "the Dockerfile's build stage does not copy everything its build needs" >&2
    exit 1
fi
echo "the Dockerfile's $copies COPY lines configure with: $flags"
