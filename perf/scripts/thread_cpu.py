#!/usr/bin/python3
"""CPU time of each thread of a running process over an interval, from /proc.

usage: thread_cpu.py --pid PID [--seconds S] [--match REGEX] [--json]

Reads utime + stime of every thread (/proc/PID/task/TID/stat) at the start and
at the end of the interval and prints, per thread, the share of one CPU it used
(100 % = one core busy the whole time). --match keeps threads whose name
matches (DPDK 22.11 names lcore threads "rte-worker-N"). --json prints one object:
{"seconds": S, "threads": [{"tid", "name", "cpu_pct"}], "total_pct"}.
"""
import argparse
import json
import os
import re
import sys
import time

TICKS = os.sysconf("SC_CLK_TCK")


def thread_times(pid):
    """{tid: (name, utime + stime in ticks)} of the live threads of pid."""
    out = {}
    base = f"/proc/{pid}/task"
    for tid in os.listdir(base):
        try:
            with open(f"{base}/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue  # the thread ended
        # The name is in parentheses and may hold spaces: split after the last ')'.
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        out[int(tid)] = (name, int(fields[11]) + int(fields[12]))  # utime, stime
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--match", default="")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    try:
        before = thread_times(args.pid)
        start = time.monotonic()
        time.sleep(args.seconds)
        after = thread_times(args.pid)
        elapsed = time.monotonic() - start
    except FileNotFoundError:
        sys.exit(f"thread_cpu: no process {args.pid}")
    pattern = re.compile(args.match) if args.match else None
    rows = []
    for tid, (name, ticks) in sorted(after.items()):
        if pattern and not pattern.search(name):
            continue
        used = ticks - before.get(tid, (name, ticks))[1]
        rows.append({"tid": tid, "name": name,
                     "cpu_pct": round(100.0 * used / TICKS / elapsed, 2)})
    total = round(sum(r["cpu_pct"] for r in rows), 2)
    if args.json:
        print(json.dumps({"seconds": round(elapsed, 2), "threads": rows, "total_pct": total}))
        return
    print(f"{'tid':>8} {'thread':<18} cpu % (of one core, over {elapsed:.1f} s)")
    for r in rows:
        print(f"{r['tid']:>8} {r['name']:<18} {r['cpu_pct']:6.2f}")
    print(f"{'':>8} {'total':<18} {total:6.2f}")


if __name__ == "__main__":
    main()
