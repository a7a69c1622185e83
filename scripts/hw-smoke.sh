#!/usr/bin/env bash
# Hardware smoke test for the first machine with an RDMA NIC (docs/fabric.md,
# "Hardware smoke script"). Steps:
#   1. devices   list RDMA devices (ibv_devinfo -l, ibv_devices, /sys/class/infiniband);
#                none: exit 77 (skipped) with a message
#   2. build     scripts/ensure-build.sh (skip with --no-build)
#   3. provider  fabric_verbs_hardware: the verbs provider alone, loopback RC WRITE and
#                READ of 1 MiB on the first device, every byte verified
#   4. pingpong  ibv_rc_pingpong --chk server + client on each device (rdma-core's
#                ibverbs-utils; skipped when it is not installed)
#   5. engine    two tebench processes (target + initiator) on provider verbs, one run
#                per device and one over all of them: WRITE a pattern, READ it back,
#                compare every byte (--check_consistency)
#   6. burst     perf/run_burst_comparison.sh on provider verbs (skip with --no-burst)
# Prints a summary; exits 0 when every step that ran passed, 1 when one failed,
# 2 on a usage error, 77 without an RDMA device.
#
# usage: scripts/hw-smoke.sh [--build DIR] [--out DIR] [--devices a,b] [--no-build]
#          [--no-burst] [--burst-duration S] [--engine-duration S] [--dry-run]
#   --dry-run: find the devices, write the generated configs, print every command,
#              run nothing (exit 0)
# Environment (tests): TENT_HW_SMOKE_SYSFS replaces /sys/class/infiniband and is
# then the only source of the device list.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)

build="$top/build"
out=""
only_devices=""
do_build=1
do_burst=1
dry_run=0
burst_duration=10
engine_duration=1
sysfs=${TENT_HW_SMOKE_SYSFS:-/sys/class/infiniband}

say() { echo "hw-smoke: $*"; }
die_usage() { echo "hw-smoke: $*" >&2; exit 2; }
need_value() { [ $# -ge 2 ] || die_usage "$1 needs a value"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --build) need_value "$@"; build=$2; shift 2 ;;
    --out) need_value "$@"; out=$2; shift 2 ;;
    --devices) need_value "$@"; only_devices=$2; shift 2 ;;
    --no-build) do_build=0; shift ;;
    --no-burst) do_burst=0; shift ;;
    --burst-duration) need_value "$@"; burst_duration=$2; shift 2 ;;
    --engine-duration) need_value "$@"; engine_duration=$2; shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) die_usage "unknown argument '$1' (try --help)" ;;
  esac
done
out=${out:-"$build/hw-smoke"}

# ---- 1. devices ------------------------------------------------------------------
sysfs_devices() {
  local d
  for d in "$sysfs"/*; do
    [ -e "$d" ] && echo "${d##*/}"
  done
  return 0
}
# What rdma-core's tools list (empty when neither tool is installed).
verbs_devices() {
  if command -v ibv_devinfo >/dev/null 2>&1; then
    # "2 HCAs found:" then one indented name per line.
    ibv_devinfo -l 2>/dev/null | awk 'NR > 1 && NF == 1 { print $1 }'
  elif command -v ibv_devices >/dev/null 2>&1; then
    ibv_devices 2>/dev/null | awk 'NR > 2 && NF >= 1 && $1 != "------" { print $1 }'
  fi
  return 0
}
if [ -n "${TENT_HW_SMOKE_SYSFS:-}" ]; then
  sources="$sysfs"
  mapfile -t found < <(sysfs_devices | sort -u)
elif command -v ibv_devinfo >/dev/null 2>&1 || command -v ibv_devices >/dev/null 2>&1; then
  sources="$(command -v ibv_devinfo >/dev/null 2>&1 && echo "ibv_devinfo -l" || echo ibv_devices) and $sysfs"
  mapfile -t found < <(verbs_devices | sort -u)
  mapfile -t in_sysfs < <(sysfs_devices | sort -u)
  if [ "${#found[@]}" -eq 0 ] && [ "${#in_sysfs[@]}" -gt 0 ]; then
    say "$sysfs lists ${in_sysfs[*]} but rdma-core lists no device: the NIC's user-space"
    say "provider library is missing (Debian: ibverbs-providers) or cannot open it"
    exit 1
  fi
