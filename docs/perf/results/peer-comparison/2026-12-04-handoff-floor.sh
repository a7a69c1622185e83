#!/usr/bin/env bash
# The floor of a hand-off against tent's worker and direct paths and Mooncake TENT's
# shm, 4 KiB WRITE, in interleaved rounds. Each round: the machine alone
# (perf/timer_floor) timing a one-thread window as long as a caller-side transfer
# (F1: 400 ns busy wait, 1000 ns between windows, about Mooncake's shm loop) and a
# bare round trip between two threads (F2: --threads=2, window 0, 200 ns between),
# and the same round trip with 200 ns of busy waiting on each side (F3: --threads=2,
# window 400, p50 about a worker transfer's Avg Tx here), then tent's worker path
# (W, unspec), tent's direct path (D, foreground_get) and
# Mooncake's shm (mc), D seconds each. WORK holds cfg.yaml (the soft fabric, one
# device, unlimited link, one unpinned lcore with the rail and background pollers).
set -u
N=${N:-8}; D=${D:-4}
T=${T:-/work/main/build/perf/tebench/tebench}
TF=${TF:-/work/main/build/perf/timer_floor/timer_floor}
MB=${MB:-/work/peer/build/mooncake-transfer-engine/benchmark/tebench}
export LD_LIBRARY_PATH=/work/peer/build/mooncake-common${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
cd "${WORK:?directory with cfg.yaml}" || exit 1
$T --backend=tent --xport_type=rdma --seg_type=DRAM --config=cfg.yaml --total_buffer_size=67108864 > target.log 2>&1 &
T1=$!
$MB --backend=tent --metadata_type=p2p --xport_type=shm --seg_type=DRAM --total_buffer_size=67108864 > mtarget.log 2>&1 &
T2=$!
trap 'kill $T1 $T2 2>/dev/null; wait' EXIT
for _ in $(seq 100); do grep -q "target ready" target.log && grep -q "target_seg_name" mtarget.log && break; sleep 0.2; done
SEG=$(sed -n 's/^tebench target ready: segment=\([^ ]*\).*/\1/p' target.log)
MSEG=$(sed -n 's/.*--target_seg_name=\([^ [:cntrl:]]*\).*/\1/p' mtarget.log | head -1)
if [ -z "$SEG" ] || [ -z "$MSEG" ]; then echo "a target did not come up" >&2; exit 1; fi
common="--backend=tent --seg_type=DRAM --op_type=write --start_batch_size=1 --max_batch_size=1 --start_num_threads=1 --max_num_threads=1 --duration=$D --total_buffer_size=67108864 --start_block_size=4096 --max_block_size=4096"
row() { awk '$1==4096{printf "%s %s %s", $6, $7, $8; if ($0 ~ /uniform sample/) printf " (sampled)"}' one.log; }
floor() { "$TF" "$@" | sed 's/.*p50_us=\([^ ]*\) p99_us=\([^ ]*\) p999_us=\([^ ]*\).*/\1 \2 \3/'; }
echo "# $(date -u +%FT%TZ) host $(hostname) N=$N D=$D T=$T"
echo "# columns: p50 or Avg Tx, P99, P999 (us)"
for _ in $(seq "$N"); do
  echo "F1 $(floor --window_ns=400 --gap_ns=1000 --duration_s=3)"
  echo "F2 $(floor --window_ns=0 --gap_ns=200 --duration_s=3 --threads=2)"
  echo "F3 $(floor --window_ns=400 --gap_ns=200 --duration_s=3 --threads=2)"
  $T --target_seg_name=$SEG --xport_type=rdma --config=cfg.yaml --warmup=1 $common --tent_intent_type=unspec > one.log 2>&1
  echo "W  $(row)"
  $T --target_seg_name=$SEG --xport_type=rdma --config=cfg.yaml --warmup=1 $common --tent_intent_type=foreground_get > one.log 2>&1
  echo "D  $(row)"
  $MB --target_seg_name=$MSEG --metadata_type=p2p --xport_type=shm $common > one.log 2>&1
  echo "mc $(row)"
done
