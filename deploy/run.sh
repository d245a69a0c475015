#!/usr/bin/env bash
# The quickstart: install what is missing, build, start a local redis-server with
# deploy/redis.conf (AOF on) in .run/redis, and run the service in the foreground.
# Ctrl-C stops the service gracefully, then Redis.
#   deploy/run.sh [service flags...]
# KEEL_REDIS_PORT: Redis's port (6390). KEEL_RUN_DIR: where Redis keeps its data (.run).
# KEEL_SERVICE: a service binary to run instead of building and running keel-orders.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

"$root/deploy/install-deps.sh"
if [ -z "${KEEL_SERVICE:-}" ]; then
    KEEL_BUILD_ARGS=(-DKEEL_BUILD_TESTS=OFF -DKEEL_BUILD_BENCHMARKS=OFF)
    "$root/deploy/build.sh" "$root/build-run" "${KEEL_BUILD_ARGS[@]}"
fi

data="${KEEL_RUN_DIR:-$root/.run}/redis"
mkdir -p "$data"
port="${KEEL_REDIS_PORT:-6390}"
redis_pid=""
# Pings give up after 2 s: a port held by something that never answers is not a Redis.
ping_redis() { timeout 2 redis-cli -p "$port" ping >/dev/null 2>&1; }
if ping_redis; then
    echo "keel: using the redis-server already answering on port $port"
else
    # Its own session: Ctrl-C reaches the service only; Redis stops after it (EXIT trap).
    setsid redis-server "$root/deploy/redis.conf" --dir "$data" --port "$port" \
        --daemonize no --logfile "$data/redis.log" &
    redis_pid=$!
    for _ in $(seq 1 100); do
        ping_redis && break
        sleep 0.05
    done
    echo "keel: redis-server on 127.0.0.1:$port, data in $data"
fi

stop_redis() {
    if [ -n "$redis_pid" ]; then
        kill "$redis_pid" 2>/dev/null || true
        wait "$redis_pid" 2>/dev/null || true
    fi
}
trap stop_redis EXIT

service="${KEEL_SERVICE:-}"
if [ -z "$service" ]; then
    if [ -x "$root/build-run/examples/orders/keel-orders" ]; then
        service="$root/build-run/examples/orders/keel-orders"
    else
        service="$root/build-run/examples/hello/keel-hello"
    fi
fi
echo "keel: starting $(basename "$service") (Ctrl-C to stop)"
"$service" --redis "redis://127.0.0.1:$port" "$@" &
service_pid=$!
trap 'kill -TERM "$service_pid" 2>/dev/null || true' INT TERM
wait "$service_pid" || true
wait "$service_pid" 2>/dev/null || true
