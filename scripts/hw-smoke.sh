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
#   6. perftest  Debian perftest's ib_write_lat (4 KiB) and ib_write_bw (4 MiB) beside
#                tebench on the same device pair, printing tebench / perftest: each
#                device to itself, and across the first two NICs when there are two
#                (skipped when perftest is not installed: apt-get install perftest)
#   7. burst     perf/run_burst_comparison.sh on provider verbs (skip with --no-burst)
#   8. retransmits  the ports' hardware retransmit counters (sysfs
#                ports/N/hw_counters: local_ack_timeout_err, packet_seq_err,
#                out_of_sequence, duplicate_request, ...) read before step 3 and after
#                the last step; more than --retransmit-limit in total is a storm: FAIL
# Prints a summary; exits 0 when every step that ran passed, 1 when one failed,
# 2 on a usage error, 77 without an RDMA device.
#
# usage: scripts/hw-smoke.sh [--build DIR] [--out DIR] [--devices a,b] [--no-build]
#          [--no-burst] [--burst-duration S] [--engine-duration S] [--dry-run]
#          [--peer HOST [--peer-top DIR]] [--retransmit-limit N]
#   --dry-run: find the devices, write the generated configs, print every command,
#              run nothing (exit 0)
#   --peer HOST: two hosts. The servers (perftest's, the tebench target) run on HOST
#              through ssh (TENT_HW_SMOKE_SSH, default "ssh -o BatchMode=yes"), from the
#              checkout at --peer-top (default: this one's path) with its build there,
#              on the same device names; this host is the client. Steps 3-5 and the
#              burst stay on this host.
#   --retransmit-limit N: retransmit events allowed over the whole run (default 1000)
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
peer=""
peer_top=""
retransmit_limit=1000
ssh_cmd=${TENT_HW_SMOKE_SSH:-"ssh -o BatchMode=yes"}
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
    --peer) need_value "$@"; peer=$2; shift 2 ;;
    --peer-top) need_value "$@"; peer_top=$2; shift 2 ;;
    --retransmit-limit) need_value "$@"; retransmit_limit=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) die_usage "unknown argument '$1' (try --help)" ;;
  esac
done
out=${out:-"$build/hw-smoke"}
peer_top=${peer_top:-$top}
read -r -a ssh <<<"$ssh_cmd"
case "$retransmit_limit" in ''|*[!0-9]*) die_usage "--retransmit-limit needs a count, got '$retransmit_limit'" ;; esac

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
    # Not `printf | grep -q`: grep leaving early kills printf (SIGPIPE), which
    # pipefail turns into "not found" for any device but the last.
    known=0
    for f in "${found[@]}"; do [ "$f" = "$d" ] && known=1; done
    if [ "$known" = 1 ]; then
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
bootstrap_yaml='listen: "127.0.0.1:0"'
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
  $bootstrap_yaml
log:
  level: warn
EOF
}
for d in "${devices[@]}"; do write_config "$out/verbs-$d.yaml" "$d"; done
write_config "$out/verbs-all.yaml" "${devices[@]}"
if [ -n "$peer" ]; then
  # Across hosts each side's control listener must be reachable from the other.
  self_addr=$(hostname -I 2>/dev/null | awk '{ print $1 }')
  bootstrap_yaml="listen: \"0.0.0.0:0\"
  advertise_host: \"$peer\""
  for d in "${devices[@]}"; do write_config "$out/peer-verbs-$d.yaml" "$d"; done
  bootstrap_yaml="listen: \"0.0.0.0:0\"
  advertise_host: \"${self_addr:-127.0.0.1}\""
  for d in "${devices[@]}"; do write_config "$out/self-verbs-$d.yaml" "$d"; done
  say "two hosts: servers on $peer (checkout $peer_top), clients here (${self_addr:-address unknown})"
fi
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

# ---- retransmit counters (step 8 compares) ----------------------------------------
# mlx5's names; other drivers have some of them or none.
retransmit_counters=(local_ack_timeout_err packet_seq_err out_of_sequence duplicate_request
                     implied_nak_seq_err rnr_nak_retry_err req_transport_retries_exceeded
                     roce_adp_retrans roce_slow_restart)
counters_snapshot() {  # $1 file: one "device counter value" line per counter found
  local d c f
  : >"$1"
  for d in "${devices[@]}"; do
    for c in "${retransmit_counters[@]}"; do
      f="$sysfs/$d/ports/$(port_of "$d")/hw_counters/$c"
      if [ -r "$f" ]; then echo "$d $c $(tr -d '\n' <"$f")" >>"$1"; fi
    done
  done
}
echo "+ read retransmit counters: $sysfs/<device>/ports/<port>/hw_counters/{$(IFS=,; echo "${retransmit_counters[*]}")}" >&3
counters_snapshot "$out/retransmits-before.txt"

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

