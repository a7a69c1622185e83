#!/usr/bin/env bash
# usage: exp.sh BLOCK [extra tent-yaml lines file]
set -u
TB=${TB:-/work/main/build/perf/tebench/tebench}
BS=$1; EXTRA=${2:-}
A=p22A; B=p22B
ip netns del $A 2>/dev/null; ip netns del $B 2>/dev/null
ip netns add $A; ip netns add $B
ip -n $A link set lo up; ip -n $B link set lo up
ip -n $A link add vA type veth peer name vB netns $B
ip -n $A addr add 198.18.2.1/24 dev vA; ip -n $B addr add 198.18.2.2/24 dev vB
ip -n $A link set vA up; ip -n $B link set vB up
cfg() { cat > $2 <<E2
fabric:
  provider: tcp
  tcp:
    devices:
      - {name: tcp0, listen: "$1:0"}
bootstrap: {listen: "$1:0"}
lcores:
  - cpu: -1
    pollers: ["rail:*", "background"]
log: {level: warn}
workers: {block_size: $BS}
E2
[ -n "$EXTRA" ] && cat $EXTRA >> $2; }
cfg 198.18.2.1 A.yaml; cfg 198.18.2.2 B.yaml
ip netns exec $A $TB --backend=tent --xport_type=rdma --seg_type=DRAM --config=A.yaml --total_buffer_size=67108864 > target.log 2>&1 &
for i in $(seq 100); do grep -q "target ready" target.log && break; sleep 0.1; done
SEG=$(sed -n 's/^tebench target ready: segment=\([^ ]*\).*/\1/p' target.log)
TP=$(ip netns pids $A)
ip netns exec $B $TB --target_seg_name=$SEG --backend=tent --xport_type=rdma --config=B.yaml --seg_type=DRAM --op_type=write --total_buffer_size=67108864 --duration=${DUR:-5} --warmup=1 ${IFLAGS:---start_block_size=4194304 --max_block_size=4194304 --start_batch_size=1 --max_batch_size=1 --start_num_threads=1 --max_num_threads=1 --tent_intent_type=unspec --poll_mode=wait} > init.log 2>&1 &
sleep 2.5
IP=$(ip netns pids $B)
snap() { for t in /proc/$1/task/*; do echo "$(basename $t) $(cat $t/comm) $(grep -E '^(voluntary|nonvoluntary)' $t/status | awk '{printf "%s ", $2}') $(awk '{print $14+$15}' $t/stat)"; done; }
if [ -n "${PERF:-}" ]; then perf record -a -g -o sys.data -- sleep 2 >/dev/null 2>&1; fi
if [ -n "${SNAP:-}" ]; then
snap $IP > s1; snap $TP > t1; sleep 2; snap $IP > s2; snap $TP > t2
echo init; paste s1 s2 | awk '{print $1, $2, "vol", $8-$3, "invol", $9-$4, "ticks", $10-$5}'; echo target; paste t1 t2 | awk '{print $1,$2, "vol", $8-$3, "invol", $9-$4, "ticks", $10-$5}'
fi
while [ -n "$(ip netns pids $B)" ]; do sleep 0.2; done
kill $(ip netns pids $A) 2>/dev/null; sleep 0.3
tent=$(awk '$1 == 4194304 {print $3; exit}' init.log)
ip netns exec $A iperf3 -s -1 -B 198.18.2.1 -p 5201 > /dev/null 2>&1 &
sleep 0.5
g=$(ip netns exec $B iperf3 -c 198.18.2.1 -p 5201 -t ${DUR:-5} -l 1M -J | /usr/bin/python3 -c "import json,sys; d=json.load(sys.stdin); print('%.3f' % (d['end']['sum_received']['bits_per_second']/8e9))")
wait
echo "bs=$BS tent=$tent iperf3=$g ratio=$(echo "$tent $g" | awk '{printf "%.2f", $1/$2}') steal=$(vmstat 1 2 | tail -1 | awk '{print $NF}')"
ip netns del $A; ip netns del $B
