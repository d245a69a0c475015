# Shared by the tests that run an example's run.sh as its README does
# (tests/e2e/run_sh_test.sh, tests/billing_e2e/run_sh_test.sh): free ports, waiting until a
# service is ready, and starting again on other ports when a parallel test took one
# meanwhile. Source it; the functions use the caller's `run_pid`.

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

# wait_ready URL: until URL answers 2xx, up to 60 s by the clock (on two busy cores the
# services can be slow to start, and a port another test's silent listener took meanwhile
# makes each probe wait its 2 s), or until $run_pid has exited.
wait_ready() {
    local url="$1" deadline=$((SECONDS + 60))
    while [ "$SECONDS" -lt "$deadline" ]; do
        if curl -sf -m 2 "$url" >/dev/null 2>&1; then return 0; fi
        if ! kill -0 "$run_pid" 2>/dev/null; then break; fi
        sleep 0.05
    done
    echo "not ready after $((SECONDS - deadline + 60)) s"
    return 1
}

# start_with_retries START LOG PATTERN [AFTER]: runs START (which picks ports, starts the
# script in the background setting run_pid, and returns wait_ready's answer) up to three
# times. After a failed start it stops what was started, runs AFTER (to gather logs into LOG
# and clear what the start left), and tries other ports only when LOG matches PATTERN (a
# port taken meanwhile); otherwise it gives up. Returns 0 once a start succeeded.
start_with_retries() {
    local start="$1" log="$2" pattern="$3" after="${4:-}"
    for attempt in 1 2 3; do
        if "$start"; then return 0; fi
        kill -TERM "$run_pid" 2>/dev/null || true
        wait "$run_pid" 2>/dev/null || true
        run_pid=""
        if [ -n "$after" ]; then "$after"; fi
        grep -qi "$pattern" "$log" || return 1
        echo "attempt $attempt: a port was taken meanwhile; trying others"
    done
    return 1
}