# A tebench target (on this host, or on --peer) and an initiator against it. Sets
# $pair_rc (0: the initiator passed) and $pair_why; logs $1-target.log, $1-initiator.log.
pair_rc=0
pair_why=""
tebench_pair() {  # $1 log prefix, $2 target config, $3 initiator config, $4 local|peer, rest: initiator args
  local log=$1 tconfig=$2 iconfig=$3 where=$4 segment="" line
  shift 4
  local target_cmd=("$tebench" --config="$tconfig" --total_buffer_size=64M)
  if [ "$where" = peer ]; then
    local remote_config="/tmp/tent-hw-smoke/${tconfig##*/}"
    local remote_tebench="$peer_top/${tebench#"$top"/}"
    target_cmd=("${ssh[@]}" "$peer" "exec timeout 900 '$remote_tebench' --config='$remote_config' --total_buffer_size=64M")
    echo "+ $ssh_cmd $peer 'mkdir -p /tmp/tent-hw-smoke && cat >$remote_config' <$tconfig" >&3
    if [ "$dry_run" = 0 ]; then
      "${ssh[@]}" "$peer" "mkdir -p /tmp/tent-hw-smoke && cat >'$remote_config'" <"$tconfig"
    fi
  fi
  local init_cmd=("$tebench" --config="$iconfig" --total_buffer_size=64M "$@")
  echo "+ ${target_cmd[*]} &" >&3
  echo "+ ${init_cmd[*]} --target_seg_name=<segment the target prints>" >&3
  pair_rc=0
  pair_why=""
  if [ "$dry_run" = 1 ]; then pair_why="dry run"; return; fi
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
    pair_rc=1
    pair_why="the target did not get ready; $log-target.log"
    return
  fi
  segment=$(sed -n 's/^tebench target ready: segment=\([^ ]*\).*/\1/p' <<<"$line")
  case "$line" in
    *provider=verbs*) ;;
    *) stop_target; pair_rc=1; pair_why="the target is not on provider verbs: $line"; return ;;
  esac
  "${init_cmd[@]}" --target_seg_name="$segment" >"$log-initiator.log" 2>&1 || pair_rc=$?
  stop_target
  if [ "$pair_rc" != 0 ]; then pair_why="initiator exit $pair_rc; $log-initiator.log"; fi
}

engine_round() {  # $1 label, $2 config
  tebench_pair "$out/engine-$1" "$2" "$2" local --check_consistency=true \
    --start_block_size=4096 --max_block_size=4M --start_batch_size=1 \
    --max_batch_size=4 --duration="$engine_duration" --warmup=0
  if [ "$dry_run" = 1 ]; then record "engine $1" SKIP "dry run"
  elif [ "$pair_rc" = 0 ]; then
    record "engine $1" PASS "4 KiB..4 MiB x batch 1..4 WRITE+READ, every byte compared"
  else record "engine $1" FAIL "$pair_why"
  fi
}
if [ "$failed" = 0 ]; then
  for d in "${devices[@]}"; do engine_round "$d" "$out/verbs-$d.yaml"; done
  if [ "${#devices[@]}" -gt 1 ]; then engine_round all "$out/verbs-all.yaml"; fi
fi

