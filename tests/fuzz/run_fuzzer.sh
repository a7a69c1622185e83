#!/usr/bin/env bash
# One libFuzzer target for a fixed number of executions, as the `fuzz` suite runs it:
#   run_fuzzer.sh FUZZER RUNS OUT_PREFIX DICT|- SEED_DIR [SEED_DIR...]
# libFuzzer writes the inputs it finds into its first corpus directory: that is
# OUT_PREFIX"corpus" (emptied first), so the committed seeds never change. A crash,
# leak, timeout or failed check saves the input as OUT_PREFIX<kind>-<sha1> and fails.
set -euo pipefail
fuzzer=$1 runs=$2 prefix=$3 dict=$4
shift 4
rm -rf "${prefix}corpus"
mkdir -p "${prefix}corpus"
# libFuzzer's own exit codes (77 on a crash, 70 on a timeout) would read as "skipped"
# and "error" to meson: every finding exits 1.
args=(-runs="$runs" -seed=1 -timeout=30 -error_exitcode=1 -timeout_exitcode=1
      -artifact_prefix="$prefix" -print_final_stats=1)
[ "$dict" != "-" ] && args+=(-dict="$dict")
# OpenSSL's process-lifetime globals (lsan.supp) are not leaks of ours.
export LSAN_OPTIONS="suppressions=$(dirname "$0")/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
# exec: meson's timeout signal must reach the fuzzer itself, not only this shell.
exec "$fuzzer" "${args[@]}" "${prefix}corpus" "$@"
