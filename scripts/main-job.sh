#!/usr/bin/env bash
# The main job: installs what is missing, builds, and runs the foreground/background
# burst comparison (worker baseline vs direct path vs deadline variant) on the soft
# fabric, printing the comparison table. Extra arguments go to the comparison script
# (e.g. --full for the RFC's exact 8-thread, 30 s commands).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build="$top/build"
"$top/scripts/ensure-build.sh" "$build"
exec "$top/perf/run_burst_comparison.sh" --build "$build" "$@"
