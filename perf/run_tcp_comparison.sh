#!/usr/bin/env bash
# Issue 22's three comparisons for the tcp provider, measured in one run on one link:
# two network namespaces (tent-perfA, tent-perfB) joined by a veth pair with addresses
# from 198.18.0.0/15. Each tool has its server (or tebench target) in A and its client
# (or initiator) in B, so every figure crosses the same veth:
#   1. 4 MiB WRITE, one thread, batch 1, worker path: tent vs iperf3 single stream and
#      ucx_perftest -t ucp_put_bw with UCX_TLS=tcp;
#   2. 4 KiB WRITE round trip, direct path, one thread: tent's P50/P99 vs sockperf
#      ping-pong --tcp -m 4096 (full round trip);
#   3. the RFC's burst comparison (4 KiB foreground + 4 MiB migration) with a tc tbf rate
#      limit on the veth: the direct path's foreground P99 against the worker baseline's.
# Every tent figure names its provider, why it serves and its link (the engine's stats);
# every line names the link. Load average before each part. Needs root (namespaces);
# installs iperf3, sockperf and ucx-utils from Debian when missing. Builds nothing.
#
# usage: perf/run_tcp_comparison.sh [--build DIR] [--out DIR] [--duration S] [--rounds N] [--rate R]
#          [--caller-progress true|false] [--block-size BYTES]
#   --duration  seconds per measurement (default 5)
#   --rounds    interleaved rounds of the 4 MiB comparison, medians reported (default 3)
#   --caller-progress true|false   fabric.tcp.caller_progress of both engines (default false)
#   --rate      tbf rate of the burst comparison's veth (default 2gbit)
#   --block-size workers.block_size of both engines (default: the engine's, 65536): the
#               worker path's slice, one WR each
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build="$top/build"
out=""
duration=5
rounds=3
rate=2gbit
caller_progress=false
block_size=""
die() { echo "run_tcp_comparison: $*" >&2; exit 1; }
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --caller-progress) caller_progress=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --block-size) block_size=$2; shift 2 ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (try --help)" ;;
  esac
done
[[ "$caller_progress" =~ ^(true|false)$ ]] ||
  die "--caller-progress: true or false, got '$caller_progress'"
[[ "$rounds" =~ ^[1-9][0-9]{0,2}$ ]] || die "--rounds: an integer in [1, 999], got '$rounds'"
[[ -z "$block_size" || "$block_size" =~ ^[1-9][0-9]{0,9}$ ]] ||
  die "--block-size: a positive number of bytes, got '$block_size'"
[ "$(id -u)" = 0 ] || die "needs root (network namespaces)"
tebench="$build/perf/tebench/tebench"
[ -x "$tebench" ] || die "no $tebench; build first (ninja -C $build)"
out=${out:-"$build/tcp-comparison"}
mkdir -p "$out"
py=/usr/bin/python3

for pkg in iperf3 sockperf ucx-utils; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' && continue
  echo "run_tcp_comparison: installing Debian's $pkg" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$pkg" >"$out/apt-$pkg.log" 2>&1 ||
    die "apt-get install $pkg failed (log $out/apt-$pkg.log)"
done

