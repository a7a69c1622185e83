#!/usr/bin/env bash
# The first run on a machine with an NVIDIA GPU: builds tent (unless --no-build) and
# runs tests/gpu/gpu_smoke twice: two processes on one GPU over the soft provider
# (CUDA IPC), then over the tcp provider (staging through pinned host buffers);
# GPU->GPU and host<->GPU WRITE and READ with the bytes checked in device memory, and
# 4 MiB GPU->GPU bandwidth next to the driver's own device-to-device copy.
#   usage: scripts/gpu-smoke.sh [--build-dir DIR] [--no-build]
# Exit: 0 pass, 1 fail, 2 usage, 77 no CUDA driver or no GPU (skipped).
# No CUDA toolkit is needed: tent loads libcuda.so.1 at run time.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build="$top/build"
do_build=1
while (($#)); do
  case "$1" in
    --build-dir) [ $# -ge 2 ] || { echo "gpu-smoke: --build-dir needs a directory" >&2; exit 2; }
                 build=$2; shift 2 ;;
    --no-build) do_build=0; shift ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "gpu-smoke: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

# The driver library, as the dynamic loader finds it (what tent dlopens).
in_library_path() {
  local dirs d
  IFS=: read -r -a dirs <<< "${LD_LIBRARY_PATH:-}"
  for d in "${dirs[@]}"; do
    if [ -n "$d" ] && [ -e "$d/libcuda.so.1" ]; then return 0; fi
  done
  return 1
}
if ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1' && ! in_library_path; then
  echo "gpu-smoke: skipped: libcuda.so.1 not found (no NVIDIA driver on this machine)"
  exit 77
fi
if [ ! -e /dev/nvidiactl ] && ! ls /dev/nvidia[0-9]* >/dev/null 2>&1; then
  echo "gpu-smoke: skipped: no /dev/nvidia* device node (no GPU visible here)"
  exit 77
fi

if ((do_build)); then
  if [ -x "$top/scripts/ensure-build.sh" ] && command -v apt-get >/dev/null; then
    TENT_BUILD_TARGETS="tests/gpu/gpu_smoke" "$top/scripts/ensure-build.sh" "$build" || exit 1
  else
    [ -f "$build/build.ninja" ] || meson setup "$build" "$top" -Dpython_binding=disabled -Dperf=false >&2 || exit 1
    ninja -C "$build" tests/gpu/gpu_smoke >&2 || exit 1
  fi
fi
exe="$build/tests/gpu/gpu_smoke"
[ -x "$exe" ] || { echo "gpu-smoke: $exe is not built (drop --no-build)" >&2; exit 1; }
command -v nvidia-smi >/dev/null && nvidia-smi -L
"$exe" --provider soft
soft=$?
"$exe" --provider tcp
tcp=$?
# 77 only when both passes skipped (no GPU); any failure fails the run.
if [ $soft -eq 77 ] && [ $tcp -eq 77 ]; then exit 77; fi
if [ $soft -ne 0 ] || [ $tcp -ne 0 ]; then
  echo "gpu-smoke: FAIL (soft pass exit $soft, tcp pass exit $tcp)"
  exit 1
fi
echo "gpu-smoke: PASS (soft and tcp)"
