#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test suite except the long
# `stress` and `perf` ones (run those with: meson test -C build --suite stress).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build="$top/build"
"$top/scripts/ensure-build.sh" "$build"
exec meson test -C "$build" --no-suite stress --no-suite perf --print-errorlogs --num-processes 2 "$@"
