#!/usr/bin/env bash
# Runs docs/guide/getting-started.md as written, against an installed Keel package: its
# ```sh session blocks are run in order in one shell (so `cd` carries over), in an empty
# directory, and each command's output is compared with the `# ` lines that follow it; its
# ```sh server block is started in the background. Fails at the first command that fails
# or prints something else than the page says.
#
#   tests/install/getting_started.sh <installed prefix> <page> <redis-server>
#
# How the page is read, inside a ```sh session block:
#   - a line that is not a comment is a command; one ending in `\` goes on on the next line;
#   - the `# ` lines right after a command are its expected stdout, line by line (`#` alone:
#     an empty line; `# ...`: any number of lines); a command without them must only succeed;
#   - a `# ` line at the start of the block or after a blank line is prose, not output.
# Other blocks (```sh, ```cpp) are not run.
#
# What differs from a reader's machine, and only that: Keel is found in <prefix> (PATH,
# CMAKE_PREFIX_PATH), Redis is a redis-server of this script's own on a free port
# (KEEL_REDIS), and the service listens on a port the system picks (KEEL_PORT=0): `curl`
# is a function that sends the page's localhost:8080 there. A GET that does not match yet
# is asked again for up to 10 s: a person typing the next command is slower than the
# engine resuming a process.
set -euo pipefail
prefix=$(cd "$1" && pwd)
page=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
redis_server=$3
work=$(mktemp -d)
redis_pid=
server_pid=
cleanup() {
    [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
    [[ -n $redis_pid ]] && kill "$redis_pid" 2>/dev/null && wait "$redis_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

fail() {
    echo "getting-started.md: $*" >&2
    if [[ -f $work/server.log ]]; then
        echo "---- the service's log:" >&2
        cat "$work/server.log" >&2
    fi
    exit 1
}

# ---- Redis on a free port (never 6379) ----
mkdir -p "$work/redis"
for attempt in $(seq 1 20); do
    redis_port=$((20000 + RANDOM % 30000))
    "$redis_server" --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no \
        --dir "$work/redis" >"$work/redis/log" 2>&1 &
    redis_pid=$!
    for _ in $(seq 1 50); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$redis_port") 2>/dev/null; then break 2; fi
        kill -0 "$redis_pid" 2>/dev/null || break
        sleep 0.1
    done
    kill "$redis_pid" 2>/dev/null || true
    wait "$redis_pid" 2>/dev/null || true
    redis_pid=
done
[[ -n $redis_pid ]] || fail "no redis-server started (last log: $(cat "$work/redis/log"))"

export PATH="$prefix/bin:$PATH" CMAKE_PREFIX_PATH="$prefix"
export KEEL_REDIS="redis://127.0.0.1:$redis_port" KEEL_PORT=0
export CCACHE_DISABLE=1  # a reader's first build has no cache either
service_port=
curl() {
    [[ -n $service_port ]] || fail "curl before the service runs"
    command curl "${@//localhost:8080/localhost:$service_port}"
}

# ---- matching outputs ----
# Whether the lines of $2 match the expected lines of $1 (a "..." line: any lines).
matches() {
    local -a want got
    mapfile -t want <<<"$1"
    mapfile -t got <<<"$2"
    [[ -z $1 ]] && want=()
    [[ -z $2 ]] && got=()
    match_from 0 0
}
match_from() {
    local w=$1 g=$2
    if ((w == ${#want[@]})); then ((g == ${#got[@]})); return; fi
    if [[ ${want[w]} == "..." ]]; then
        local k
        for ((k = g; k <= ${#got[@]}; k++)); do
            match_from $((w + 1)) "$k" && return 0
        done
        return 1
    fi
    ((g < ${#got[@]})) && [[ ${got[g]} == "${want[w]}" ]] && match_from $((w + 1)) $((g + 1))
}

# ---- running the page ----
commands_run=0
# Runs in this shell, not a subshell: a `cd` holds for the commands after it.
run_command() {
    local cmd=$1 want=$2 has_want=$3 got
    commands_run=$((commands_run + 1))
    echo "\$ $cmd"
    local tries=1
    # Only a GET is asked again: it changes nothing.
    if ((has_want)) && [[ $cmd == curl* && $cmd != *" -X "* && $cmd != *" -d "* ]]; then
        tries=100
    fi
    for ((i = 1; i <= tries; i++)); do
        if ! eval "$cmd" >"$work/out"; then
            cat "$work/out" >&2
            fail "this command failed: $cmd"
        fi
        got=$(<"$work/out")
        ((has_want)) || return 0
        matches "$want" "$got" && return 0
        ((i < tries)) && sleep 0.1
    done
    fail "$(printf '%s\nprinted:\n%s\nwhere the page says:\n%s' "$cmd" "$got" "$want")"
}

# Ctrl-C, as the page says, stops the service gracefully.
stop_server() {
    echo "(Ctrl-C)"
    kill -INT "$server_pid"
    local status=0
    wait "$server_pid" || status=$?
    server_pid=
    service_port=
    ((status == 0)) || fail "the service exited with $status after SIGINT"
}

# Starts the service in the background (after stopping the one before, as the page does)
# and waits until it is ready.
start_server() {
    local cmd=$1
    [[ -n $server_pid ]] && stop_server
    [[ -f $work/server.log ]] && mv "$work/server.log" "$work/server.before.log"
    echo "\$ $cmd &"
    (eval "exec $cmd") >"$work/server.log" 2>&1 &
    server_pid=$!
    for _ in $(seq 1 300); do
        kill -0 "$server_pid" 2>/dev/null || fail "the service stopped: $cmd"
        service_port=$(sed -n 's/.* listening on port \([0-9]*\).*/\1/p' "$work/server.log" | head -1)
        if [[ -n $service_port ]] &&
            command curl -sf "localhost:$service_port/readyz" >/dev/null 2>&1; then
            return 0
        fi
        sleep 0.1
    done
    fail "the service was not ready within 30 s: $cmd"
}

# Reads the page; the state: which block we are in, the command being read, its output.
block=
cmd=
want=
have_want=0
flush() {
    if [[ -n $cmd ]]; then
        if [[ $block == server ]]; then start_server "$cmd"; else run_command "$cmd" "$want" "$have_want"; fi
    fi
    cmd=
    want=
    have_want=0
}

cd "$work"
mkdir empty && cd empty
servers=0
while IFS= read -r line || [[ -n $line ]]; do
    if [[ -z $block ]]; then
        case $line in
            '```sh session') block=session ;;
            '```sh server')
                block=server
                servers=$((servers + 1))
                ;;
        esac
        continue
    fi
    if [[ $line == '```' ]]; then
        flush
        block=
        continue
    fi
    if [[ -n $cmd && $cmd == *\\ ]]; then  # a continued command
        cmd+=$'\n'$line
        continue
    fi
    if [[ $line == "#" || $line == "# "* ]]; then
        if [[ -n $cmd ]]; then  # output of the command above
            text=${line#\#}
            text=${text# }
            if ((have_want)); then want+=$'\n'$text; else want=$text; fi
            have_want=1
        fi
        continue
    fi
    flush
    [[ -n $line ]] && cmd=$line
done <"$page"
[[ -z $block ]] || fail "a block is not closed"
((servers >= 1)) || fail "no \`\`\`sh server block: nothing started the service"
((commands_run >= 5)) || fail "only $commands_run commands ran: is the page's format still the one this script reads?"
stop_server
echo "getting-started.md ran as written ($commands_run commands)"
