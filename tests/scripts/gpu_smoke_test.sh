#!/usr/bin/env bash
# scripts/gpu-smoke.sh without a GPU: usage errors (exit 2), --help, and the no-driver
# path (exit 77 with the reason) where libcuda.so.1 is absent, as on the build machine.
set -uo pipefail
src=${TENT_TEST_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
script="$src/scripts/gpu-smoke.sh"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
pass() { echo "ok: $*"; }
smoke() { output=$("$script" "$@" 2>&1); rc=$?; }
expect_rc() {
  if [ "$rc" = "$1" ]; then pass "$2 (exit $rc)"; else fail "$2: exit $rc, expected $1"; echo "$output"; fi
}

if bash -n "$script"; then pass "bash -n"; else fail "bash -n"; fi
if command -v shellcheck >/dev/null 2>&1; then
  if shellcheck "$script"; then pass "shellcheck"; else fail "shellcheck"; fi
fi
smoke --bogus
expect_rc 2 "an unknown argument"
smoke --build-dir
expect_rc 2 "--build-dir without a directory"
smoke --help
expect_rc 0 "--help"
if ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1'; then
  echo "skip: this machine has libcuda.so.1; the no-driver path is not checked"
else
  smoke --no-build
  expect_rc 77 "no CUDA driver"
  if grep -qF "libcuda.so.1 not found" <<<"$output"; then pass "the skip says why"; else
    fail "the skip says why: $output"; fi
fi
exit $((fails > 0))
