#!/usr/bin/env bash
# Core sweep: the same workloads under different lcore layouts, to see what a
# layout buys. Dimensions: number of background lcores, rail pollers on a lcore
# of their own or sharing the background lcore, lcores pinned or not (explicit
# CPUs, or `lcores: auto`), and caller threads. Two workloads, on the soft
# fabric (every figure names the provider and the link model):
#   bulk   tebench QoS, one class: 64 KiB and 4 MiB WRITE (--blocks), batch 1,
#          1..N caller threads, migration intent (the worker path), unlimited
#          links (the soft NIC's copy is the limit): worker-path throughput
#   burst  the RFC's foreground/background burst as perf/run_burst_comparison.sh
#          runs it scaled (1 foreground_get 4 KiB thread + 3 migration 4 MiB
#          threads, two 4 Gb/s ports): foreground latency, background throughput
#   idle   the idle CPU cost of an lcore (perf/scripts/idle_cpu.sh): an idle
#          target, its lcores napping only (block_max_us: 0, the policy before the
#          doorbell) and with the default policy (blocking until woken); with
#          --baseline-tebench BIN also that binary's default (e.g. a build of main)
# Prints a table, writes sweep.jsonl (one record per run, the tebench record
# inside), idle.jsonl, sweep.md and sweep.png. The layouts come from the CPUs this process may
# use: a small machine (< 8 CPUs) gets the 2-CPU set, a 16+ CPU node the set in
# docs/perf/core-sweep.md (`lcores: auto` with 1/2/4 background lcores and each
# rail mode). Builds nothing (ninja -C build first).
#
# usage: perf/run_core_sweep.sh [--build DIR] [--out DIR] [--quick]
#          [--bulk-duration S] [--burst-duration S] [--warmup S] [--threads "1 2 4"]
#          [--blocks "65536 4194304"] [--layouts "name ..."]
#          [--workloads "bulk burst idle"] [--baseline-tebench BIN] [--list]
#   --quick  1 s runs (a smoke test of the harness, not figures to keep)
#   --list   print the layouts this machine gets and exit
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)

build="$top/build"
out=""
bulk_duration=3
burst_duration=5
warmup=1
threads=""
only_layouts=""
workloads="bulk burst idle"
blocks="65536 4194304"
baseline_tebench=""
idle_seconds=5
list=0

die() { echo "run_core_sweep: $*" >&2; exit 1; }
need_value() { [ $# -ge 2 ] || die "$1 needs a value"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --build) need_value "$@"; build=$2; shift 2 ;;
    --out) need_value "$@"; out=$2; shift 2 ;;
    --quick) bulk_duration=1; burst_duration=1; warmup=0.5; idle_seconds=1; shift ;;
    --bulk-duration) need_value "$@"; bulk_duration=$2; shift 2 ;;
    --burst-duration) need_value "$@"; burst_duration=$2; shift 2 ;;
    --warmup) need_value "$@"; warmup=$2; shift 2 ;;
    --threads) need_value "$@"; threads=$2; shift 2 ;;
    --layouts) need_value "$@"; only_layouts=$2; shift 2 ;;
    --workloads) need_value "$@"; workloads=$2; shift 2 ;;
    --blocks) need_value "$@"; blocks=$2; shift 2 ;;
    --baseline-tebench) need_value "$@"; baseline_tebench=$2; shift 2 ;;
    --list) list=1; shift ;;
    -h|--help) sed -n '2,32p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (try --help)" ;;
  esac
done

tebench="$build/perf/tebench/tebench"
topo="$build/topology/tent-topo"
py=/usr/bin/python3
[ -x "$py" ] || py=python3
helpers="$top/perf/scripts"

# ---- layouts -------------------------------------------------------------------
# CPUs this process may use, in the kernel's list format, and as an array.
allowed=$(taskset -pc $$ | sed 's/.*: //')
mapfile -t cpus < <("$py" -c '
import sys
out = []
for part in sys.argv[1].split(","):
    a, _, b = part.partition("-")
    out += range(int(a), int(b or a) + 1)
print("\n".join(map(str, out)))' "$allowed")
ncpu=${#cpus[@]}
first=${cpus[0]}
last=${cpus[$((ncpu - 1))]}

# Each layout: name | pinned | rails | background lcores | the YAML of its lcores.
layouts=()
add_layout() { layouts+=("$1|$2|$3|$4|$5"); }
add_layout shared-unpinned no shared 1 \
  'lcores: [{cpu: -1, pollers: ["rail:*", background]}]'
if [ "$ncpu" -lt 8 ]; then
  add_layout shared-pinned yes shared 1 \
    "lcores: [{cpu: $last, pollers: [\"rail:*\", background]}]"
  add_layout auto yes auto 1 'lcores: auto'
  if [ "$ncpu" -ge 2 ]; then
    add_layout rail+bg-unpinned no dedicated 1 \
      'lcores: [{cpu: -1, pollers: ["rail:*"]}, {cpu: -1, pollers: [background]}]'
    add_layout rail+bg-pinned yes dedicated 1 \
      "lcores: [{cpu: $first, pollers: [\"rail:*\"]}, {cpu: $last, pollers: [background]}]"
    add_layout 2bg-unpinned no shared 2 \
      'lcores: [{cpu: -1, pollers: ["rail:*", background]}, {cpu: -1, pollers: [background]}]'
    add_layout 2bg-pinned yes shared 2 \
      "lcores: [{cpu: $first, pollers: [\"rail:*\", background]}, {cpu: $last, pollers: [background]}]"
  fi
  : "${threads:=1 2}"
else
  # A node: `lcores: auto` pins near the devices; each rail mode, 1/2/4 background lcores.
  for bg in 1 2 4; do
    for rails in dedicated numa shared; do
      add_layout "auto-$rails-${bg}bg" yes "$rails" "$bg" \
        "lcores: auto
lcore_auto: {rails: $rails, background_lcores: $bg}"
    done
    add_layout "${bg}bg-unpinned" no shared "$bg" "lcores: [{cpu: -1, pollers: [\"rail:*\", background]}$(
      for _ in $(seq 2 "$bg"); do printf ', {cpu: -1, pollers: [background]}'; done)]"
  done
  : "${threads:=1 2 4 8 16}"
