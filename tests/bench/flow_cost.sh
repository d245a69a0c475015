#!/usr/bin/env bash
# The cost of one order flow (docs/benchmarks.md, "The cost of one order flow"): keel-orders
# beside the floor (tests/bench/flow_floor.hpp) in every configuration, Redis appendfsync
# always and everysec by keel-orders --threads 1 and 2, ROUNDS rounds each; prints the table
# of medians. Or, with `profile`, records perf profiles of keel-orders and redis-server under
# the flow load and prints where their CPU goes (tests/bench/flow_profile.py).
#
#   ninja -C build keel_orders_load keel-orders
#   tests/bench/flow_cost.sh [BUILD_DIR] [ROUNDS] [ORDERS]                 # build, 3, 1000
#   tests/bench/flow_cost.sh profile [BUILD_DIR] [ORDERS] [keel_orders_load flags...]
#
# Logs, profiles and the table go to $KEEL_FLOW_OUT (default /tmp/keel-flow-cost). A default
# run takes about three minutes on 2 cores; the profile, one minute and about 100 MB.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out=${KEEL_FLOW_OUT:-/tmp/keel-flow-cost}
mkdir -p "$out"

# One configuration: the driver's full output to a log, its summary line to stdout.
measure() {
    local driver=$1 aof=$2 threads=$3 rounds=$4 orders=$5
    local log="$out/aof-$aof-threads-$threads.log"
    "$driver" --aof "$aof" --threads "$threads" --rounds "$rounds" --orders "$orders" \
        --census 200 >"$log" 2>&1 || { cat "$log" >&2; return 1; }
    echo "$(grep '^summary ' "$log") $(grep '^census_summary ' "$log" | cut -d' ' -f2-)"
}

# The markdown table of the summary lines (key=value words).
table() {
    awk '
    function v(k) { return (k in f) ? f[k] : 0 }
    BEGIN {
        print "| fsync | threads | flows/s keel / floor | ack -> shipped p50 / p99 ms | keel-orders CPU us (net) | redis CPU us (net) / floor | ratio | keel-orders + redis (net) / floor redis + HTTP floor | ratio | driver CPU us (net) / floor | commands (net) / floor | ratio | top-level (census) / floor | AOF bytes / floor | ratio |"
        print "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    }
    {
        delete f
        for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
        printf "| %s | %s | %.0f / %.0f | %.1f / %.1f | %.0f (%.0f) | %.0f (%.0f) / %.0f | %.1f | %.0f / %.0f + %.0f | %.1f | %.0f (%.0f) / %.0f | %.0f (%.0f) / %.0f | %.1f | %.1f / %.0f | %.0f / %.0f | %.2f |\n",
            v("aof"), v("threads"), v("keel.flows_s"), v("floor.flows_s"), v("keel.p50_ms"),
            v("keel.p99_ms"), v("keel.service_cpu_us"), v("net.service_cpu_us"),
            v("keel.redis_cpu_us"), v("net.redis_cpu_us"), v("floor.redis_cpu_us"),
            v("ratio.redis_cpu_us"), v("keel.flow_cpu_us"), v("floor.redis_cpu_us"),
            v("floor.http_cpu_us"), v("ratio.flow_cpu_us"), v("keel.driver_cpu_us"), v("net.driver_cpu_us"),
            v("floor.driver_cpu_us"), v("keel.calls"), v("net.calls"), v("floor.calls"),
            v("ratio.calls"), v("top_level_per_flow"), v("floor.requests"), v("keel.aof_bytes"),
            v("floor.aof_bytes"), v("ratio.aof_bytes")
    }'
}

profile() {
    local build=${1:-build} orders=${2:-3000}
    shift $(($# < 2 ? $# : 2))
    local dir="$out/profile"
    rm -rf "$dir" && mkdir -p "$dir"
    "$build/tests/bench/keel_orders_load" --orders "$orders" --rounds 1 --floor 0 --reads 0 \
        --perf "$dir" "$@" | tee "$dir/load.log"
    for who in keel-orders redis-server; do
        perf script -i "$dir/$who.data" -F comm,tid,period,ip,sym,dso 2>/dev/null >"$dir/$who.txt"
        echo
        python3 "$here/flow_profile.py" "${who%%-*}" <"$dir/$who.txt" | tee "$dir/$who.breakdown"
        perf report -i "$dir/$who.data" --no-children --sort dso,sym -g none --stdio \
            >"$dir/$who.report" 2>/dev/null
        grep -v -e '^#' -e '^$' "$dir/$who.report" | sed -n 1,40p >"$dir/$who.top"
    done
    echo
    echo "profiles, breakdowns and the top symbols (*.top) are in $dir"
}

if [[ ${1:-} == profile ]]; then
    shift
    profile "$@"
    exit 0
fi

build=${1:-build}
rounds=${2:-3}
orders=${3:-1000}
driver="$build/tests/bench/keel_orders_load"
[[ -x $driver ]] || { echo "no $driver: ninja -C $build keel_orders_load keel-orders" >&2; exit 2; }

echo "$(date -u +%FT%TZ) $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)" |
    tee "$out/summaries"
for aof in always everysec; do
    for threads in 1 2; do
        measure "$driver" "$aof" "$threads" "$rounds" "$orders" | tee -a "$out/summaries"
    done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/summaries"
echo
grep '^summary ' "$out/summaries" | table | tee "$out/table.md"
echo
echo "logs (per-kind commands, census, per-round figures) in $out"
