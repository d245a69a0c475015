#!/usr/bin/env bash
# examples/billing/scripts/run.sh as the example's README uses it, with built binaries and
# ports of its own: it must make its test CA, start Redis, the provider over HTTPS and
# keel-billing, which must then play the README's session (a customer, a subscription, its
# first invoice paid at the provider over HTTPS, a cancel with a refund in integer cents),
# and stop all three on SIGTERM.
#   run_sh_test.sh <repo root> <keel-billing binary> <keel-payments-sim binary>
set -euo pipefail
root="$1"
billing="$2"
sim="$3"
dir="$(mktemp -d /tmp/keel-billing-run-sh-XXXXXX)"
run_pid=""
cleanup() {
    if [ -n "$run_pid" ]; then kill -TERM "$run_pid" 2>/dev/null || true; fi
    wait 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT

fail() {
    echo "FAIL: $*"
    cat "$dir/run.log" 2>/dev/null || true
    cat "$dir/billing/payments-sim.log" 2>/dev/null || true
    exit 1
}

source "$root/tests/support/run_sh_support.sh"

start_run() {
    redis_port="$(free_port)"
    billing_port="$(free_port)"
    provider_port="$(free_port)"
    echo "starting run.sh: Redis on $redis_port, keel-billing on $billing_port," \
        "the provider on $provider_port"
    KEEL_REDIS_PORT="$redis_port" KEEL_BILLING_PORT="$billing_port" \
        KEEL_PROVIDER_PORT="$provider_port" KEEL_RUN_DIR="$dir" \
        KEEL_BILLING_BINARY="$billing" KEEL_PAYMENTS_SIM_BINARY="$sim" \
        "$root/examples/billing/scripts/run.sh" --period 30s >"$dir/run.log" 2>&1 &
    run_pid=$!
    wait_ready "http://127.0.0.1:$billing_port/readyz"
}
# Redis and the provider say a port was taken in their own logs; a new start makes a new CA.
gather_logs() {
    cat "$dir/billing/redis/redis.log" "$dir/billing/payments-sim.log" >>"$dir/run.log" \
        2>/dev/null || true
    rm -rf "$dir/billing"
}

ready=""
if start_with_retries start_run "$dir/run.log" "in use" gather_logs; then ready=1; fi
[ -n "$ready" ] || fail "keel-billing did not become ready"
[ -s "$dir/billing/ca/ca.pem" ] || fail "no test CA in $dir/billing/ca"

api="http://127.0.0.1:$billing_port"
post() { curl -s -m 20 -w '\n%{http_code}' -X POST "$api$1" -H 'Content-Type: application/json' \
    "${@:3}" -d "$2"; }
# The README's session.
out="$(post /customers '{"id": "c-1", "email": "ada@example.com"}')"
[ "$(tail -n1 <<<"$out")" = 201 ] || fail "POST /customers: $out"
out="$(post /subscriptions \
    '{"id": "s-1", "customer": "c-1", "plan": "basic", "card": "4242424242424242"}')"
[ "$(tail -n1 <<<"$out")" = 201 ] || fail "POST /subscriptions: $out"

paid=""
for _ in $(seq 1 200); do
    invoice="$(curl -s -m 5 "$api/invoices/s-1-1" || true)"
    if grep -q '"status":"paid"' <<<"$invoice"; then
        paid=1
        break
    fi
    sleep 0.05
done
[ -n "$paid" ] || fail "invoice s-1-1 not paid: $invoice"
charges="$(curl -s -m 5 --cacert "$dir/billing/ca/ca.pem" \
    "https://localhost:$provider_port/charges?reference=s-1-1")"
grep -q '"status":"succeeded"' <<<"$charges" || fail "no charge at the provider: $charges"

out="$(post /subscriptions/s-1/cancel '{}' -H 'Idempotency-Key: cancel-1')"
[ "$(tail -n1 <<<"$out")" = 200 ] || fail "cancel: $out"
grep -Eq '"refund":[0-9]+[,}]' <<<"$out" || fail "no refund in integer cents: $out"
grep -q '"status":"cancelled"' <<<"$out" || fail "not cancelled: $out"

kill -TERM "$run_pid"
wait "$run_pid" || true
run_pid=""
if timeout 5 redis-cli -p "$redis_port" ping >/dev/null 2>&1; then
    fail "Redis still answers after run.sh ended"
fi
if curl -s -m 2 -o /dev/null --cacert "$dir/billing/ca/ca.pem" \
    "https://localhost:$provider_port/readyz"; then
    fail "the provider still answers after run.sh ended"
fi
if curl -s -m 2 -o /dev/null "$api/readyz"; then
    fail "keel-billing still answers after run.sh ended"
fi
echo "billing run_sh_test: 1 passed, 0 failed"
