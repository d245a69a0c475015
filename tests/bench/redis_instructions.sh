#!/usr/bin/env bash
# Redis's instructions per order flow of keel-orders (docs/benchmarks.md, "The cost of one
# order flow"): the counterpart of flow_instructions.sh for the other process. callgrind counts
# every instruction redis-server runs while keel_orders_load drives keel-orders, once with N
# and once with 3N flows; the difference over 2N is what one flow costs Redis, with its
# startup taken out. It measures a change to the scripts or to what the store sends that CPU
# time on a shared VM cannot resolve. Not taken out: work that grows with the run's length
# rather than its flows (Redis's cron, the engines' claim polls), which under valgrind's
# slowdown moves the result by about 3% between runs of one binary.
#
#   ninja -C build keel_orders_load keel-orders
#   tests/bench/redis_instructions.sh BUILD_DIR BINARY [BINARY...]   # keel-orders binaries
#
# keel_orders_load starts redis-server from PATH and kills it at the end, so callgrind could
# not write its counts at exit: they are dumped four times a second (callgrind_control) and
# summed; what ran after the last dump, at most a quarter of a second, is lost.
# Driven as flow_instructions.sh drives keel-orders (concurrency 8, polls every 50 ms). N is
# $KEEL_FLOWS (300). Needs valgrind; about 40 seconds per binary on 2 cores.
set -euo pipefail
source "$(dirname "$0")/per_flow.sh"

build=${1:?usage: redis_instructions.sh BUILD_DIR BINARY [BINARY...]}
shift
flows=${KEEL_FLOWS:-300}
redis=$(command -v redis-server)
dir=$(mktemp -d /tmp/keel-redis-instructions-XXXXXX)
trap 'rm -rf "$dir"' EXIT
mkdir "$dir/bin" "$dir/out"
printf '#!/bin/sh\nexec valgrind --tool=callgrind --callgrind-out-file=%s/out/cg.%%p %s "$@"\n' \
    "$dir" "$redis" >"$dir/bin/redis-server"
chmod +x "$dir/bin/redis-server"

# Instructions redis-server runs for a load of $2 flows of keel-orders binary $1.
count() {
    local binary=$1 n=$2
    rm -f "$dir"/out/*
    PATH="$dir/bin:$PATH" "$build/tests/bench/keel_orders_load" --binary "$(realpath "$binary")" \
        --aof everysec --threads 1 --rounds 1 --orders "$n" --concurrency 8 --poll-ms 50 \
        --floor 0 --reads 0 >"$dir/load.log" 2>&1 &
    local load=$!
    while kill -0 "$load" 2>/dev/null; do
        for pid in $(pgrep -f "callgrind-out-file=$dir/out" || true); do
            callgrind_control -d "$pid" >/dev/null 2>&1 || true
        done
        sleep 0.25
    done
    wait "$load" || { cat "$dir/load.log" >&2; return 1; }
    local total=0 part
    for f in "$dir"/out/cg.*; do
        part=$(callgrind_annotate "$f" 2>/dev/null |
            awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }')
        total=$((total + ${part:-0}))
    done
    echo "$total"
}

per_flow_table "redis instr/flow" "$flows" "$@"