else
  sources="$sysfs (rdma-core's ibv_devinfo / ibv_devices are not installed)"
  mapfile -t found < <(sysfs_devices | sort -u)
fi
if [ "${#found[@]}" -eq 0 ]; then
  say "no RDMA device: checked $sources"
  if [ -z "${TENT_HW_SMOKE_SYSFS:-}" ] && command -v ibv_devinfo >/dev/null 2>&1; then
    why=$(ibv_devinfo -l 2>&1 >/dev/null | head -n1 || true)
    if [ -n "$why" ]; then say "rdma-core: $why"; fi
  fi
  say "this machine has no RDMA NIC, or its kernel RDMA support (ib_core and the NIC's"
  say "RDMA driver, e.g. mlx5_ib) is not loaded; skipped (exit 77)"
  exit 77
fi
devices=()
if [ -n "$only_devices" ]; then
  IFS=, read -r -a wanted <<<"$only_devices"
  for d in "${wanted[@]}"; do
    if printf '%s\n' "${found[@]}" | grep -qx -- "$d"; then
      devices+=("$d")
    else
      die_usage "--devices names '$d'; devices found: ${found[*]}"
    fi
  done
else
  devices=("${found[@]}")
fi

# The first port of a device in sysfs (the engine uses fabric.verbs.port, default 1).
port_of() {
  local p first=""
  for p in "$sysfs/$1"/ports/*; do
    [ -e "$p" ] || continue
    p=${p##*/}
    if [ -z "$first" ] || [ "$p" -lt "$first" ]; then first=$p; fi
  done
  echo "${first:-1}"
}
port_attr() {  # $1 device, $2 attribute file under ports/<port>/
  local f; f="$sysfs/$1/ports/$(port_of "$1")/$2"
  if [ -r "$f" ]; then tr -d '\n' <"$f"; else echo "?"; fi
}
# Link rate in Gb/s from "100 Gb/sec (4X EDR)"; 0 when unknown.
rate_gbps() { port_attr "$1" rate | awk '{ print ($1 + 0) }'; }
# RoCE: the GID index of the first RoCE v2 IPv4-mapped GID (the provider's own rule for
# gid_index -1), for ibv_rc_pingpong's -g. Empty on InfiniBand or when none is found.
roce_gid_index() {
  local dev=$1 port gids types f i gid type
  port=$(port_of "$dev")
  gids="$sysfs/$dev/ports/$port/gids"
  types="$sysfs/$dev/ports/$port/gid_attrs/types"
  [ "$(port_attr "$dev" link_layer)" = Ethernet ] || return 0
  [ -d "$gids" ] || return 0
  for f in "$gids"/*; do
    i=${f##*/}
    gid=$(tr -d '\n' <"$f" 2>/dev/null || true)
    type=$(tr -d '\n' <"$types/$i" 2>/dev/null || true)
    case "$gid" in
      0000:0000:0000:0000:0000:ffff:*)
        if [ "$type" = "RoCE v2" ]; then echo "$i"; return 0; fi ;;
    esac
  done
  return 0
}

say "devices: ${devices[*]}"
total_gbps=0
for d in "${devices[@]}"; do
  state=$(port_attr "$d" state)
  say "  $d: port $(port_of "$d"), state $state, link layer $(port_attr "$d" link_layer), rate $(port_attr "$d" rate)"
  case "$state" in *ACTIVE*|"?") ;; *) say "  warning: $d's port is not ACTIVE; its steps will fail" ;; esac
  total_gbps=$(awk -v a="$total_gbps" -v b="$(rate_gbps "$d")" 'BEGIN { print a + b }')
done

# Registering memory pins it: without root or CAP_IPC_LOCK the memlock limit must hold the
# buffers (tebench registers 64 MiB per process here).
memlock=$(ulimit -l)
if [ "$memlock" != unlimited ] && [ "$(id -u)" != 0 ] && [ "$memlock" -lt 262144 ]; then
  say "warning: ulimit -l is $memlock KiB; memory registration may fail (raise it, or run as root)"
fi

mkdir -p "$out"
results=()   # "step|status|detail"
failed=0
record() {   # $1 step, $2 PASS|FAIL|SKIP, $3 detail
  results+=("$1|$2|$3")
  if [ "$2" = FAIL ]; then failed=1; fi
  say "$1: $2${3:+ ($3)}"
}
exec 3>&1    # commands are echoed here even when a step's output goes to its log
run() {      # prints the command; runs it unless --dry-run
  echo "+ $*" >&3
  [ "$dry_run" = 1 ] && return 0
  "$@"
}

