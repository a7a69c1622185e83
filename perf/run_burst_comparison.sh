#!/usr/bin/env bash
# The RFC's foreground/background burst comparison on the soft fabric with a
# modeled link: one tebench target, then four initiator runs of the same
# workload that differ only in how the foreground class is tagged or routed:
#   baseline  intent unspec, no deadline  -> worker path
#   direct    intent foreground_get       -> direct path
#   deadline  intent unspec, deadline_us  -> direct path (the RFC's other signal)
#   priority  intent foreground_get, direct.mode off, workers.priority_lane on
#             -> worker path, served by the rail poller ahead of bulk (the RFC's
#                "tune worker priority scheduling" alternative: no direct QP)
#   direct-qos  as direct, with qos.direct.traffic_class 184 (DSCP 46): the direct
#             QPs in a higher class than bulk, which each soft port serves first
#             (strict priority, docs/fabric.md "Traffic classes")
#   unloaded  as direct, foreground threads only (no migration): the reference for
#             "foreground p99 under the burst within 1.5x of unloaded"
# then the RFC's metrics table (perf/scripts/compare.py) and the foreground
# latency CDF (perf/scripts/plot_cdf.py). Builds nothing: scripts/main-job.sh
# builds first and calls this.
#
# usage: perf/run_burst_comparison.sh [--build DIR] [--out DIR] [--full]
#          [--duration S] [--warmup S] [--interval US] [--config FILE]
#          [--capacity GBPS] [--fg-threads N] [--bg-threads N] [--deadline-us US]
#          [--bg-poll spin|yield|wait]
#   default: the workload scaled to a 2-core machine (see docs/perf/evaluation.md)
#   --full:  the RFC's exact initiator commands (2 + 6 threads, 30 s each)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)

build="$top/build"
out=""
config="$top/perf/configs/burst-soft-2rail.yaml"
capacity=1        # GB/s: the config's two 4 Gb/s ports
full=0
duration=""
warmup=""
interval=0        # the RFC leaves it open; 0 = closed loop
fg_threads=""
bg_threads=""
deadline_us=300   # the deadline variant: deadline = submit time + the foreground SLO
slo_us=300
bg_poll=""        # how migration threads wait: spin (the RFC's tebench), yield or wait (waitTransfer)

die() { echo "run_burst_comparison: $*" >&2; exit 1; }
need_value() { [ $# -ge 2 ] || die "$1 needs a value"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --build) need_value "$@"; build=$2; shift 2 ;;
    --out) need_value "$@"; out=$2; shift 2 ;;
    --config) need_value "$@"; config=$2; shift 2 ;;
    --capacity) need_value "$@"; capacity=$2; shift 2 ;;
    --full) full=1; shift ;;
    --duration) need_value "$@"; duration=$2; shift 2 ;;
    --warmup) need_value "$@"; warmup=$2; shift 2 ;;
    --interval) need_value "$@"; interval=$2; shift 2 ;;
    --fg-threads) need_value "$@"; fg_threads=$2; shift 2 ;;
    --bg-threads) need_value "$@"; bg_threads=$2; shift 2 ;;
    --deadline-us) need_value "$@"; deadline_us=$2; shift 2 ;;
    --bg-poll) need_value "$@"; bg_poll=$2; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (try --help)" ;;
  esac
done

if [ "$full" = 1 ]; then
  mode="full (the RFC's exact commands)"
  : "${duration:=30}" "${warmup:=1}" "${fg_threads:=2}" "${bg_threads:=6}" "${bg_poll:=spin}"
else
  mode="scaled to this machine"
  : "${duration:=10}" "${warmup:=1}" "${fg_threads:=1}" "${bg_threads:=3}" "${bg_poll:=yield}"
fi
case "$bg_poll" in
  spin | yield | wait) ;;
  *) die "--bg-poll $bg_poll: spin, yield or wait" ;;
esac
threads=$((fg_threads + bg_threads))

