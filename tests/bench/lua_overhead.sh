#!/usr/bin/env bash
# What a Lua script costs Redis before it does anything (docs/benchmarks.md, "The cost of one
# order flow"): Redis's own time per EVALSHA (INFO commandstats) of a few scripts made from the
# process store's Lua (process/src/lua: final.lua and prelude.lua, the helpers most scripts
# start with), each called N times by redis-benchmark on a redis-server of its own.
#
#   tests/bench/lua_overhead.sh [N]        # N: calls per script, default 50000
set -euo pipefail

lua=$(cd "$(dirname "$0")/../../process/src/lua" && pwd)
calls=${1:-50000}
dir=$(mktemp -d /tmp/keel-lua-XXXXXX)
sock=$dir/redis.sock
redis-server --port 0 --unixsocket "$sock" --dir "$dir" --save '' --appendonly no \
    --daemonize no --logfile "$dir/redis.log" &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do redis-cli -s "$sock" ping >/dev/null 2>&1 && break; sleep 0.05; done

prelude="$(cat "$lua/final.lua" "$lua/prelude.lua")"
cli() { redis-cli -s "$sock" "$@"; }

# One script: load it, call it, print Redis's time per call.
measure() {
    local label=$1 body=$2
    shift 2
    local sha
    sha=$(cli SCRIPT LOAD "$body")
    local first
    first=$(cli EVALSHA "$sha" "$@" 2>&1)
    if [[ $first == ERR* || $first == *"(error)"* ]]; then
        echo "$label: the script fails: $first" >&2
        exit 1
    fi
    cli CONFIG RESETSTAT >/dev/null
    redis-benchmark -s "$sock" -n "$calls" -c 4 -q EVALSHA "$sha" "$@" >/dev/null 2>&1
    printf '%-58s %s us per call\n' "$label" \
        "$(cli INFO commandstats | grep '^cmdstat_evalsha:' | sed 's/.*usec_per_call=\([0-9.]*\).*/\1/')"
}

# A fan_out call as keel-orders sends it for a payment, on a shard where nobody subscribed.
signal='{"at":1795483751846,"key":"14:payment/tx-o-1 /payment/o-1/received","path":"/payment/o-1/received","payload":{"amount":9.5,"transactionId":"tx-o-1"}}'
# KEYS: the shard's subscription set for the signal (no memo key); ARGV: no memo window,
# idempotency key, path, at, signal, no taking worker, now, lease ttl, no refused versions, no
# documents, the subscription key (fan_out.lua says more).
fan_out_args=(1 'keel:{3}:sub:/payment/o-1/received' '' '14:payment/tx-o-1 /payment/o-1/received'
    /payment/o-1/received 1795483751846 "$signal" '' 1795483751846 10000 0 0
    /payment/o-1/received)

measure "return 1" "return 1" 0
measure "prelude, return 1" "$prelude
return 1" 0
measure "SMEMBERS of a missing set" "return redis.call('SMEMBERS', KEYS[1])" 1 'keel:{3}:sub:x'
measure "prelude, SMEMBERS of a missing set" "$prelude
return redis.call('SMEMBERS', KEYS[1])" 1 'keel:{3}:sub:x'
measure "fan_out.lua (with the prelude), no subscriber" "$prelude
$(cat "$lua/fan_out.lua")" "${fan_out_args[@]}"
