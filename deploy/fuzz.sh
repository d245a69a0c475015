#!/usr/bin/env bash
# Builds Keel's libFuzzer targets (tests/fuzz) into build-fuzz/ with clang++-16, ASan and
# UBSan, and runs each one for a bounded time on a copy of its seed corpus and regressions.
# A crash, leak, timeout or broken invariant fails the script, naming the saved input.
#   deploy/fuzz.sh                     (every target, 60 s each)
#   deploy/fuzz.sh fuzz_route fuzz_resp
#   KEEL_FUZZ_SECONDS=300 deploy/fuzz.sh
# KEEL_FUZZ_JOBS: targets run at once (default: cores); KEEL_JOBS: build parallelism.
# New inputs found go to build-fuzz/corpus/<target>/, never into the repository.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

# Keel needs clang 16 (Debian 12's default clang 14 cannot compile it); llvm-16 brings the
# symbolizer that turns sanitizer stacks into file:line.
"$root/deploy/install-deps.sh" clang-16 libclang-rt-16-dev llvm-16

build="$root/build-fuzz"
seconds="${KEEL_FUZZ_SECONDS:-60}"
jobs="${KEEL_JOBS:-$(nproc)}"
parallel="${KEEL_FUZZ_JOBS:-$(nproc)}"
all_targets=(fuzz_route fuzz_json_body fuzz_config fuzz_redis_url fuzz_resp fuzz_journal
    fuzz_json_text fuzz_response_head fuzz_rfc3339 fuzz_http_response fuzz_traceparent
    fuzz_signal_text fuzz_cron fuzz_otlp_protobuf fuzz_otlp_headers)
targets=("${all_targets[@]}")
if [ $# -gt 0 ]; then targets=("$@"); fi

echo "== fuzz build (build-fuzz/: clang++-16, libFuzzer, ASan + UBSan)"
build_start=$SECONDS
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++-16 \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" \
    -DKEEL_FUZZ=ON -DKEEL_SANITIZE=ON -DKEEL_BUILD_TESTS=ON -DKEEL_BUILD_BENCHMARKS=OFF \
    -DKEEL_BUILD_EXAMPLES=OFF >/dev/null
cmake --build "$build" -j "$jobs" --target "${targets[@]}"
echo "fuzz: build took $((SECONDS - build_start)) s"

symbolizer="$(command -v llvm-symbolizer-16 || command -v llvm-symbolizer || true)"
export ASAN_SYMBOLIZER_PATH="$symbolizer"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:external_symbolizer_path=$symbolizer"

dictionary_for() {
    case "$1" in
        fuzz_json_body | fuzz_journal | fuzz_json_text | fuzz_signal_text) echo "$root/tests/fuzz/dict/json.dict" ;;
        *) echo "$root/tests/fuzz/dict/$1.dict" ;;
    esac
}

# Runs one target; its log is build-fuzz/logs/<target>.log, its exit code the fuzzer's.
run_target() {
    local target="$1"
    local corpus="$build/corpus/$target" artifacts="$build/artifacts/$target"
    rm -rf "$artifacts"
    mkdir -p "$corpus" "$artifacts" "$build/logs"
    for seeds in "$root/tests/fuzz/corpus/$target" "$root/tests/fuzz/regressions/$target"; do
        if [ -d "$seeds" ]; then cp -n "$seeds"/* "$corpus"/ 2>/dev/null || true; fi
    done
    local dict=()
    if [ -f "$(dictionary_for "$target")" ]; then dict=("-dict=$(dictionary_for "$target")"); fi
    timeout --kill-after=30 "$((seconds + 120))" \
        "$build/tests/fuzz/$target" "$corpus" "${dict[@]}" -max_total_time="$seconds" \
        -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$artifacts/" -print_final_stats=1 \
        >"$build/logs/$target.log" 2>&1
}

report_failure() {
    local target="$1" log="$build/logs/$1.log"
    local first
    first="$(grep -n -m 1 -E 'ERROR: |runtime error:|invariant broken|deadly signal' "$log" | cut -d: -f1 || true)"
    echo "---- $target failed; from $log:"
    if [ -n "$first" ]; then tail -n "+$first" "$log" | head -n 80; else tail -n 60 "$log"; fi
    local input
    input="$(ls -t "$build/artifacts/$target"/* 2>/dev/null | head -n 1 || true)"
    if [ -n "$input" ]; then
        echo "---- input saved as $input ($(stat -c %s "$input") bytes); replay with"
        echo "     $build/tests/fuzz/$target $input"
        echo "---- hexdump (first 512 bytes):"
        head -c 512 "$input" | od -A x -t x1z -v
        echo "---- base64:"
        base64 -w 76 "$input" | head -n 40
    fi
}

echo "== fuzzing ${#targets[@]} targets, ${seconds} s each, ${parallel} at a time"
run_start=$SECONDS
declare -A pids=()
results=()
for target in "${targets[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$parallel" ]; do wait -n || true; done
    run_target "$target" &
    pids[$target]=$!
done
passed=0
failed=0
for target in "${targets[@]}"; do
    if wait "${pids[$target]}"; then
        passed=$((passed + 1))
        echo "ok   $target: $(grep -E '^#[0-9]+.*DONE' "$build/logs/$target.log" | tail -n 1)"
    else
        failed=$((failed + 1))
        results+=("$target")
        echo "FAIL $target"
    fi
done
for target in "${results[@]}"; do report_failure "$target"; done
echo "fuzz: running took $((SECONDS - run_start)) s"
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
