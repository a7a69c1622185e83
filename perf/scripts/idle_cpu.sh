#!/usr/bin/env bash
# Idle CPU cost of tent's lcores: starts a tebench target (soft provider, nothing
# to do), lets it settle, and reads the CPU time of its lcore threads from
# /proc/PID/task/TID/stat over an interval (perf/scripts/thread_cpu.py).
# Prints one line per lcore thread and appends one JSON record to --jsonl.
#
# usage: perf/scripts/idle_cpu.sh --tebench BIN --label L [--idle "{...}"]
#          [--seconds S] [--settle S] [--jsonl FILE] [--out DIR]
#   --idle   the idle policy of both lcores as a YAML flow map, e.g.
#            "{block_max_us: 0}" (naps only); empty: the binary's default policy.
#            An older binary may not know every key.
# The target runs two unpinned lcores (rail:* on one, background on the other)
# on two soft devices (link model: unlimited, latency 2 us).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
tebench=""
label=""
idle=""
seconds=5
settle=2
jsonl=""
out=""
die() { echo "idle_cpu: $*" >&2; exit 1; }
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || die "$1 needs a value"
  case "$1" in
    --tebench) tebench=$2 ;;
    --label) label=$2 ;;
    --idle) idle=$2 ;;
    --seconds) seconds=$2 ;;
    --settle) settle=$2 ;;
    --jsonl) jsonl=$2 ;;
    --out) out=$2 ;;
    *) die "unknown argument '$1'" ;;
  esac
  shift 2
done
[ -x "$tebench" ] || die "--tebench: '$tebench' is not an executable"
[ -n "$label" ] || die "--label is required"
py=/usr/bin/python3
[ -x "$py" ] || py=python3
out=${out:-$(mktemp -d)}
mkdir -p "$out"
cfg="$out/idle-$label.yaml"
idle_key=""
[ -n "$idle" ] && idle_key=", idle: $idle"
cat >"$cfg" <<EOF
fabric:
  provider: soft
  soft:
    devices:
      - {name: soft0, numa_node: 0, link_gbps: 0, latency_ns: 2000}
      - {name: soft1, numa_node: 0, link_gbps: 0, latency_ns: 2000}
lcores:
  - {cpu: -1, pollers: ["rail:*"]$idle_key}
  - {cpu: -1, pollers: [background]$idle_key}
EOF
log="$out/idle-$label.log"
"$tebench" --backend=tent --xport_type=rdma --seg_type=DRAM --config="$cfg" \
  --total_buffer_size=$((16 << 20)) >"$log" 2>&1 &
pid=$!
trap 'kill -TERM $pid 2>/dev/null || true; wait $pid 2>/dev/null || true' EXIT
for _ in $(seq 1 300); do
  grep -q '^tebench target ready' "$log" && break
  kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; die "the target exited"; }
  sleep 0.1
done
grep -q '^tebench target ready' "$log" || die "the target did not get ready in 30 s"
sleep "$settle"
result=$("$py" "$top/perf/scripts/thread_cpu.py" --pid "$pid" --seconds "$seconds" \
  --match '^(rte-worker|lcore-worker)' --json)
"$py" - "$label" "$idle" "$tebench" "$result" "$(cut -d' ' -f1-3 /proc/loadavg)" "$jsonl" <<'EOF'
import json, sys
label, idle, binary, result, load, jsonl = sys.argv[1:]
r = json.loads(result)
per = [t["cpu_pct"] for t in r["threads"]]
rec = {"label": label, "idle_policy": idle or "(default)", "tebench": binary,
       "provider": "soft", "link_model": "unlimited, 2 us", "seconds": r["seconds"],
       "lcore_cpu_pct": per, "mean_cpu_pct_per_lcore": round(sum(per) / len(per), 2) if per else None,
       "loadavg": load}
cells = ", ".join(f"{p:.2f} %" for p in per)
print(f"idle {label:<28} lcores: {cells} of a core each over {r['seconds']} s "
      f"(mean {rec['mean_cpu_pct_per_lcore']} %; load {load})")
if jsonl:
    with open(jsonl, "a") as f:
        f.write(json.dumps(rec) + "\n")
EOF
