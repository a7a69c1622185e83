#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test suite except the long
# `stress` and `perf` ones (run those with: meson test -C build --suite stress).
# Ends with one summary line: "tests: N passed, N failed, N skipped".
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build="$top/build"
"$top/scripts/ensure-build.sh" "$build"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
rc=0
meson test -C "$build" --no-suite stress --no-suite perf --print-errorlogs --num-processes 2 "$@" \
  | tee "$log" || rc=$?
count() { awk -v k="$1" '$1 == k {print $2; found=1} END {if (!found) print 0}' "$log"; }
passed=$(count "Ok:")
failed=$(( $(count "Fail:") + $(count "Timeout:") ))
echo "tests: ${passed} passed, ${failed} failed, $(count "Skipped:") skipped"
exit "$rc"
