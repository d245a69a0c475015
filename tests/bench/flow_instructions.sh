#!/usr/bin/env bash
# User-space instructions per order flow of keel-orders (docs/benchmarks.md, "The cost of one
# order flow"): callgrind counts every instruction the service runs while keel_orders_load
# drives it, once with N and once with 3N flows; the difference over 2N is the cost of one
# flow with its startup and shutdown taken out. Runs of one binary agree within about 2%
# (timing still moves the polls and the wake loop a little), where CPU time on a shared VM
# moves by more: it measures a change to the service's own code that CPU time cannot
# (system calls, the kernel's share and cache effects are not in it: see the CPU figures).
#
#   ninja -C build keel_orders_load keel-orders
#   tests/bench/flow_instructions.sh BUILD_DIR BINARY [BINARY...]   # e.g. an earlier build, this one
#
# Each flow is driven at concurrency 8 with the driver polling every 50 ms (2 GETs of the
# order and 2 of its fulfilment per flow, included in the count). N is $KEEL_FLOWS (300).
# Needs valgrind; about 20 seconds per binary on 2 cores.
set -euo pipefail
source "$(dirname "$0")/per_flow.sh"

build=${1:?usage: flow_instructions.sh BUILD_DIR BINARY [BINARY...]}
shift
flows=${KEEL_FLOWS:-300}
dir=$(mktemp -d /tmp/keel-instructions-XXXXXX)
trap 'rm -rf "$dir"' EXIT

# Instructions keel-orders runs for a load of $2 flows of binary $1.
count() {
    local binary=$1 n=$2
    local wrapper="$dir/keel-orders"
    printf '#!/bin/sh\nexec valgrind --tool=callgrind --callgrind-out-file=%s/out.%%p %s "$@"\n' \
        "$dir" "$(realpath "$binary")" >"$wrapper"
    chmod +x "$wrapper"
    rm -f "$dir"/out.*
    "$build/tests/bench/keel_orders_load" --binary "$wrapper" --aof everysec --threads 1 \
        --rounds 1 --orders "$n" --concurrency 8 --poll-ms 50 --floor 0 --reads 0 \
        >"$dir/load.log" 2>&1 || { cat "$dir/load.log" >&2; return 1; }
    callgrind_annotate "$dir"/out.* 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }'
}

per_flow_table "instr/flow" "$flows" "$@"
