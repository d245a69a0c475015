#!/usr/bin/env bash
# The README's own command, as a user types it: `KEEL_REDIS_PORT=<port> deploy/run.sh`, with
# a wrapper's KEEL_* variable inherited too. deploy/run.sh must start its Redis, the service
# must start although those variables name no option of it, serve the quickstart's first
# request, and stop with its Redis on SIGTERM.
#   run_sh_test.sh <repo root> <keel-orders binary>
set -euo pipefail
root="$1"
service="$2"
dir="$(mktemp -d /tmp/keel-run-sh-XXXXXX)"
run_pid=""
cleanup() {
    if [ -n "$run_pid" ]; then kill -TERM "$run_pid" 2>/dev/null || true; fi
    wait 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT

source "$root/tests/support/run_sh_support.sh"

start_service() {
    redis_port="$(free_port)"
    http_port="$(free_port)"
    echo "starting deploy/run.sh: Redis on $redis_port, HTTP on $http_port"
    KEEL_REDIS_PORT="$redis_port" KEEL_RUN_DIR="$dir" KEEL_SERVICE="$service" KEEL_JOBS=1 \
        "$root/deploy/run.sh" --host 127.0.0.1 --port "$http_port" >"$dir/run.log" 2>&1 &
    run_pid=$!
    wait_ready "localhost:$http_port/readyz"
}
# The service says a port was taken in run.log; Redis in its own log.
redis_log() { cat "$dir/redis/redis.log" >>"$dir/run.log" 2>/dev/null || true; }

ready=""
if start_with_retries start_service "$dir/run.log" "already in use" redis_log; then ready=1; fi
if [ -z "$ready" ]; then
    echo "FAIL: the service did not become ready"
    cat "$dir/run.log"
    exit 1
fi
code="$(curl -s -m 20 -o /dev/null -w '%{http_code}' -X POST "localhost:$http_port/orders" \
    -H 'Content-Type: application/json' \
    -d '{"id": "o-1", "email": "ada@example.com", "address": "1 Harbour Road", "total": 42.5}')"
if [ "$code" != "201" ]; then
    echo "FAIL: POST /orders answered $code"
    cat "$dir/run.log"
    exit 1
fi
grep -q "KEEL_JOBS" "$dir/run.log" || { echo "FAIL: no warning about KEEL_JOBS"; cat "$dir/run.log"; exit 1; }

kill -TERM "$run_pid"
wait "$run_pid" || true
run_pid=""
if timeout 5 redis-cli -p "$redis_port" ping >/dev/null 2>&1; then
    echo "FAIL: Redis still answers after deploy/run.sh ended"
    exit 1
fi
echo "run_sh_test: 1 passed, 0 failed"