tebench="$build/perf/tebench/tebench"
[ -x "$tebench" ] || die "no $tebench; build first (scripts/main-job.sh builds, or ninja -C $build)"
[ -f "$config" ] || die "no config $config"
py=/usr/bin/python3
[ -x "$py" ] || py=python3
out=${out:-"$build/burst-comparison"}
mkdir -p "$out"
rm -f "$out"/*.jsonl "$out"/*-latency.json "$out"/*.txt "$out"/comparison.md "$out"/foreground-cdf.png \
  "$out"/priority-lane.yaml "$out"/direct-qos.yaml

# Every thread's region: 4 KiB per foreground thread, 2 x 4 MiB per migration thread.
buffer=$(( (threads * 8 + 8) * 1024 * 1024 ))

# ---- target ------------------------------------------------------------------
# shellcheck source=perf/scripts/tebench_target.sh
. "$top/perf/scripts/tebench_target.sh"
start_tebench_target "$tebench" "$config" "$buffer" "$out/target.log"
echo "target ready: segment $segment (log: $out/target.log)"
grep '^#' "$out/target.log" || true

# ---- the four runs -----------------------------------------------------------
classes() {  # $1 = foreground intent, $2 = foreground deadline_us [, $3 = fg-only]
  # The RFC's JSON, field for field; deadline_us and poll_mode only when they
  # differ from the defaults (0, spin).
  local fg_extra="" bg_extra=""
  if [ "$2" != 0 ]; then fg_extra=",\"deadline_us\":$2"; fi
  if [ "$bg_poll" != spin ]; then bg_extra=",\"poll_mode\":\"$bg_poll\""; fi
  local fg
  fg=$(printf '{"name":"foreground","threads":%d,"block_size":4096,"batch_size":1,"intent_type":"%s"%s,"slo_us":%d,"weight":4}' \
    "$fg_threads" "$1" "$fg_extra" "$slo_us")
  if [ "${3:-}" = fg-only ]; then
    printf '[%s]' "$fg"
    return
  fi
  printf '[%s,{"name":"migration","threads":%d,"block_size":4194304,"batch_size":2,"intent_type":"migration","slo_us":0,"weight":1%s}]' \
    "$fg" "$bg_threads" "$bg_extra"
}

# The priority run's initiator config: the given one with the direct path off and
# the priority lane on (the target keeps the given config).
priority_config="$out/priority-lane.yaml"
"$py" - "$config" "$priority_config" <<'EOF' || die "cannot derive $priority_config (python3-yaml)"
import sys, yaml
with open(sys.argv[1]) as f:
    c = yaml.safe_load(f) or {}
c.setdefault("direct", {})["mode"] = "off"
c.setdefault("workers", {})["priority_lane"] = "on"
with open(sys.argv[2], "w") as f:
    f.write("# " + sys.argv[1] + " with direct.mode: off and workers.priority_lane: on\n")
    yaml.safe_dump(c, f, sort_keys=False)
EOF

# The direct-qos run's initiator config: the given one with the direct QPs on DSCP 46.
qos_config="$out/direct-qos.yaml"
"$py" - "$config" "$qos_config" <<'EOF' || die "cannot derive $qos_config (python3-yaml)"
import sys, yaml
with open(sys.argv[1]) as f:
    c = yaml.safe_load(f) or {}
c.setdefault("qos", {}).setdefault("direct", {})["traffic_class"] = 184
with open(sys.argv[2], "w") as f:
    f.write("# " + sys.argv[1] + " with qos.direct.traffic_class: 184 (DSCP 46, soft class 5)\n")
    yaml.safe_dump(c, f, sort_keys=False)
EOF

run() {  # $1 = label, $2 = file stem, $3 = intent, $4 = deadline_us [, $5 = config [, $6 = fg-only]]
  local cfg=${5:-$config}
  local n=$threads
  if [ "${6:-}" = fg-only ]; then n=$fg_threads; fi
  echo
  echo "== $1: foreground intent $3, deadline_us $4; $fg_threads + $bg_threads threads (migration polls: $bg_poll), ${duration} s, config $cfg =="
  "$tebench" --target_seg_name="$segment" --backend=tent --xport_type=rdma --config="$cfg" \
    --total_buffer_size="$buffer" --duration="$duration" --warmup="$warmup" \
    --start_num_threads="$n" --max_num_threads="$n" \
    --request_interval_us="$interval" --workload_classes_json="$(classes "$3" "$4" "${6:-}")" \
    --qos_link_capacity_gbps="$capacity" --qos_output_jsonl="$out/$2.jsonl" \
    --qos_latency_dump="$out/$2-latency.json" --run_label="$1" | tee "$out/$2.txt"
}

echo "burst comparison, $mode: config $config"
run baseline rdma-worker-baseline unspec 0
run direct rdma-direct-foreground foreground_get 0
run deadline rdma-direct-deadline unspec "$deadline_us"
run priority rdma-worker-priority foreground_get 0 "$priority_config"
run direct-qos rdma-direct-qos foreground_get 0 "$qos_config"
run unloaded rdma-direct-unloaded foreground_get 0 "$config" fg-only
stop_target
trap - EXIT

# ---- results -----------------------------------------------------------------
echo
echo "== comparison ($mode) =="
"$py" "$top/perf/scripts/compare.py" --out "$out/comparison.md" \
  "baseline=$out/rdma-worker-baseline.jsonl" \
  "direct=$out/rdma-direct-foreground.jsonl" \
  "deadline=$out/rdma-direct-deadline.jsonl" \
  "priority=$out/rdma-worker-priority.jsonl" \
  "direct-qos=$out/rdma-direct-qos.jsonl" \
  "unloaded=$out/rdma-direct-unloaded.jsonl"
if "$py" -c 'import matplotlib' 2>/dev/null; then
  "$py" "$top/perf/scripts/plot_cdf.py" --out "$out/foreground-cdf.png" \
    "baseline=$out/rdma-worker-baseline-latency.json" \
    "direct=$out/rdma-direct-foreground-latency.json" \
    "deadline=$out/rdma-direct-deadline-latency.json" \
    "priority=$out/rdma-worker-priority-latency.json" \
    "direct-qos=$out/rdma-direct-qos-latency.json" \
    "unloaded=$out/rdma-direct-unloaded-latency.json" >/dev/null
  png="$out/foreground-cdf.png"
else
  png="(not drawn: python3-matplotlib is missing)"
fi
echo
echo "results in $out:"
echo "  JSONL:      rdma-worker-baseline.jsonl rdma-direct-foreground.jsonl rdma-direct-deadline.jsonl rdma-worker-priority.jsonl rdma-direct-qos.jsonl rdma-direct-unloaded.jsonl"
echo "  latency:    *-latency.json (per-class CDF points)"
echo "  table:      comparison.md"
echo "  CDF plot:   $png"
