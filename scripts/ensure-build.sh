#!/usr/bin/env bash
# Installs the Debian 12 packages tent needs (when missing), configures the
# meson build directory and builds it incrementally.
#   usage: scripts/ensure-build.sh [BUILD_DIR] [extra meson setup args...]
# TENT_BUILD_TARGETS (space-separated ninja targets) builds only those.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-"$top/build"}
shift || true

packages=(build-essential meson ninja-build pkg-config
          libibverbs-dev rdma-core libdpdk-dev libtbb-dev libhwloc-dev hwloc
          libyaml-cpp-dev libgtest-dev libgmock-dev nlohmann-json3-dev libssl-dev
          prometheus-cpp-dev libcivetweb-dev libcurl4-openssl-dev etcd-server etcd-client
          python3 python3-matplotlib
          pybind11-dev python3-dev python3-numpy python3-pytest python3-mesonpy python3-yaml
          iptables)  # suite netns: packet loss without sch_netem (-m statistic)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "tent: installing missing Debian packages: ${missing[*]}" >&2
  if [ "$(id -u)" -eq 0 ]; then sudo=""; elif command -v sudo >/dev/null; then sudo="sudo"; else
    echo "tent: run as root, or install: apt-get install ${missing[*]}" >&2; exit 1
  fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" "$top" "$@" >&2
fi
read -r -a targets <<< "${TENT_BUILD_TARGETS:-}"
ninja -C "$build" "${targets[@]}" >&2
