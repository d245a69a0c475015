#!/usr/bin/env bash
# The whole test suite: install what is missing, build, run every test, then build and run
# the suite again under AddressSanitizer + UndefinedBehaviorSanitizer.
#   deploy/test.sh            (both builds)
#   KEEL_SKIP_SANITIZERS=1 deploy/test.sh
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

"$root/deploy/install-deps.sh"

df -h "$root" | sed 's/^/disk: /'
jobs="${KEEL_JOBS:-$(nproc)}"
test_jobs="${KEEL_TEST_JOBS:-$((jobs * 2))}"

echo "== release build (build/)"
# The console's browser test and the API reference's test run here, once: without a browser
# or doxygen the configure step fails, rather than a test silently not being registered.
"$root/deploy/build.sh" "$root/build" -DKEEL_REQUIRE_BROWSER_TESTS=ON -DKEEL_REQUIRE_API_DOCS=ON
echo "== tests"
ctest --test-dir "$root/build" -j "$test_jobs" --output-on-failure --timeout 300
# On CI nothing reads the release tree again: its gigabytes are freed before the sanitizer
# build, the larger of the two, so that the run needs the disk of one build, not of both.
if [ -n "${CI:-}" ]; then rm -rf "$root/build"; fi

if [ "${KEEL_SKIP_SANITIZERS:-0}" != "1" ]; then
    echo "== sanitizer build (build-asan/: ASan + UBSan)"
    "$root/deploy/build.sh" "$root/build-asan" -DKEEL_SANITIZE=ON -DKEEL_BUILD_BENCHMARKS=OFF \
        -DCMAKE_BUILD_TYPE=Debug
    echo "== tests under ASan + UBSan"
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        ctest --test-dir "$root/build-asan" -j "$test_jobs" --output-on-failure --timeout 600
fi

# Fuzzing: every parser's libFuzzer target for a bounded time (deploy/fuzz.sh, build-fuzz/).
if [ "${KEEL_SKIP_FUZZ:-0}" != "1" ]; then
    echo "== fuzzing (KEEL_SKIP_FUZZ=1 skips)"
    "$root/deploy/fuzz.sh"
fi

echo "keel: all tests passed"
