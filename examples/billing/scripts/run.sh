#!/usr/bin/env bash
# examples/billing in one command: builds keel-billing and keel-payments-sim (unless given),
# makes a test CA (make_test_ca.sh), starts a local redis-server, the fake provider on HTTPS
# trusting nobody but that CA, and keel-billing in the foreground, charging the provider over
# HTTPS and receiving its signed webhooks. Ctrl-C (or SIGTERM) stops keel-billing gracefully,
# then the provider, then Redis.
#
#   examples/billing/scripts/run.sh [keel-billing flags...]
#
# keel-billing serves plain HTTP on 127.0.0.1:8080. Its demo terms: a 1 minute period and
# dunning waits of 10s,10s,10s; flags given here come after them and win
# (run.sh --period 30d --dunning 1d,3d,5d). The environment:
#   KEEL_REDIS_PORT    Redis's port (6391)            KEEL_BILLING_PORT   keel-billing's (8080)
#   KEEL_PROVIDER_PORT the provider's HTTPS port (8443)
#   KEEL_RUN_DIR       Redis's data and the test CA, under billing/ (.run)
#   KEEL_BILLING_BINARY, KEEL_PAYMENTS_SIM_BINARY  built binaries to run instead of building
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
cd "$root"

billing="${KEEL_BILLING_BINARY:-}"
sim="${KEEL_PAYMENTS_SIM_BINARY:-}"
if [ -z "$billing" ] || [ -z "$sim" ]; then
    "$root/deploy/install-deps.sh"
    cmake -S "$root" -B "$root/build-run" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DKEEL_BUILD_TESTS=OFF -DKEEL_BUILD_BENCHMARKS=OFF >/dev/null
    cmake --build "$root/build-run" -j "${KEEL_JOBS:-$(nproc)}" \
        --target keel-billing keel-payments-sim
    billing="${billing:-$root/build-run/examples/billing/service/keel-billing}"
    sim="${sim:-$root/build-run/examples/billing/keel-payments-sim}"
fi

run_dir="${KEEL_RUN_DIR:-$root/.run}/billing"
redis_port="${KEEL_REDIS_PORT:-6391}"
billing_port="${KEEL_BILLING_PORT:-8080}"
provider_port="${KEEL_PROVIDER_PORT:-8443}"
# This script's own variables name no option of the services: not passed on to them.
unset KEEL_REDIS_PORT KEEL_BILLING_PORT KEEL_PROVIDER_PORT KEEL_RUN_DIR KEEL_BILLING_BINARY \
    KEEL_PAYMENTS_SIM_BINARY KEEL_JOBS
secret="whsec-local-demo"  # the webhooks' HMAC key, shared by the provider and keel-billing
mkdir -p "$run_dir/redis"
"$root/examples/billing/scripts/make_test_ca.sh" "$run_dir/ca" >/dev/null
ca="$run_dir/ca"

redis_pid=""
sim_pid=""
billing_pid=""
stop_all() {
    for pid in "$billing_pid" "$sim_pid" "$redis_pid"; do
        if [ -n "$pid" ]; then
            kill -TERM "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
        fi
    done
}
trap stop_all EXIT

# Pings give up after 2 s: a port held by something that never answers is not a Redis.
ping_redis() { timeout 2 redis-cli -p "$redis_port" ping >/dev/null 2>&1; }
if ping_redis; then
    echo "billing: using the redis-server already answering on port $redis_port"
else
    # Own sessions (setsid): Ctrl-C reaches keel-billing only; the others stop after it.
    setsid redis-server "$root/deploy/redis.conf" --dir "$run_dir/redis" --port "$redis_port" \
        --daemonize no --logfile "$run_dir/redis/redis.log" &
    redis_pid=$!
    for _ in $(seq 1 100); do
        ping_redis && break
        sleep 0.05
    done
    echo "billing: redis-server on 127.0.0.1:$redis_port, data in $run_dir/redis"
fi

setsid "$sim" --host 127.0.0.1 --port "$provider_port" \
    --tls-cert "$ca/server.pem" --tls-key "$ca/server-key.pem" \
    --webhook-url "http://127.0.0.1:$billing_port/webhooks/provider" \
    --webhook-secret "$secret" --rate 20 --pending-delay 2s \
    >"$run_dir/payments-sim.log" 2>&1 &
sim_pid=$!
sim_ready=""
for _ in $(seq 1 200); do
    if curl -sf -m 2 --cacert "$ca/ca.pem" "https://localhost:$provider_port/readyz" \
        >/dev/null 2>&1; then
        sim_ready=1
        break
    fi
    kill -0 "$sim_pid" 2>/dev/null || break
    sleep 0.05
done
if [ -z "$sim_ready" ]; then
    echo "billing: keel-payments-sim did not start; its log:" >&2
    cat "$run_dir/payments-sim.log" >&2
    exit 1
fi
echo "billing: keel-payments-sim on https://localhost:$provider_port (CA $ca/ca.pem," \
    "log $run_dir/payments-sim.log)"

echo "billing: starting keel-billing on http://127.0.0.1:$billing_port (Ctrl-C to stop)"
"$billing" --redis "redis://127.0.0.1:$redis_port" --host 127.0.0.1 --port "$billing_port" \
    --provider-url "https://localhost:$provider_port" --provider-ca "$ca/ca.pem" \
    --provider-secret "$secret" --period 1m --dunning 10s,10s,10s "$@" &
billing_pid=$!
trap 'kill -TERM "$billing_pid" 2>/dev/null || true' INT TERM
wait "$billing_pid" || true
wait "$billing_pid" 2>/dev/null || true
