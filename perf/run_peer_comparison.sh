#!/usr/bin/env bash
# Issue 14's side-by-side, in one run: tent's tebench (direct path and worker
# path) over the soft fabric, Mooncake TENT's tebench over its shm transport
# with the same flags (WRITE, batch 1, 1 thread, 4 KiB and 4 MiB), and
# ucx_perftest (ucp_put_lat 4 KiB, ucp_put_bw 4 MiB); then one table (each
# tent row with its provider and link model), the issue's targets, and a
# markdown and JSON record. Builds nothing.
#
# usage: perf/run_peer_comparison.sh [--build DIR] [--tebench PATH] [--peer PATH]
#          [--config FILE] [--out DIR] [--duration S] [--warmup S] [--bw-rounds N]
#          [--skip-ucx] [--dry-run]
#   --peer      Mooncake TENT's tebench; default $TENT_PEER_TEBENCH, else
#               <repo>/../peer/build/mooncake-transfer-engine/benchmark/tebench.
#               Not found: its rows are skipped with a message saying how to
#               build it (docs/perf/peer-comparison.md); the exit code stays 0.
#   --duration  measured seconds per run (default 3; whole seconds when the peer
#               runs, as its --duration is an integer)
#   --warmup    tent's warm-up seconds (default 1, Mooncake's fixed warm-up)
#   --bw-rounds rounds of the 4 MiB pair, tent worker path then ucp_put_bw
#               (default 3): the target is the median of the rounds' ratios
#   --skip-ucx  no ucx_perftest rows (otherwise Debian's ucx-utils is installed when missing)
#   --dry-run   print what would run and the peer's status, run nothing
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)

build="$top/build"
tebench=""
peer="${TENT_PEER_TEBENCH:-$top/../peer/build/mooncake-transfer-engine/benchmark/tebench}"
config=""
out=""
duration=3
warmup=1
bw_rounds=3
skip_ucx=0
dry_run=0
buffer=67108864  # 64 MiB on each side, both tools: room for one 4 MiB region

die() { echo "run_peer_comparison: $*" >&2; exit 1; }
need_value() { [ $# -ge 2 ] || die "$1 needs a value"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --build) need_value "$@"; build=$2; shift 2 ;;
    --tebench) need_value "$@"; tebench=$2; shift 2 ;;
    --peer) need_value "$@"; peer=$2; shift 2 ;;
    --config) need_value "$@"; config=$2; shift 2 ;;
    --out) need_value "$@"; out=$2; shift 2 ;;
    --duration) need_value "$@"; duration=$2; shift 2 ;;
    --warmup) need_value "$@"; warmup=$2; shift 2 ;;
    --bw-rounds) need_value "$@"; bw_rounds=$2; shift 2 ;;
    --skip-ucx) skip_ucx=1; shift ;;
    --dry-run) dry_run=1; shift ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (try --help)" ;;
  esac
done

case "$bw_rounds" in
  ""|*[!0-9]*|0) die "--bw-rounds $bw_rounds: a whole number of rounds, at least 1" ;;
esac
tebench=${tebench:-"$build/perf/tebench/tebench"}
[ -x "$tebench" ] || die "no tent tebench at $tebench; build first (ninja -C $build)"
py=/usr/bin/python3
[ -x "$py" ] || py=python3
out=${out:-"$build/peer-comparison"}

peer_ok=0
peer_why=""
if [ -x "$peer" ]; then
  peer_ok=1
  case "$duration" in
    *[!0-9]*|"") die "--duration $duration: Mooncake's tebench takes whole seconds" ;;
  esac
else
  peer_why="Mooncake TENT's tebench not found at $peer"
  echo "run_peer_comparison: $peer_why; its rows are skipped." >&2
  echo "run_peer_comparison: build it outside this repository as docs/perf/peer-comparison.md" \
       "says, then pass --peer PATH or set TENT_PEER_TEBENCH." >&2
fi

# The same flags on both tools; only the transport and tent's config differ.
common="--backend=tent --seg_type=DRAM --op_type=write --start_batch_size=1 --max_batch_size=1"
common="$common --start_num_threads=1 --max_num_threads=1 --duration=$duration"
common="$common --total_buffer_size=$buffer"
sizes() { echo "--start_block_size=$1 --max_block_size=$1"; }