fi

selected=()
for l in "${layouts[@]}"; do
  name=${l%%|*}
  if [ -z "$only_layouts" ] || [[ " $only_layouts " == *" $name "* ]]; then selected+=("$l"); fi
done
[ ${#selected[@]} -gt 0 ] || die "no layout matches '$only_layouts' (try --list)"

if [ "$list" = 1 ]; then
  echo "layouts for this machine ($ncpu CPUs allowed: $allowed):"
  for l in "${selected[@]}"; do
    IFS='|' read -r name pinned rails bg yaml <<<"$l"
    printf '  %-22s pinned=%-3s rails=%-9s background=%s\n' "$name" "$pinned" "$rails" "$bg"
    sed 's/^/      /' <<<"$yaml"
  done
  exit 0
fi

[ -x "$tebench" ] || die "no $tebench; build first (ninja -C $build)"
out=${out:-"$build/core-sweep"}
mkdir -p "$out"
rm -f "$out"/sweep.jsonl "$out"/idle.jsonl "$out"/raw-*.jsonl "$out"/*.log "$out"/*.yaml "$out"/sweep.md \
  "$out"/sweep.png

# ---- configs -------------------------------------------------------------------
fabric() {  # $1 = link_gbps of each port (0 = unlimited)
  cat <<EOF
fabric:
  provider: soft
  soft:
    devices:
      - {name: soft0, numa_node: 0, link_gbps: $1, latency_ns: 2000}
      - {name: soft1, numa_node: 0, link_gbps: $1, latency_ns: 2000}
EOF
}
link_of() { [ "$1" = bulk ] && echo 0 || echo 4; }

# The target only answers one-sided WRITEs: one unpinned lcore, napping long, so
# it takes little CPU from the initiator on a small machine.
write_target_config() {  # $1 = workload
  { fabric "$(link_of "$1")"
    echo 'lcores: [{cpu: -1, pollers: ["rail:*", background], idle: {sleep_max_us: 1000}}]'
  } >"$out/target-$1.yaml"
}

write_layout_config() {  # $1 = workload, $2 = layout name, $3 = lcores YAML
  { fabric "$(link_of "$1")"; echo "$3"; echo 'direct: {mode: auto}'; } >"$out/$1-$2.yaml"
}

# ---- target --------------------------------------------------------------------
# shellcheck source=perf/scripts/tebench_target.sh
. "$top/perf/scripts/tebench_target.sh"
target_pid=""
trap stop_target EXIT

max_threads=0
for t in $threads; do [ "$t" -gt "$max_threads" ] && max_threads=$t; done
[ "$max_threads" -ge 4 ] || max_threads=4  # the burst runs 1 + 3 threads
buffer=$(( (max_threads * 8 + 8) * 1024 * 1024 ))

start_target() {  # $1 = workload; sets $segment
  write_target_config "$1"
  start_tebench_target "$tebench" "$out/target-$1.yaml" "$buffer" "$out/target-$1.log"
}

# ---- runs ----------------------------------------------------------------------
bulk_classes() {  # $1 = threads, $2 = block size
  printf '[{"name":"bulk","threads":%d,"block_size":%d,"batch_size":1,"intent_type":"migration","slo_us":0,"weight":1,"poll_mode":"yield"}]' "$1" "$2"
}
burst_classes='[{"name":"foreground","threads":1,"block_size":4096,"batch_size":1,"intent_type":"foreground_get","slo_us":300,"weight":4},{"name":"migration","threads":3,"block_size":4194304,"batch_size":2,"intent_type":"migration","slo_us":0,"weight":1,"poll_mode":"yield"}]'

runs_total=0
for w in $workloads; do
  case "$w" in
    bulk) runs_total=$((runs_total + ${#selected[@]} * $(wc -w <<<"$threads") * $(wc -w <<<"$blocks"))) ;;
    burst) runs_total=$((runs_total + ${#selected[@]})) ;;
    idle) runs_total=$((runs_total + 2 + $([ -n "$baseline_tebench" ] && echo 1 || echo 0))) ;;
    *) die "unknown workload '$w' (bulk, burst, idle)" ;;
  esac
done
run_no=0
started=$(date +%s)

progress() {  # $1 = what
  run_no=$((run_no + 1))
  local now elapsed eta=""
  now=$(date +%s)
  elapsed=$((now - started))
  if [ "$run_no" -gt 1 ]; then eta=", about $(( elapsed * (runs_total - run_no + 1) / (run_no - 1) )) s left"; fi
  echo "[$run_no/$runs_total] $1 (${elapsed} s elapsed$eta)"
}

one_run() {  # $1 = workload, $2 = layout entry, $3 = threads, $4 = classes JSON, $5 = duration, $6 = block
  local name pinned rails bg yaml label raw log
  IFS='|' read -r name pinned rails bg yaml <<<"$2"
  write_layout_config "$1" "$name" "$yaml"
  label="$1 $name block=$6 threads=$3"
  raw="$out/raw-$1-$name-$6-$3.jsonl"
  log="$out/$1-$name-$6-$3.log"
  progress "$label"
  if ! "$tebench" --target_seg_name="$segment" --backend=tent --xport_type=rdma \
      --config="$out/$1-$name.yaml" --op_type=write --total_buffer_size="$buffer" \
      --duration="$5" --warmup="$warmup" --start_num_threads="$3" --max_num_threads="$3" \
      --workload_classes_json="$4" --qos_output_jsonl="$raw" --run_label="$label" \
      >"$log" 2>&1; then
    echo "    FAILED (log: $log):"; tail -3 "$log" | sed 's/^/    /'
    return 0
  fi
  "$py" "$helpers/core_sweep_report.py" append --out "$out/sweep.jsonl" --record "$raw" \
    --workload "$1" --layout "$name" --pinned "$pinned" --rails "$rails" --background "$bg" \
    --threads "$3" --block "$6" --cpus "$allowed" --load "$(cut -d' ' -f1-3 /proc/loadavg)"
}

echo "core sweep: ${#selected[@]} layouts, workloads: $workloads; $ncpu CPUs allowed ($allowed); load $(cut -d' ' -f1-3 /proc/loadavg)"
if [ -x "$topo" ]; then
  { fabric 0; echo 'lcores: auto'; } >"$out/auto-probe.yaml"
  echo "lcores: auto here: $("$topo" --config="$out/auto-probe.yaml" | "$py" -c 'import json,sys; a=json.load(sys.stdin)["lcores_auto"]; print(a.get("error") or "; ".join("cpu %d %s" % (l["cpu"], ",".join(l["pollers"])) for l in a["lcores"]))')"
fi
idle_run() {  # $1 = label, $2 = tebench, $3 = idle policy (YAML flow map or empty)
  progress "idle $1"
  "$helpers/idle_cpu.sh" --tebench "$2" --label "$1" --idle "$3" --seconds "$idle_seconds" \
    --out "$out" --jsonl "$out/idle.jsonl" | sed 's/^/    /' || echo "    FAILED (logs in $out)"
}

for w in $workloads; do
  if [ "$w" = idle ]; then
    echo "== idle: two unpinned lcores of an idle target, CPU from /proc/PID/task/TID/stat"
    [ -n "$baseline_tebench" ] && idle_run baseline-default "$baseline_tebench" ""
    idle_run naps-only "$tebench" "{block_max_us: 0}"
    idle_run default "$tebench" ""
    continue
  fi
  start_target "$w"
  echo "== $w: target $segment (link: $( [ "$w" = bulk ] && echo unlimited || echo '2 x 4 Gb/s, 2 us') )"
  for l in "${selected[@]}"; do
    if [ "$w" = bulk ]; then
      for b in $blocks; do
        for t in $threads; do
          one_run bulk "$l" "$t" "$(bulk_classes "$t" "$b")" "$bulk_duration" "$b"
        done
      done
    else
      one_run burst "$l" 4 "$burst_classes" "$burst_duration" mixed
    fi
  done
  stop_target
done
trap - EXIT

# ---- results -------------------------------------------------------------------
[ -s "$out/sweep.jsonl" ] || die "no run succeeded (logs in $out)"
echo
"$py" "$helpers/core_sweep_report.py" table --in "$out/sweep.jsonl" --idle "$out/idle.jsonl" \
  --out "$out/sweep.md"
if "$py" -c 'import matplotlib' 2>/dev/null; then
  "$py" "$helpers/core_sweep_report.py" plot --in "$out/sweep.jsonl" --out "$out/sweep.png"
  png="$out/sweep.png"
else
  png="(not drawn: python3-matplotlib is missing)"
fi
echo
echo "results in $out: sweep.jsonl (one record per run), sweep.md (table), plot: $png"
