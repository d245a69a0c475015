#!/usr/bin/env bash
# Installs Keel from a build tree into <prefix>, emptied first, for the tests that build
# against the installed package (CMakeLists.txt: the keel_installed fixture).
#
#   tests/install/install_package.sh <keel build dir> <prefix>
set -euo pipefail
rm -rf "$2"
cmake --install "$1" --prefix "$2" >/dev/null
echo "installed into $2"