# ---- generated configs -----------------------------------------------------------
# One unpinned lcore with every rail poller and a background poller (the layout of
# perf/configs/burst-soft-2rail.yaml), provider verbs on the named devices, the
# control listener on loopback. gid_index is left at -1: the provider picks the
# RoCE v2 IPv4-mapped GID itself (docs/fabric.md), which is part of what is tested.
write_config() {  # $1 file, $2... devices
  local file=$1; shift
  local list; list=$(printf '%s, ' "$@"); list=${list%, }
  cat >"$file" <<EOF
# Generated by scripts/hw-smoke.sh: provider verbs on $list.
fabric:
  provider: verbs
  verbs:
    devices: [$list]
lcores:
  - cpu: -1
    pollers: ["rail:*", "background"]
direct:
  mode: auto
bootstrap:
  listen: "127.0.0.1:0"
log:
  level: warn
EOF
}
for d in "${devices[@]}"; do write_config "$out/verbs-$d.yaml" "$d"; done
write_config "$out/verbs-all.yaml" "${devices[@]}"
say "configs: $out/verbs-*.yaml"

# ---- 2. build --------------------------------------------------------------------
if [ "$dry_run" = 1 ]; then
  run "$top/scripts/ensure-build.sh" "$build"
  record build SKIP "dry run"
elif [ "$do_build" = 1 ]; then
  if run "$top/scripts/ensure-build.sh" "$build"; then
    record build PASS "$build"
  else
    record build FAIL "scripts/ensure-build.sh $build"
  fi
else
  record build SKIP "--no-build"
fi
hw_test="$build/tests/engine/fabric/verbs/fabric_verbs_hardware_test"
tebench="$build/perf/tebench/tebench"
if [ "$dry_run" = 0 ] && [ "$failed" = 0 ]; then
  [ -x "$hw_test" ] || record build FAIL "no $hw_test: the verbs provider is not built (libibverbs-dev, -Dverbs)"
  [ -x "$tebench" ] || record build FAIL "no $tebench (-Dperf)"
fi
if [ "$failed" = 1 ]; then
  say "cannot go on without a build"
fi

# ---- 3. provider loopback ----------------------------------------------------------
if [ "$failed" = 0 ]; then
  rc=0
  run timeout 120 "$hw_test" >"$out/provider.log" 2>&1 || rc=$?
  if [ "$dry_run" = 1 ]; then record provider SKIP "dry run"
  elif [ "$rc" = 0 ]; then record provider PASS "loopback WRITE + READ, 1 MiB, first device"
  elif [ "$rc" = 77 ]; then record provider FAIL "libibverbs lists no device though $sysfs does: is rdma-core's provider library for this NIC installed? ($out/provider.log)"
  else record provider FAIL "exit $rc, $out/provider.log"
  fi
fi

# ---- 4. ibv_rc_pingpong per device -------------------------------------------------
if [ "$failed" = 0 ]; then
  if ! command -v ibv_rc_pingpong >/dev/null 2>&1; then
    record pingpong SKIP "ibv_rc_pingpong not installed (apt-get install ibverbs-utils)"
  else
    port=18515
    for d in "${devices[@]}"; do
      port=$((port + 1))
      gid=$(roce_gid_index "$d")
      args=(-d "$d" -i "$(port_of "$d")" -p "$port" -n 1000 -c)
      [ -n "$gid" ] && args+=(-g "$gid")
      echo "+ ibv_rc_pingpong ${args[*]} &  then  ibv_rc_pingpong ${args[*]} 127.0.0.1" >&3
      if [ "$dry_run" = 1 ]; then record "pingpong $d" SKIP "dry run"; continue; fi
      timeout 60 ibv_rc_pingpong "${args[@]}" >"$out/pingpong-$d-server.log" 2>&1 &
      server=$!
      sleep 1
      crc=0
      timeout 60 ibv_rc_pingpong "${args[@]}" 127.0.0.1 >"$out/pingpong-$d-client.log" 2>&1 || crc=$?
      src=0
      wait "$server" || src=$?
      if [ "$crc" = 0 ] && [ "$src" = 0 ]; then
        record "pingpong $d" PASS "$(grep -m1 'Mbit/sec' "$out/pingpong-$d-client.log" || echo ok)"
      else
        record "pingpong $d" FAIL "client exit $crc, server exit $src; $out/pingpong-$d-*.log"
      fi
    done
  fi
