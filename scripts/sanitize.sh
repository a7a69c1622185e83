#!/usr/bin/env bash
# Sanitizer passes of CI (issue 11.5), each in its own build directory:
#   scripts/sanitize.sh asan   AddressSanitizer + UndefinedBehaviorSanitizer (build-asan):
#                              the unit, sim, multiprocess and fake-verbs suites
#   scripts/sanitize.sh tsan   ThreadSanitizer (build-tsan): the race tests only
# Extra arguments go to `meson test`. A sanitizer report fails the test that hit it:
# UBSan does not recover, ASan and TSan exit non-zero, LeakSanitizer runs at exit.
# Installs what is missing and configures once, like scripts/test.sh.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
kind=${1:?usage: scripts/sanitize.sh asan|tsan [meson test args...]}
shift
common=(-Dbuildtype=debug -Dperf=false -Dpython_binding=disabled)
case "$kind" in
  asan)
    build="$top/build-asan"
    setup=("-Dsanitizer=address,undefined" "${common[@]}")
    suites=(--suite unit --suite sim --suite multiprocess --suite fake-verbs)
    targets=()  # every test program
    ;;
  tsan)
    build="$top/build-tsan"
    setup=(-Dsanitizer=thread "${common[@]}")
    # The tests whose point is concurrency: callers against the rail poller on one
    # direct CQ (soft and fake verbs), the lcore runtime's rings and idle policy, and
    # the tcp provider (posters, pollers and its service threads on shared queues).
    tests=(engine_direct_race engine_direct_race_fake_verbs lcore_unit lcore_eal fabric_tcp_unit)
    targets=(tests/engine/engine_direct_race tests/lcore/lcore_unit_tests tests/lcore/lcore_eal_tests
             tests/engine/fabric/tcp/fabric_tcp_unit)
    suites=("${tests[@]}")
    ;;
  *) echo "sanitize: unknown pass '$kind' (asan or tsan)" >&2; exit 2 ;;
esac

TENT_BUILD_TARGETS="${targets[*]}" "$top/scripts/ensure-build.sh" "$build" "${setup[@]}"

# Reports end the process with a failure; the children of multiprocess tests
# inherit these. OpenSSL's process globals are not ours (tests/fuzz/lsan.supp).
export ASAN_OPTIONS="abort_on_error=0:detect_leaks=1:strict_string_checks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export LSAN_OPTIONS="suppressions=$top/tests/fuzz/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
# An instrumented process start costs about a second: 100 initiator processes
# instead of 1,000 in the churn test (a leak shows after the first few).
export TENT_CHURN_INITIATORS=${TENT_CHURN_INITIATORS:-100}
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
echo "sanitize: $kind: running ${suites[*]}" >&2
# Instrumented code runs a few times slower: the same tests, longer timeouts.
exec meson test -C "$build" --no-rebuild --print-errorlogs --num-processes 2 \
  --timeout-multiplier 4 "${suites[@]}" "$@"