if [ "$dry_run" = 1 ]; then
  echo "tent:  $tebench --xport_type=rdma --config=CONFIG --warmup=$warmup $common" \
       "--{start,max}_block_size={4096,4194304} --tent_intent_type={foreground_get,unspec}" \
       "(4 KiB direct also with --tx_resolution=us)"
  if [ "$peer_ok" = 1 ]; then
    echo "peer:  $peer --metadata_type=p2p --xport_type=shm $common" \
         "--{start,max}_block_size={4096,4194304}"
  else
    echo "peer:  skipped ($peer_why)"
  fi
  [ "$skip_ucx" = 1 ] && echo "ucx:   skipped (--skip-ucx)" ||
    echo "ucx:   ucx_perftest -t ucp_put_lat -s 4096; ucx_perftest -t ucp_put_bw -s 4194304"
  echo "4 MiB: $bw_rounds rounds of tent worker path then ucp_put_bw"
  exit 0
fi

mkdir -p "$out"
rm -f "$out"/*.log "$out"/manifest.tsv "$out"/load.tsv "$out"/peer-comparison.md \
      "$out"/peer-comparison.json
manifest="$out/manifest.tsv"
load="$out/load.tsv"
: >"$manifest"
: >"$load"
# The load average, and the share of CPU time the hypervisor took from this VM (steal)
# since the previous line: on a shared host it moves means and tails more than load.
prev_stat=""
note_load() {
  local now steal=""
  now=$(grep '^cpu ' /proc/stat)
  [ -n "$prev_stat" ] && steal=$(awk -v a="$prev_stat" -v b="$now" 'BEGIN {
    split(a, x, " "); split(b, y, " "); t = 0
    for (i = 2; i <= 9; i++) t += y[i] - x[i]
    printf "; steal since the previous line %.0f%%", (t > 0 ? 100 * (y[9] - x[9]) / t : 0) }')
  prev_stat=$now
  printf '%s\t%s%s\n' "$1" "$(cat /proc/loadavg)" "$steal" >>"$load"
}
record() { printf '%s\t%s\t%s\t%s\t%s\n' "$@" >>"$manifest"; }  # key kind size log command

# ---- background processes (targets, a UCX server): stopped on any exit ------------
pids=()
stop_all() {
  for p in "${pids[@]}"; do
    if kill -0 "$p" 2>/dev/null; then kill -TERM "$p" 2>/dev/null || true; fi
    wait "$p" 2>/dev/null || true
  done
  pids=()
}
trap stop_all EXIT
stop_pid() {  # one background process, leaving the others running
  if kill -0 "$1" 2>/dev/null; then kill -TERM "$1" 2>/dev/null || true; fi
  wait "$1" 2>/dev/null || true
  local keep=() p
  for p in "${pids[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
  pids=("${keep[@]}")
}

# wait_for LOG PID SED-EXPRESSION: prints the first match, waiting up to 30 s.
wait_for() {
  local found=""
  for _ in $(seq 1 300); do
    found=$(sed -n "$3" "$1" | head -n 1)
    [ -n "$found" ] && { echo "$found"; return 0; }
    kill -0 "$2" 2>/dev/null || { cat "$1" >&2; die "process $2 exited (log $1)"; }
    sleep 0.1
  done
  cat "$1" >&2
  die "no ready line in $1 after 30 s"
}

# ---- ucx_perftest: the same-run anchor ---------------------------------------------------
# ucp_put_bw runs right after each of tent's 4 MiB worker runs (this VM's copy bandwidth
# moves by a third within seconds, so the 0.9x target compares neighbours, in --bw-rounds
# rounds, by the median of their ratios); ucp_put_lat at the end.
if [ "$skip_ucx" = 0 ] && ! command -v ucx_perftest >/dev/null; then
  echo "run_peer_comparison: installing Debian's ucx-utils for ucx_perftest" >&2
  apt-get install -y -q ucx-utils >"$out/apt.log" 2>&1 ||
    die "apt-get install ucx-utils failed (log $out/apt.log); or pass --skip-ucx"
fi
ucx_run() {  # size test iterations [key]
  local key=${4:-ucx}
  local log="$out/$key-$1.log" port=$((20000 + RANDOM % 20000))
  ucx_perftest -p "$port" >"$out/$key-server-$1.log" 2>&1 &
  local server=$!
  pids+=("$server")
  local cmd="ucx_perftest 127.0.0.1 -p $port -t $2 -s $1 -n $3"
  echo "== UCX: $cmd"
  # The server prints nothing before a client connects (its stdout is a file,
  # block-buffered): retry while it is not listening yet.
  local tries=0
  until $cmd >"$log" 2>&1; do
    tries=$((tries + 1))
    if [ "$tries" -ge 50 ] || ! grep -qi "refused\|connect" "$log"; then
      die "ucx_perftest failed: $(tail -5 "$log")"
    fi
    sleep 0.2
  done
  grep '^Final:' "$log" || true
  stop_pid "$server"
  record "$key" "ucx-${2#ucp_put_}" "$1" "$log" "$cmd"
}

# ---- tent --------------------------------------------------------------------------
own_config=""
if [ -z "$config" ]; then
  own_config=1
  config="$out/soft-1rail-unlimited.yaml"
  cat >"$config" <<'EOF'
# Written by perf/run_peer_comparison.sh: the soft fabric, one device, unlimited link.
fabric:
  provider: soft
  soft:
    devices:
      - {name: soft0, numa_node: 0, link_gbps: 0, latency_ns: 0}
lcores:
  - cpu: -1
    pollers: ["rail:*", "background"]
log:
  level: warn
EOF
fi
unset TENT_CONFIG
note_load "before tent"
"$tebench" --backend=tent --xport_type=rdma --seg_type=DRAM --config="$config" \
  --total_buffer_size="$buffer" >"$out/tent-target.log" 2>&1 &
pids+=($!)
segment=$(wait_for "$out/tent-target.log" "${pids[0]}" \
  's/^tebench target ready: segment=\([^ ]*\).*/\1/p')