# ---- the link: two namespaces, one veth, nothing else -----------------------------
A=tent-perfA
B=tent-perfB
ipA=198.18.2.1
ipB=198.18.2.2
pids=()
# Every process left in a namespace goes before the namespace: the PIDs of this shell's
# background jobs are the `ip netns exec` wrappers' subshells, not always the servers
# (a tebench target and a sockperf server outlived the namespaces before).
kill_in() {  # namespace
  local left
  left=$(ip netns pids "$1" 2>/dev/null || true)
  [ -n "$left" ] || return 0
  kill -TERM $left 2>/dev/null || true
  for _ in $(seq 1 50); do
    [ -n "$(ip netns pids "$1" 2>/dev/null || true)" ] || return 0
    sleep 0.1
  done
  kill -KILL $(ip netns pids "$1" 2>/dev/null || true) 2>/dev/null || true
}
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  kill_in "$A"
  kill_in "$B"
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  ip netns del "$A" 2>/dev/null || true
  ip netns del "$B" 2>/dev/null || true
}
trap cleanup EXIT
cleanup  # stale ones of a killed run
ip netns add "$A"
ip netns add "$B"
ip -n "$A" link set lo up
ip -n "$B" link set lo up
ip -n "$A" link add vA type veth peer name vB netns "$B"
ip -n "$A" addr add "$ipA/24" dev vA
ip -n "$B" addr add "$ipB/24" dev vB
ip -n "$A" link set vA up
ip -n "$B" link set vB up
link="veth between network namespaces (198.18.2.1 <-> 198.18.2.2, mtu 1500, one kernel)"
inA() { ip netns exec "$A" "$@"; }
inB() { ip netns exec "$B" "$@"; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
results="$out/results.tsv"
: >"$results"
put() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" | tee -a "$results"; }  # key value unit note

# ---- tent configs ---------------------------------------------------------------
tent_config() {  # ip file
  cat >"$2" <<EOF
# Written by perf/run_tcp_comparison.sh: the tcp provider on $1 (one device).
fabric:
  provider: tcp
  tcp:
    caller_progress: $caller_progress
    devices:
      - {name: tcp0, listen: "$1:0"}
bootstrap: {listen: "$1:0"}
lcores:
  - cpu: -1
    pollers: ["rail:*", "background"]
log: {level: warn}
EOF
  if [ -n "$block_size" ]; then echo "workers: {block_size: $block_size}" >>"$2"; fi
}
tent_config "$ipA" "$out/tent-A.yaml"
tent_config "$ipB" "$out/tent-B.yaml"
inA "$tebench" --backend=tent --xport_type=rdma --seg_type=DRAM --config="$out/tent-A.yaml" \
  --total_buffer_size=67108864 >"$out/tent-target.log" 2>&1 &
pids+=($!)
segment=""
for _ in $(seq 1 300); do
  segment=$(sed -n 's/^tebench target ready: segment=\([^ ]*\).*/\1/p' "$out/tent-target.log")
  [ -n "$segment" ] && break
  sleep 0.1
done
[ -n "$segment" ] || { cat "$out/tent-target.log" >&2; die "the tebench target did not start"; }
tent() {  # log flags...
  local log=$1
  shift
  inB "$tebench" --target_seg_name="$segment" --backend=tent --xport_type=rdma \
    --config="$out/tent-B.yaml" --seg_type=DRAM --op_type=write --total_buffer_size=67108864 \
    --duration="$duration" --warmup=1 "$@" >"$log" 2>"$log.err" ||
    die "tebench failed: $(tail -3 "$log.err")"
}

# ---- 1. 4 MiB WRITE throughput --------------------------------------------------
# Interleaved rounds (iperf3, tent, ucx_perftest, again): on a shared VM one tool's figure
# swings by 2x between runs minutes apart, so each round puts the three side by side and the
# summary takes each tool's median. tent's caller waits with waitTransfer (--poll_mode=wait)
# as iperf3's blocks in send(): on a 2-vCPU host a spinning caller takes the core the
# sending lcore and the target's receiving thread need (docs/perf/tcp.md).
echo "== 1. 4 MiB, one stream, $rounds rounds, load $(load)"
ucx_cmd="ucx_perftest $ipA -p PORT -t ucp_put_bw -s 4194304 -n 2000"
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{v[NR] = $1} END {if (NR) print v[int((NR + 1) / 2)]}'; }
iperf_all="" tent_all="" ucx_all=""
for r in $(seq 1 "$rounds"); do
  inA iperf3 -s -1 -B "$ipA" -p 5201 >"$out/iperf3-server-$r.log" 2>&1 &
  pids+=($!)
  sleep 0.5
  for _ in $(seq 1 50); do  # until the server listens (a loaded machine starts it late)
    inB iperf3 -c "$ipA" -p 5201 -t "$duration" -l 1M -J >"$out/iperf3-$r.json" && break
    sleep 0.2
  done
  g=$($py -c "import json,sys; d=json.load(open(sys.argv[1])); print('%.3f' % (d['end']['sum_received']['bits_per_second']/8e9))" "$out/iperf3-$r.json")
  iperf_all="$iperf_all $g"
  tent "$out/tent-worker-4m-$r.log" --start_block_size=4194304 --max_block_size=4194304 \
    --start_batch_size=1 --max_batch_size=1 --start_num_threads=1 --max_num_threads=1 \
    --tent_intent_type=unspec --poll_mode=wait
  t=$(awk '$1 == 4194304 {print $3; exit}' "$out/tent-worker-4m-$r.log")
  tent_all="$tent_all $t"
  port=$((20000 + RANDOM % 20000))  # a server serves one test
  UCX_TLS=tcp inA ucx_perftest -p "$port" >"$out/ucx-server-$r.log" 2>&1 &
  pids+=($!)
  sleep 0.5
  for _ in $(seq 1 20); do  # until the server listens
    UCX_TLS=tcp inB ${ucx_cmd/PORT/$port} >"$out/ucx-put-bw-$r.log" 2>&1 && break
    sleep 0.3
  done
  # Final: iterations, then latency typical/avg/overall (us), then bandwidth avg/overall (MB/s = 2^20 B/s), ...
  u=$(awk '/^Final:/ {printf "%.3f", $7 * 1048576 / 1e9}' "$out/ucx-put-bw-$r.log")
  ucx_all="$ucx_all ${u:-}"
  echo "   round $r: iperf3 $g GB/s, tent $t GB/s, ucp_put_bw ${u:-n/a} GB/s (load $(load))"
done
tent_provider=$(sed -n 's/^# provider: //p' "$out/tent-worker-4m-1.log" | head -1)
tent_link=$(sed -n 's/^# link model: //p' "$out/tent-worker-4m-1.log" | head -1)
iperf_gbps=$(echo "$iperf_all" | median)
tent_gbps=$(echo "$tent_all" | median)
ucx_gbps=$(echo "$ucx_all" | median)
put iperf3_gbytes_per_s "$iperf_gbps" GB/s "median of$iperf_all: iperf3 -c $ipA -t $duration -l 1M (one TCP stream), $link"
put tent_worker_4m_gbytes_per_s "$tent_gbps" GB/s "median of$tent_all: tebench WRITE 4 MiB batch 1, 1 thread, worker path, --poll_mode=wait; workers.block_size ${block_size:-65536 (the default)}; provider $tent_provider; link model $tent_link; $link"
put ucx_put_bw_gbytes_per_s "${ucx_gbps:-n/a}" GB/s "median of$ucx_all: UCX_TLS=tcp $ucx_cmd; $link"

# ---- 2. 4 KiB round trip -------------------------------------------------------------
echo "== 2. 4 KiB round trip, load $(load)"
inA sockperf sr --tcp -i "$ipA" -p 11111 >"$out/sockperf-server.log" 2>&1 &
pids+=($!)
sleep 0.5
sp_cmd="sockperf ping-pong --tcp -i $ipA -p 11111 -m 4096 -t $duration --full-rtt"
for _ in $(seq 1 50); do
  inB $sp_cmd >"$out/sockperf.log" 2>&1 && grep -q "percentile 50.000" "$out/sockperf.log" && break
  sleep 0.2
done
sp_p50=$(sed -n 's/.*percentile 50.000 = *\([0-9.]*\).*/\1/p' "$out/sockperf.log" | head -1)
sp_p99=$(sed -n 's/.*percentile 99.000 = *\([0-9.]*\).*/\1/p' "$out/sockperf.log" | head -1)
put sockperf_4k_rtt_p50_us "$sp_p50" us "$sp_cmd; $link"
put sockperf_4k_rtt_p99_us "$sp_p99" us "$sp_cmd; $link"

fg='[{"name":"fg","threads":1,"block_size":4096,"batch_size":1,"intent_type":"foreground_get","slo_us":0,"weight":1}]'
tent "$out/tent-direct-4k.txt" --workload_classes_json="$fg" --start_num_threads=1 \
  --max_num_threads=1 --qos_output_jsonl="$out/tent-direct-4k.jsonl" --run_label=direct-4k
read -r d_p50 d_p99 d_direct < <($py - "$out/tent-direct-4k.jsonl" <<'EOF'
import json, sys
rec = [json.loads(l) for l in open(sys.argv[1]) if l.strip()][-1]
c = rec["classes"][0]
lat = c.get("latency", c)
print(lat.get("p50_us"), lat.get("p99_us"), rec.get("direct", {}).get("succeeded", "?"))
EOF
)
put tent_direct_4k_rtt_p50_us "$d_p50" us "tebench WRITE 4 KiB foreground_get, 1 thread, direct path ($d_direct direct successes); provider $tent_provider; $link"
put tent_direct_4k_rtt_p99_us "$d_p99" us "same run"

# ---- 3. burst comparison with a rate limit ------------------------------------------
echo "== 3. burst, tbf $rate on vB, load $(load)"
tc -n "$B" qdisc add dev vB root tbf rate "$rate" burst 256kb latency 50ms
burst() {  # label intent
  local classes
  classes=$(printf '[{"name":"foreground","threads":1,"block_size":4096,"batch_size":1,"intent_type":"%s","slo_us":1000,"weight":4},{"name":"migration","threads":2,"block_size":4194304,"batch_size":2,"intent_type":"migration","slo_us":0,"weight":1}]' "$2")
  tent "$out/burst-$1.txt" --workload_classes_json="$classes" --start_num_threads=3 \
    --max_num_threads=3 --qos_output_jsonl="$out/burst-$1.jsonl" --run_label="$1"
  $py - "$out/burst-$1.jsonl" <<'EOF'
import json, sys
rec = [json.loads(l) for l in open(sys.argv[1]) if l.strip()][-1]
for c in rec["classes"]:
    if c.get("name", c.get("config", {}).get("name")) == "foreground":
        lat = c.get("latency", c)
        print(lat.get("p50_us"), lat.get("p99_us"))
        break
EOF
}
read -r base_p50 base_p99 < <(burst worker-baseline unspec)
read -r dir_p50 dir_p99 < <(burst direct foreground_get)
tc -n "$B" qdisc del dev vB root
put burst_worker_fg_p99_us "$base_p99" us "foreground 4 KiB (unspec, worker path) beside 2 x 4 MiB migration; tbf $rate on vB; provider $tent_provider; $link"
put burst_direct_fg_p99_us "$dir_p99" us "foreground 4 KiB (foreground_get, direct path), same load; tbf $rate"

# ---- summary ----------------------------------------------------------------------
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 > 0 && a != "") printf "%.2f", a / b; else print "n/a" }'; }
{
  echo "# tcp comparison, $(date -u +%FT%TZ), load after: $(load)"
  echo "# provider: $tent_provider"
  echo "# link: $link"
  echo "4 MiB WRITE: tent worker $tent_gbps GB/s = $(ratio "$tent_gbps" "$iperf_gbps")x iperf3 ($iperf_gbps GB/s), $(ratio "$tent_gbps" "${ucx_gbps:-}")x ucp_put_bw UCX_TLS=tcp (${ucx_gbps:-n/a} GB/s)"
  echo "4 KiB RTT: tent direct p50 $d_p50 us = $(ratio "$d_p50" "$sp_p50")x sockperf ($sp_p50 us); p99 $d_p99 us = $(ratio "$d_p99" "$sp_p99")x sockperf ($sp_p99 us)"
  echo "burst (tbf $rate): foreground p99 direct $dir_p99 us vs worker baseline $base_p99 us ($(ratio "$dir_p99" "$base_p99")x)"
} | tee "$out/summary.txt"
