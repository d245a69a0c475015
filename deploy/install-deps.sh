#!/usr/bin/env bash
# Installs exactly the Debian 12 packages Keel needs that are missing, and any packages named
# as arguments (deploy/fuzz.sh adds its compiler). Idempotent: when everything is present it
# changes nothing and touches no package list.
set -euo pipefail

packages=(
    g++ cmake ninja-build pkg-config ccache git curl procps
    libboost1.81-dev nlohmann-json3-dev libhiredis-dev libspdlog-dev libfmt-dev libssl-dev
    libjemalloc-dev libhowardhinnant-date-dev tzdata libgtest-dev libgmock-dev libbenchmark-dev
    libcli11-dev doxygen openssl
    redis-server redis-tools wrk clang-format
    chromium chromium-driver python3-selenium python3-yaml
    "$@"
)

missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done

if [ ${#missing[@]} -eq 0 ]; then
    echo "keel: all build and test dependencies are installed"
    exit 0
fi

echo "keel: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
"${sudo_cmd[@]}" apt-get update -qq
# Installing redis-server may start a system instance on port 6379; Keel never uses it.
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
