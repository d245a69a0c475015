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

# A port nobody listens on: the probe's connection is refused. A connection that neither
# succeeds nor fails within a second is a listener whose backlog is full (another test's
# silent server): taken too.
free_port() {
    local port rc
    for _ in $(seq 1 50); do
        port=$((20000 + RANDOM % 20000))
        rc=0
        timeout 1 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port" 2>/dev/null || rc=$?
        if [ "$rc" -eq 1 ]; then
            echo "$port"
            return
        fi
    done
    echo "no free port" >&2
    exit 1
}
# Ports picked by probing can be taken by a parallel test before the service binds them:
# start again on other ports when that happens.
start_service() {
    redis_port="$(free_port)"
    http_port="$(free_port)"
    echo "starting deploy/run.sh: Redis on $redis_port, HTTP on $http_port"
    KEEL_REDIS_PORT="$redis_port" KEEL_RUN_DIR="$dir" KEEL_SERVICE="$service" KEEL_JOBS=1 \
        "$root/deploy/run.sh" --host 127.0.0.1 --port "$http_port" >"$dir/run.log" 2>&1 &
    run_pid=$!
    # Up to 60 s by the clock: on two busy cores, Redis and the service can be slow to start,
    # and a port another test's silent listener took meanwhile makes each probe wait its 2 s.
    local deadline=$((SECONDS + 60))
    while [ "$SECONDS" -lt "$deadline" ]; do
        if curl -sf -m 2 "localhost:$http_port/readyz" >/dev/null 2>&1; then return 0; fi
        if ! kill -0 "$run_pid" 2>/dev/null; then break; fi
        sleep 0.05
    done
    echo "not ready after $((SECONDS - deadline + 60)) s"
    return 1
}

ready=""
for attempt in 1 2 3; do
    if start_service; then
        ready=1
        break
    fi
    kill -TERM "$run_pid" 2>/dev/null || true
    wait "$run_pid" 2>/dev/null || true
    run_pid=""
    # The service says so in run.log; Redis in its own log.
    cat "$dir/redis/redis.log" >>"$dir/run.log" 2>/dev/null || true
    grep -q "already in use" "$dir/run.log" || break
    echo "attempt $attempt: a port was taken meanwhile; trying others"
done
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