# ---- 6. perftest beside tebench on the same device pair ---------------------------
# ib_write_lat (4 KiB, t_avg) against tebench's average transfer time at 4 KiB x 1, and
# ib_write_bw (4 MiB, BW average) against tebench's bandwidth at 4 MiB x batch 4: the
# same devices, the same direction, one after the other. The ratio is printed, not
# judged: it says how much of the NIC the engine leaves on the table.
perftest_port=18600
server_pid=""
# Runs a perftest server (here, or on --peer) and its client; sets $perf_rc.
perf_rc=0
perftest_run() {  # $1 log prefix, $2 tool, $3 server device, $4 client device, rest: tool args
  local log=$1 tool=$2 sdev=$3 cdev=$4 host=127.0.0.1 gid
  shift 4
  perftest_port=$((perftest_port + 1))
  local sargs=(-d "$sdev" -i "$(port_of "$sdev")" -p "$perftest_port" "$@")
  local cargs=(-d "$cdev" -i "$(port_of "$cdev")" -p "$perftest_port" "$@")
  gid=$(roce_gid_index "$cdev")
  if [ -n "$gid" ]; then cargs+=(-x "$gid"); fi
  local server=("$tool" "${sargs[@]}")
  if [ -n "$peer" ]; then
    host=$peer
    server=("${ssh[@]}" "$peer" "exec timeout 120 $tool ${sargs[*]}")
  else
    gid=$(roce_gid_index "$sdev")
    if [ -n "$gid" ]; then server+=(-x "$gid"); fi
  fi
  echo "+ ${server[*]} &  then  $tool ${cargs[*]} $host" >&3
  perf_rc=0
  [ "$dry_run" = 1 ] && return 0
  timeout 120 "${server[@]}" >"$log-server.log" 2>&1 &
  server_pid=$!
  sleep 2
  timeout 120 "$tool" "${cargs[@]}" "$host" >"$log-client.log" 2>&1 || perf_rc=$?
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print "?"; else printf "%.2f", a / b }'; }
perftest_pair() {  # $1 server device, $2 client device
  local sdev=$1 cdev=$2 label="$2->$1" log="$out/perftest-$2-$1"
  local lat_pt bw_pt lat_te bw_te where=local tconfig="$out/verbs-$1.yaml" iconfig="$out/verbs-$2.yaml"
  if [ -n "$peer" ]; then
    where=peer; tconfig="$out/peer-verbs-$1.yaml"; iconfig="$out/self-verbs-$2.yaml"; label="$2->$peer:$1"
  fi
  perftest_run "$log-lat" ib_write_lat "$sdev" "$cdev" -s 4096 -n 10000 -F
  local lat_rc=$perf_rc
  perftest_run "$log-bw" ib_write_bw "$sdev" "$cdev" -s 4194304 -n 2000 -F --report_gbits
  local bw_rc=$perf_rc
  tebench_pair "$log-tebench-lat" "$tconfig" "$iconfig" "$where" --start_block_size=4096 \
    --max_block_size=4096 --start_batch_size=1 --max_batch_size=1 --duration="$engine_duration" --warmup=0
  local te_lat_rc=$pair_rc te_lat_why=$pair_why
  tebench_pair "$log-tebench-bw" "$tconfig" "$iconfig" "$where" --start_block_size=4M \
    --max_block_size=4M --start_batch_size=4 --max_batch_size=4 --duration="$engine_duration" --warmup=0
  local te_bw_rc=$pair_rc te_bw_why=$pair_why
  if [ "$dry_run" = 1 ]; then record "perftest $label" SKIP "dry run"; return; fi
  if [ "$lat_rc" != 0 ] || [ "$bw_rc" != 0 ]; then
    record "perftest $label" FAIL "ib_write_lat exit $lat_rc, ib_write_bw exit $bw_rc; $log-*.log"
    return
  fi
  if [ "$te_lat_rc" != 0 ] || [ "$te_bw_rc" != 0 ]; then
    record "perftest $label" FAIL "tebench: ${te_lat_why:-ok} / ${te_bw_why:-ok}"
    return
  fi
  # perftest rows: "#bytes #iterations t_min t_max t_typical t_avg ..." and
  # "#bytes #iterations BW_peak BW_average[Gb/sec] MsgRate"; tebench rows: docs/perf.
  lat_pt=$(awk '$1 == 4096 && NF >= 6 { v = $6 } END { print v }' "$log-lat-client.log")
  bw_pt=$(awk '$1 == 4194304 && NF >= 4 { v = $4 / 8 } END { print v }' "$log-bw-client.log")
  lat_te=$(awk '$1 == 4096 && $2 == 1 { v = $6 } END { print v }' "$log-tebench-lat-initiator.log")
  bw_te=$(awk '$1 == 4194304 && $2 == 4 { v = $3 } END { print v }' "$log-tebench-bw-initiator.log")
  local line
  line="4 KiB latency: tebench ${lat_te:-?} us / ib_write_lat ${lat_pt:-?} us = $(ratio "$lat_te" "$lat_pt");"
  line+=" 4 MiB bandwidth: tebench ${bw_te:-?} GB/s / ib_write_bw ${bw_pt:-?} GB/s = $(ratio "$bw_te" "$bw_pt")"
  echo "perftest $label: $line" >>"$out/perftest-ratios.txt"
  record "perftest $label" PASS "$line"
}
if [ "$failed" = 0 ]; then
  if ! command -v ib_write_bw >/dev/null 2>&1 && [ "$dry_run" = 0 ]; then
    record perftest SKIP "perftest not installed (apt-get install perftest)"
  else
    : >"$out/perftest-ratios.txt"
    for d in "${devices[@]}"; do perftest_pair "$d" "$d"; done
    # Across two NICs (on one host: out of one port and into the other).
    if [ "${#devices[@]}" -gt 1 ] && [ -z "$peer" ]; then perftest_pair "${devices[1]}" "${devices[0]}"; fi
  fi
fi

# ---- 7. burst comparison on verbs -------------------------------------------------
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

# ---- 8. retransmit counters ---------------------------------------------------------
# Read even after a failed step: a storm is often why a step failed.
counters_snapshot "$out/retransmits-after.txt"
if [ "$dry_run" = 1 ]; then
  record retransmits SKIP "dry run ($(wc -l <"$out/retransmits-before.txt") counters found)"
elif [ ! -s "$out/retransmits-before.txt" ]; then
  record retransmits SKIP "no retransmit counters under $sysfs/<device>/ports/<port>/hw_counters"
else
  delta=$(awk 'NR == FNR { before[$1 " " $2] = $3; next }
               { d = $3 - before[$1 " " $2]; if (d > 0) { total += d; s = s sprintf("%s %s +%d; ", $1, $2, d) } }
               END { printf "%d|%s", total, s }' "$out/retransmits-before.txt" "$out/retransmits-after.txt")
  total=${delta%%|*}
  detail=${delta#*|}
  if [ "$total" -gt "$retransmit_limit" ]; then
    record retransmits FAIL "retransmit storm: $total events over the run (limit $retransmit_limit): $detail"
  else
    record retransmits PASS "$total events (limit $retransmit_limit)${detail:+: $detail}"
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
