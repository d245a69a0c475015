#!/usr/bin/env bash
# What the operators' index costs durable-step throughput: runs keel_process_redis_bench built
# without the index (b97de9a^) and with it, alternately (before, after, before, after, ...),
# with the same arguments, and reports each round's durable steps/s (the bench's
# "durable steps/s, M instances x K steps" row: the median of its own internal rounds, each
# on a fresh redis-server) and the median of the per-round ratios after / before.
#
#   tests/bench/index_cost.sh BEFORE_BINARY AFTER_BINARY [ROUNDS] [-- BENCH ARGS...]
#
# ROUNDS defaults to 9; the bench arguments default to
#   --instances 1000 --steps 20 --rounds 5 --latency-samples 1
# the bench's durable-steps scenario with K = 20 steps per instance as in docs/benchmarks.md,
# but 1000 instances instead of 200: at 200 one measurement lasts ~50 ms and the per-round
# ratio ranged 0.57 to 1.14 on the 2-core machine, at 1000 it ranged 0.84 to 1.01.
# --latency-samples 1 keeps the bench's latency part (not used here) short.
# Build the two binaries, e.g.:
#   git worktree add /tmp/keel-before b97de9a^
#   cmake -S /tmp/keel-before -B /tmp/keel-before/build-bench -G Ninja \
#         -DCMAKE_BUILD_TYPE=RelWithDebInfo && ninja -C /tmp/keel-before/build-bench keel_process_redis_bench
#   cmake -S . -B build-bench -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKEEL_BUILD_TOOLS=OFF \
#         && ninja -C build-bench keel_process_redis_bench
#   tests/bench/index_cost.sh /tmp/keel-before/build-bench/tests/bench/keel_process_redis_bench \
#                             build-bench/tests/bench/keel_process_redis_bench
set -euo pipefail

if [[ $# -lt 2 ]]; then
    sed -n '2,23p' "$0" >&2
    exit 64
fi
before=$1
after=$2
shift 2
rounds=9
if [[ $# -gt 0 && $1 != "--" ]]; then
    rounds=$1
    shift
fi
[[ $# -gt 0 && $1 == "--" ]] && shift
args=("$@")
[[ ${#args[@]} -eq 0 ]] && args=(--instances 1000 --steps 20 --rounds 5 --latency-samples 1)

# Prints "<keel steps/s> <raw baseline steps/s>" from one run of the bench.
measure() {
    local out
    out=$("$1" "${args[@]}" 2>/dev/null)
    awk -F'|' '/^\| durable steps\/s/ { gsub(/ /, "", $3); gsub(/ /, "", $4); print $3, $4 }' \
        <<<"$out"
}

echo "bench arguments: ${args[*]}"
echo "| round | before steps/s | after steps/s | after/before | before keel/raw | after keel/raw |"
echo "|---:|---:|---:|---:|---:|---:|"
ratios=()
befores=()
afters=()
for ((r = 1; r <= rounds; ++r)); do
    read -r b b_raw < <(measure "$before")
    read -r a a_raw < <(measure "$after")
    if [[ -z ${b:-} || -z ${a:-} ]]; then
        echo "round $r: no 'durable steps/s' line from a bench run" >&2
        exit 1
    fi
    ratio=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3f", a / b }')
    printf '| %d | %s | %s | %s | %s | %s |\n' "$r" "$b" "$a" "$ratio" \
        "$(awk -v k="$b" -v w="$b_raw" 'BEGIN { printf "%.3f", k / w }')" \
        "$(awk -v k="$a" -v w="$a_raw" 'BEGIN { printf "%.3f", k / w }')"
    ratios+=("$ratio")
    befores+=("$b")
    afters+=("$a")
done

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END {
    if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

m=$(median "${ratios[@]}")
echo
echo "median before: $(median "${befores[@]}") steps/s; median after: $(median "${afters[@]}") steps/s"
echo "median ratio after/before: $m (range $(printf '%s\n' "${ratios[@]}" | sort -g | head -1) to $(printf '%s\n' "${ratios[@]}" | sort -g | tail -1))"
awk -v m="$m" 'BEGIN { printf "index cost: %.1f%% of durable-step throughput (target < 10%%): %s\n",
    (1 - m) * 100, (1 - m) < 0.10 ? "PASS" : "FAIL" }'