echo "tent target ready: $segment"

tent_run() {  # key size extra-flags...
  local key=$1 size=$2 log="$out/$1-$2.log"
  shift 2
  local cmd="$tebench --target_seg_name=$segment --xport_type=rdma --config=$config"
  cmd="$cmd --warmup=$warmup $common $(sizes "$size") $*"
  echo "== $key, $size B: $cmd"
  # shellcheck disable=SC2086 # the flags are words
  $cmd >"$log" 2>"$log.err" || die "tent run failed: $(cat "$log.err")"
  grep -E '^(# (provider|link model)|[0-9])' "$log" || true
  record "$key" tent "$size" "$log" "$cmd"
}
for size in 4096 4194304; do
  tent_run tent-direct "$size" --tent_intent_type=foreground_get
  [ "$size" = 4096 ] && tent_run tent-direct-us "$size" --tent_intent_type=foreground_get \
    --tx_resolution=us
  [ "$size" = 4096 ] && tent_run tent-worker "$size" --tent_intent_type=unspec
done
# The soft NIC streams payload copies of 64 KiB and more (non-temporal stores, as DMA
# fills no CPU cache: fabric.soft.stream_copy_min_bytes); ucp_put_bw copies through the
# cache. So the table also shows tent's worker path with cached copies (the initiator
# copies a WRITE, so only its config changes), run once, before the rounds.
if [ -n "$own_config" ]; then
  cached_config="$out/soft-1rail-unlimited-cached-copy.yaml"
  sed 's/^  soft:$/  soft:\n    stream_copy_min_bytes: 0/' "$config" >"$cached_config"
  streamed_config=$config
  config=$cached_config
  tent_run tent-worker-cached 4194304 --tent_intent_type=unspec
  config=$streamed_config
else
  record tent-worker-cached tent 4194304 - "--config given: its copy setting is the user's"
fi
for round in $(seq 1 "$bw_rounds"); do
  suffix=$([ "$round" = 1 ] || echo "-r$round")
  echo "== 4 MiB round $round of $bw_rounds"
  tent_run "tent-worker$suffix" 4194304 --tent_intent_type=unspec
  if [ "$skip_ucx" = 0 ]; then
    [ "$round" = 1 ] && note_load "before UCX bandwidth"
    ucx_run 4194304 ucp_put_bw 3000 "ucx$suffix"
  fi
done
stop_all

