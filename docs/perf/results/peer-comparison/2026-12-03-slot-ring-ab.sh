#!/usr/bin/env bash
# tent worker 4 KiB WRITE: the previous binary (rte_ring RTS input ring) and the new
# one (slot ring) beside Mooncake TENT shm, interleaved rounds. WORK holds cfg.yaml.
set -u
N=${N:-5}; D=${D:-5}
A=${A:-/tmp/ab/tebench-rts}; B=${B:-/tmp/ab/tebench-slot}
MB=/work/peer/build/mooncake-transfer-engine/benchmark/tebench
cd "${WORK:-/tmp/ab}"
$B --backend=tent --xport_type=rdma --seg_type=DRAM --config=cfg.yaml --total_buffer_size=67108864 > target.log 2>&1 &
T1=$!
$MB --backend=tent --metadata_type=p2p --xport_type=shm --seg_type=DRAM --total_buffer_size=67108864 > mtarget.log 2>&1 &
T2=$!
for i in $(seq 100); do grep -q "target ready" target.log && grep -q "target_seg_name" mtarget.log && break; sleep 0.2; done
SEG=$(sed -n 's/^tebench target ready: segment=\([^ ]*\).*/\1/p' target.log)
MSEG=$(sed -n 's/.*--target_seg_name=\([^ [:cntrl:]]*\).*/\1/p' mtarget.log | head -1)
common="--backend=tent --seg_type=DRAM --op_type=write --start_batch_size=1 --max_batch_size=1 --start_num_threads=1 --max_num_threads=1 --duration=$D --total_buffer_size=67108864 --start_block_size=4096 --max_block_size=4096"
steal() { awk '/^cpu /{print $2+$3+$4+$5+$6+$7+$8, $9}' /proc/stat; }
run() { local a b; a=$(steal); "$@" > one.log 2>&1; b=$(steal); awk -v a="$a" -v b="$b" 'BEGIN{split(a,x," ");split(b,y," "); t=(y[1]+y[2])-(x[1]+x[2]); printf "%d%%", (t>0)?100*(y[2]-x[2])/t:0}' ; }
echo "# $(date -u +%FT%TZ) host $(hostname) N=$N D=$D; columns: Avg Tx, P99, P999 (us)"
for r in $(seq $N); do
  s=$(run $A --target_seg_name=$SEG --xport_type=rdma --config=cfg.yaml --warmup=1 $common --tent_intent_type=unspec)
  echo "rts  $(awk '$1==4096{print $6, $7, $8}' one.log) steal $s"
  s=$(run $B --target_seg_name=$SEG --xport_type=rdma --config=cfg.yaml --warmup=1 $common --tent_intent_type=unspec)
  echo "slot $(awk '$1==4096{print $6, $7, $8}' one.log) steal $s"
  s=$(run $MB --target_seg_name=$MSEG --metadata_type=p2p --xport_type=shm $common)
  echo "mc   $(awk '$1==4096{print $6, $7, $8}' one.log) steal $s"
done
kill $T1 $T2; wait
