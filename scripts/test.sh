#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test suite except the long
# `stress` and `perf` ones (run those with: meson test -C build --suite stress),
# then the Python binding's pytest suite (meson suite `python`), whose tests are
# counted one by one. Ends with one summary line: "tests: N passed, N failed, N skipped".
# Arguments go to `meson test` and then select only what they name.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build="$top/build"
"$top/scripts/ensure-build.sh" "$build"
log=$(mktemp)
pylog=$(mktemp)
trap 'rm -f "$log" "$pylog"' EXIT
rc=0
if (($#)); then
  meson test -C "$build" --print-errorlogs --num-processes 2 "$@" | tee "$log" || rc=$?
else
  meson test -C "$build" --no-suite stress --no-suite perf --no-suite python --print-errorlogs \
    --num-processes 2 | tee "$log" || rc=$?
  if meson test -C "$build" --list 2>/dev/null | grep -q ' / python$'; then
    meson test -C "$build" --suite python --print-errorlogs -v | tee "$pylog" || rc=$?
  else
    echo "tent: the Python binding is not built (see the configure summary): pytest skipped" >&2
  fi
fi
count() { awk -v k="$1" '$1 == k {print $2; found=1} END {if (!found) print 0}' "$log"; }
# pytest's last summary line: "40 passed, 1 failed, 2 skipped in 9.1s".
pytest_count() {
  grep -E '^[0-9]+ [a-z]+.* in [0-9.]+s' "$pylog" | tail -1 |
    awk -v k="$1" '{for (i = 2; i <= NF; i++) { w = $i; sub(/,$/, "", w); if (w == k) n += $(i-1) }}
                   END {print n + 0}'
}
py_failed=$(( $(pytest_count failed) + $(pytest_count error) + $(pytest_count errors) ))
if grep -qE ' / python +(FAIL|TIMEOUT)' "$pylog" && ((py_failed == 0)); then
  py_failed=1  # pytest died before its summary
fi
passed=$(( $(count "Ok:") + $(pytest_count passed) ))
failed=$(( $(count "Fail:") + $(count "Timeout:") + py_failed ))
skipped=$(( $(count "Skipped:") + $(pytest_count skipped) ))
echo "tests: ${passed} passed, ${failed} failed, ${skipped} skipped"
exit "$rc"
