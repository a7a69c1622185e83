#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang in build-fuzz and runs the
# `fuzz` suite: each target for a fixed number of executions over its committed
# seeds (docs/fuzzing.md). Installs the Debian 12 packages it needs when missing and
# configures build-fuzz once; later runs rebuild only what changed.
#   usage: scripts/fuzz.sh [extra meson test args...]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build="$top/build-fuzz"

# What configuring tent needs, plus clang and its libFuzzer/sanitizer runtimes.
needed=(build-essential meson ninja-build pkg-config clang libclang-rt-14-dev
        libdpdk-dev libtbb-dev libhwloc-dev libyaml-cpp-dev nlohmann-json3-dev libssl-dev)
absent=()
for p in "${needed[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || absent+=("$p")
done
if ((${#absent[@]})); then
  echo "fuzz: installing missing Debian packages: ${absent[*]}" >&2
  as_root=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "fuzz: as root: apt-get install ${absent[*]}" >&2; exit 1; }
    as_root=(sudo)
  fi
  "${as_root[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq --no-install-recommends \
    "${absent[@]}" >&2
fi

if [ ! -f "$build/build.ninja" ]; then
  # Only the parsers and their fuzzers: no GoogleTest suites, perf tools or verbs.
  CXX=clang++ meson setup "$build" "$top" -Dfuzz=enabled -Dtests=disabled -Dperf=false \
    -Dverbs=disabled >&2
fi
meson compile -C "$build" fuzzers >&2
exec meson test -C "$build" --suite fuzz --no-rebuild --print-errorlogs --num-processes 2 "$@"