fi

# ---- 5. engine: two processes, write and read back -------------------------------
target_pid=""
stop_target() {
  if [ -n "$target_pid" ] && kill -0 "$target_pid" 2>/dev/null; then
    kill -TERM "$target_pid" 2>/dev/null || true
    wait "$target_pid" 2>/dev/null || true
  fi
  target_pid=""
}
trap stop_target EXIT

engine_round() {  # $1 label, $2 config
  local label=$1 config=$2 log="$out/engine-$1" segment="" line
  local target_cmd=("$tebench" --config="$config" --total_buffer_size=64M)
  local init_cmd=("$tebench" --config="$config" --total_buffer_size=64M --check_consistency=true
                  --start_block_size=4096 --max_block_size=4M --start_batch_size=1
                  --max_batch_size=4 --duration="$engine_duration" --warmup=0)
  echo "+ ${target_cmd[*]} &" >&3
  echo "+ ${init_cmd[*]} --target_seg_name=<segment the target prints>" >&3
  if [ "$dry_run" = 1 ]; then record "engine $label" SKIP "dry run"; return; fi
  "${target_cmd[@]}" >"$log-target.log" 2>&1 &
  target_pid=$!
  for _ in $(seq 1 300); do  # up to 30 s
    line=$(grep -m1 '^tebench target ready:' "$log-target.log" || true)
    [ -n "$line" ] && break
    kill -0 "$target_pid" 2>/dev/null || break
    sleep 0.1
  done
  if [ -z "$line" ]; then
    stop_target
    record "engine $label" FAIL "the target did not get ready; $log-target.log"
    return
  fi
  segment=$(sed -n 's/^tebench target ready: segment=\([^ ]*\).*/\1/p' <<<"$line")
  case "$line" in
    *provider=verbs*) ;;
    *) stop_target; record "engine $label" FAIL "the target is not on provider verbs: $line"; return ;;
  esac
  local rc=0
  "${init_cmd[@]}" --target_seg_name="$segment" >"$log-initiator.log" 2>&1 || rc=$?
  stop_target
  if [ "$rc" = 0 ]; then
    record "engine $label" PASS "4 KiB..4 MiB x batch 1..4 WRITE+READ, every byte compared"
  else
    record "engine $label" FAIL "initiator exit $rc; $log-initiator.log"
  fi
}
if [ "$failed" = 0 ]; then
  for d in "${devices[@]}"; do engine_round "$d" "$out/verbs-$d.yaml"; done
  if [ "${#devices[@]}" -gt 1 ]; then engine_round all "$out/verbs-all.yaml"; fi
fi

# ---- 6. burst comparison on verbs -------------------------------------------------
if [ "$failed" = 0 ]; then
  if [ "$do_burst" = 0 ]; then
    record burst SKIP "--no-burst"
  else
    # --capacity is GB/s: the sum of the ports' rates (Gb/s) / 8.
    capacity=$(awk -v g="$total_gbps" 'BEGIN { c = g / 8; if (c <= 0) c = 1; print c }')
    rc=0
    run "$top/perf/run_burst_comparison.sh" --build "$build" --out "$out/burst" \
      --config "$out/verbs-all.yaml" --capacity "$capacity" --duration "$burst_duration" \
      >"$out/burst.log" 2>&1 || rc=$?
    if [ "$dry_run" = 1 ]; then record burst SKIP "dry run"
    elif [ "$rc" = 0 ]; then record burst PASS "table: $out/burst/comparison.md"
    else record burst FAIL "exit $rc; $out/burst.log"
    fi
  fi
fi

# ---- summary ---------------------------------------------------------------------
echo
echo "hw-smoke summary (provider verbs; devices ${devices[*]}; logs in $out)"
for r in "${results[@]}"; do
  IFS='|' read -r step status detail <<<"$r"
  printf '  %-22s %-4s  %s\n' "$step" "$status" "$detail"
done
if [ "$failed" = 1 ]; then
  echo "hw-smoke: FAILED"
  exit 1
fi
if [ "$dry_run" = 1 ]; then
  echo "hw-smoke: dry run, nothing was run"
  exit 0
fi
echo "hw-smoke: passed"
exit 0