# ---- the machine's floor under those percentiles ----------------------------------------
# perf/timer_floor beside a tent run's 4 KiB row: the rest of that run's loop (Avg Lat
# - Avg Tx) between windows, and what timer ticks and VM exits alone do to such a
# window's P99/P999 on this machine.
floor_bin="$build/perf/timer_floor/timer_floor"
run_floor() {  # key label tent-key window: "tx" (the run's Avg Tx) or a number of ns; flags...
  local key=$1 label=$2 tent_key=$3 window=$4 lat tx gap log="$out/$1-4096.log"
  shift 4
  read -r lat tx < <(awk '$1 == 4096 {print $5, $6; exit}' "$out/$tent_key-4096.log") || true
  if [ ! -x "$floor_bin" ] || [ -z "${tx:-}" ]; then
    record "$key" floor 4096 - "no $floor_bin or no $tent_key 4 KiB row"
    return
  fi
  [ "$window" = tx ] && window=$(awk -v t="$tx" 'BEGIN {printf "%.0f", t * 1000}')
  gap=$(awk -v l="$lat" -v t="$tx" 'BEGIN {g = (l - t) * 1000; printf "%.0f", (g > 0 ? g : 0)}')
  local cmd="$floor_bin --window_ns=$window --gap_ns=$gap --duration_s=$duration${*:+ $*}"
  echo "== $label: $cmd"
  $cmd >"$log" 2>&1 || die "timer_floor failed: $(cat "$log")"
  cat "$log"
  record "$key" floor 4096 "$log" "$cmd"
}
# A busy wait as long as the direct run's Avg Tx: a transfer done by its caller.
run_floor floor "machine floor" tent-direct tx
# A bare round trip between two threads (no work on either side): every worker transfer
# is such a round trip plus its work, and a window over two CPUs catches the
# interruptions of both: the least the worker path's percentiles can be on this machine.
run_floor floor-handoff "machine floor, hand-off" tent-worker 0 --threads=2

# ---- Mooncake TENT's tebench ---------------------------------------------------------
if [ "$peer_ok" = 1 ]; then
  note_load "before Mooncake"
  peer_build=$(cd "$(dirname "$peer")/../.." && pwd)
  export LD_LIBRARY_PATH="$peer_build/mooncake-common${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  unset MC_TENT_CONF  # it would replace tebench's own transport settings
  "$peer" --backend=tent --metadata_type=p2p --xport_type=shm --seg_type=DRAM \
    --total_buffer_size="$buffer" >"$out/peer-target.log" 2>&1 &
  pids+=($!)
  peer_seg=$(wait_for "$out/peer-target.log" "${pids[0]}" \
    's/.*--target_seg_name=\([^ [:cntrl:]]*\).*/\1/p')
  echo "Mooncake target ready: $peer_seg"
  for size in 4096 4194304; do
    log="$out/peer-$size.log"
    cmd="$peer --target_seg_name=$peer_seg --metadata_type=p2p --xport_type=shm $common"
    cmd="$cmd $(sizes "$size")"
    echo "== Mooncake, $size B: $cmd"
    # shellcheck disable=SC2086
    $cmd >"$log" 2>"$log.err" || die "Mooncake run failed: $(tail -5 "$log.err")"
    grep -E '^[0-9]' "$log" || true
    record peer peer "$size" "$log" "$cmd"
  done
  stop_all
else
  for size in 4096 4194304; do record peer peer "$size" - "$peer_why"; done
fi

# ---- ucx_perftest ----------------------------------------------------------------------
if [ "$skip_ucx" = 0 ]; then
  note_load "before UCX latency"
  ucx_run 4096 ucp_put_lat 100000
else
  for size in 4096 4194304; do record ucx ucx "$size" - "--skip-ucx"; done
fi
note_load "end"

# ---- the table ---------------------------------------------------------------------------
echo
commit=$(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo unknown)
"$py" "$top/perf/scripts/peer_table.py" --manifest "$manifest" --load "$load" \
  --meta "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)" --meta "commit=$commit" \
  --meta "host=$(nproc) CPUs, $(uname -r)" \
  --meta "command=perf/run_peer_comparison.sh --duration $duration --warmup $warmup --bw-rounds $bw_rounds" \
  --meta "tent config=$config" \
  --out-md "$out/peer-comparison.md" --out-json "$out/peer-comparison.json"
echo
echo "record: $out/peer-comparison.md, $out/peer-comparison.json (logs beside them)"
