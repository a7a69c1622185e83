#!/usr/bin/env bash
# Worker-path message rate (issue 14): slices per second per lcore with the soft
# NIC's payload copy turned off (fabric.soft.copy_payload: false, a benchmark
# option: bytes are NOT delivered, the link model says payload=not-copied), so what
# is left is the engine's own per-slice cost - submit, ring, WR build, post, CQ poll,
# completion - which carries over to hardware where the NIC does the copy.
#
# One tebench target and, per batch size, one initiator run: one caller thread,
# 4 KiB WRITE requests (one slice each), migration intent (the worker path), an
# unlimited link, one lcore running the rail and background pollers. Prints a table
# and writes message-rate.jsonl (the tebench records) and message-rate.md.
#
# usage: perf/run_message_rate.sh [--build DIR] [--out DIR] [--duration S]
#          [--warmup S] [--batches "1 32 256"] [--lcore-cpu N] [--threads N]
#   --lcore-cpu  pin the lcore to this CPU (default: the last CPU this process may use)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)

build="$top/build"
out=""
duration=5
warmup=1
batches="1 32 256"
lcore_cpu=""
threads=1

die() { echo "run_message_rate: $*" >&2; exit 1; }
need_value() { [ $# -ge 2 ] || die "$1 needs a value"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --build) need_value "$@"; build=$2; shift 2 ;;
    --out) need_value "$@"; out=$2; shift 2 ;;
    --duration) need_value "$@"; duration=$2; shift 2 ;;
    --warmup) need_value "$@"; warmup=$2; shift 2 ;;
    --batches) need_value "$@"; batches=$2; shift 2 ;;
    --lcore-cpu) need_value "$@"; lcore_cpu=$2; shift 2 ;;
    --threads) need_value "$@"; threads=$2; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (try --help)" ;;
  esac
done
for b in $batches; do
  [[ "$b" =~ ^[1-9][0-9]*$ ]] || die "--batches: '$b' is not a positive integer"
done
[[ "$threads" =~ ^[1-9][0-9]*$ ]] || die "--threads: '$threads' is not a positive integer"

tebench="$build/perf/tebench/tebench"
[ -x "$tebench" ] || die "no $tebench; build first (ninja -C $build)"
py=/usr/bin/python3
[ -x "$py" ] || py=python3
out=${out:-"$build/message-rate"}
mkdir -p "$out"
rm -f "$out"/message-rate.jsonl "$out"/message-rate.md "$out"/run-*.txt
if [ -z "$lcore_cpu" ]; then
  lcore_cpu=$("$py" -c 'import os; print(max(os.sched_getaffinity(0)))')
fi

config="$out/soft-no-copy.yaml"
cat >"$config" <<EOF
# Written by perf/run_message_rate.sh: one soft device, unlimited link, payload not
# copied (benchmarks only: bytes are not delivered), one lcore pinned to CPU $lcore_cpu.
fabric:
  provider: soft
  soft:
    copy_payload: false
    devices:
      - {name: soft0, numa_node: 0, link_gbps: 0, latency_ns: 0}
lcores:
  - cpu: $lcore_cpu
    pollers: ["rail:*", "background"]
log:
  level: warn
EOF

max_batch=1
for b in $batches; do [ "$b" -gt "$max_batch" ] && max_batch=$b; done
buffer=$(( (max_batch * threads * 4096 * 2) + (8 << 20) ))

# shellcheck source=perf/scripts/tebench_target.sh
. "$top/perf/scripts/tebench_target.sh"
start_tebench_target "$tebench" "$config" "$buffer" "$out/target.log"

for b in $batches; do
  classes="[{\"name\":\"bulk\",\"threads\":$threads,\"block_size\":4096,\"batch_size\":$b,\"intent_type\":\"migration\",\"slo_us\":0,\"weight\":1}]"
  echo "== batch $b: $threads caller thread(s), 4 KiB WRITE, ${duration} s (+${warmup} s warm-up)"
  "$tebench" --target_seg_name="$segment" --backend=tent --xport_type=rdma --config="$config" \
    --total_buffer_size="$buffer" --duration="$duration" --warmup="$warmup" \
    --start_num_threads="$threads" --max_num_threads="$threads" \
    --workload_classes_json="$classes" --qos_output_jsonl="$out/message-rate.jsonl" \
    --run_label="batch-$b" >"$out/run-$b.txt" 2>&1 || { cat "$out/run-$b.txt" >&2; die "batch $b failed"; }
  grep -E '^# (provider|link model|lcores|paths)' "$out/run-$b.txt" | sort -u
done

"$py" "$top/perf/scripts/message_rate.py" "$out/message-rate.jsonl" | tee "$out/message-rate.md"
echo "records: $out/message-rate.jsonl, table: $out/message-rate.md"
