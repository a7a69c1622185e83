#!/usr/bin/env bash
# tent worker 4 KiB WRITE, binary A against binary B, beside Mooncake TENT shm, in
# interleaved rounds; each round first times one hand-off between the two vCPUs
# (lcore_ring_bench ping-pong p50), the host's cross-core cost at that moment.
# WORK holds cfg.yaml (the soft fabric, one device, unlimited link).
set -u
N=${N:-5}; D=${D:-5}
A=${A:?tebench binary A}; B=${B:?tebench binary B}
RB=${RB:-/work/main/build/perf/lcore_ring_bench/lcore_ring_bench}
MB=${MB:-/work/peer/build/mooncake-transfer-engine/benchmark/tebench}
export LD_LIBRARY_PATH=/work/peer/build/mooncake-common${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
cd "${WORK:?directory with cfg.yaml}"
$B --backend=tent --xport_type=rdma --seg_type=DRAM --config=cfg.yaml --total_buffer_size=67108864 > target.log 2>&1 &
T1=$!
$MB --backend=tent --metadata_type=p2p --xport_type=shm --seg_type=DRAM --total_buffer_size=67108864 > mtarget.log 2>&1 &
T2=$!
trap 'kill $T1 $T2 2>/dev/null; wait' EXIT
for i in $(seq 100); do grep -q "target ready" target.log && grep -q "target_seg_name" mtarget.log && break; sleep 0.2; done
SEG=$(sed -n 's/^tebench target ready: segment=\([^ ]*\).*/\1/p' target.log)
MSEG=$(sed -n 's/.*--target_seg_name=\([^ [:cntrl:]]*\).*/\1/p' mtarget.log | head -1)
[ -n "$SEG" ] && [ -n "$MSEG" ] || { echo "a target did not come up" >&2; exit 1; }
common="--backend=tent --seg_type=DRAM --op_type=write --start_batch_size=1 --max_batch_size=1 --start_num_threads=1 --max_num_threads=1 --duration=$D --total_buffer_size=67108864 --start_block_size=4096 --max_block_size=4096"
steal() { awk '/^cpu /{print $2+$3+$4+$5+$6+$7+$8, $9}' /proc/stat; }
run() { local a b; a=$(steal); "$@" > one.log 2>&1; b=$(steal); awk -v a="$a" -v b="$b" 'BEGIN{split(a,x," ");split(b,y," "); t=(y[1]+y[2])-(x[1]+x[2]); printf "%d%%", (t>0)?100*(y[2]-x[2])/t:0}' ; }
echo "# $(date -u +%FT%TZ) host $(hostname) N=$N D=$D A=$A B=$B"
echo "# columns: Avg Tx, P99, P999 (us); steal; 'xcore' rows: one-way hand-off p50 (ns)"
for r in $(seq $N); do
  echo "xcore $("$RB" --iterations=20000 --producers=1 2>/dev/null | awk '/hand-off one-way p50/{print $NF}')"
  s=$(run $A --target_seg_name=$SEG --xport_type=rdma --config=cfg.yaml --warmup=1 $common --tent_intent_type=unspec)
  echo "A  $(awk '$1==4096{printf "%s %s %s", $6, $7, $8; if ($0 ~ /uniform sample/) printf " (sampled)"}' one.log) steal $s"
  s=$(run $B --target_seg_name=$SEG --xport_type=rdma --config=cfg.yaml --warmup=1 $common --tent_intent_type=unspec)
  echo "B  $(awk '$1==4096{printf "%s %s %s", $6, $7, $8; if ($0 ~ /uniform sample/) printf " (sampled)"}' one.log) steal $s"
  s=$(run $MB --target_seg_name=$MSEG --metadata_type=p2p --xport_type=shm $common)
  echo "mc $(awk '$1==4096{printf "%s %s %s", $6, $7, $8; if ($0 ~ /uniform sample/) printf " (sampled)"}' one.log) steal $s"
done
