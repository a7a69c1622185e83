#!/usr/bin/python3
"""Issue 14's side-by-side table from the logs perf/run_peer_comparison.sh
collects: tent's tebench (direct and worker path, each row with the provider
and link model it ran on), Mooncake TENT's tebench over its shm transport, and
ucx_perftest; then the issue's targets checked against them.

Units: GB/s is 10^9 bytes/s in every column. ucx_perftest prints "MB/s" meaning
MiB/s (2^20 bytes/s); its figures are converted here.

usage: peer_table.py --manifest FILE [--load FILE] [--meta KEY=VALUE ...]
                     [--out-md FILE] [--out-json FILE]
  manifest: one run a line, tab-separated: key, kind, block size, log file, command;
            kind is tent, peer, ucx-lat, ucx-bw or floor; log file "-" = skipped, and then
            the command field holds the reason. The 4 MiB bandwidth pair runs in
            alternating rounds: round 1 is keys tent-worker and ucx, round i > 1 keys
            tent-worker-r<i> and ucx-r<i>; the table shows each side's median and the
            target the median of the rounds' ratios (this VM's copy bandwidth moves by a
            third within seconds, so only neighbours are compared).
  load:     lines "phase<TAB>contents of /proc/loadavg".
"""
import argparse
import json
import re
import sys

MIB = 2 ** 20
ANSI = re.compile(r"\x1b\[[0-9;]*m")
ROW = re.compile(r"^\d+\s+\d+\s+[-+.\deE]+")

# The table's rows: key, label, path / transport.
ROWS = [
    ("tent-direct", "tent direct path", "`--tent_intent_type=foreground_get`"),
    ("tent-direct-us", "tent direct path, whole-us timer",
     "as above, `--tx_resolution=us` (Mooncake's truncating timer)"),
    ("tent-worker", "tent worker path", "`--tent_intent_type=unspec`"),
    ("tent-worker-cached", "tent worker path, cached copy",
     "as above, soft NIC with `stream_copy_min_bytes: 0`"),
    ("peer", "Mooncake TENT tebench", "`--xport_type=shm`"),
    ("ucx", "UCX ucx_perftest", "`ucp_put_lat` 4 KiB / `ucp_put_bw` 4 MiB"),
    ("floor", "machine floor (no transfer)",
     "`perf/timer_floor`: a busy wait of tent direct's Avg Tx, timed the same way"),
    ("floor-handoff", "machine floor, hand-off (no transfer)",
     "`perf/timer_floor --threads=2 --window_ns=0`: a bare round trip between two threads, "
     "the least a worker transfer costs"),
]
SMALL, LARGE = 4096, 4 << 20


def parse_tebench(text):
    """Header lines (tent's) and the first table row (both tools' layout)."""
    out = {"provider": None, "link_model": None, "lcores": None, "row": None}
    for raw in text.splitlines():
        line = ANSI.sub("", raw).strip()
        if line.startswith("# provider:"):
            out["provider"] = line[len("# provider:"):].split()[0]
        elif line.startswith("# link model:"):
            out["link_model"] = line[len("# link model:"):].strip()
        elif line.startswith("# lcores:"):
            out["lcores"] = line[len("# lcores:"):].strip()
        elif out["row"] is None and ROW.match(line):
            f = line.split()
            out["row"] = {"block_size": int(f[0]), "batch_size": int(f[1]),
                          "bw_gbps": float(f[2]), "avg_inst_gbps": float(f[3]),
                          "avg_lat_us": float(f[4]), "avg_tx_us": float(f[5]),
                          "p99_tx_us": float(f[6]), "p999_tx_us": float(f[7])}
    return out


def parse_ucx(text):
    """ucx_perftest's "Final:" line; bandwidth converted from MiB/s to GB/s."""
    for raw in text.splitlines():
        f = raw.split()
        if len(f) >= 9 and f[0] == "Final:":
            v = [float(x) for x in f[1:9]]
            return {"iterations": int(v[0]), "lat_p50_us": v[1], "lat_avg_us": v[2],
                    "lat_overall_us": v[3], "bw_avg_mib_s": v[4], "bw_overall_mib_s": v[5],
                    "bw_avg_gbps": v[4] * MIB / 1e9, "bw_overall_gbps": v[5] * MIB / 1e9}
    return None


def parse_floor(text):
    """timer_floor's one line: key=value pairs after "timer floor:"."""
    for line in text.splitlines():
        if line.startswith("timer floor:"):
            pairs = dict(f.split("=", 1) for f in line[len("timer floor:"):].split() if "=" in f)
            return {k: float(v) for k, v in pairs.items()}
    return None


def read_manifest(path):
    runs = []
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            key, kind, size, log, command = line.rstrip("\n").split("\t", 4)
            run = {"key": key, "kind": kind, "block_size": int(size), "command": command}
            if log == "-":
                run["skipped"] = command
            else:
                with open(log, errors="replace") as lf:
                    text = lf.read()
                run["log"] = log
                parse = (parse_ucx if kind.startswith("ucx") else
                         parse_floor if kind == "floor" else parse_tebench)
                run["result"] = parse(text)
            runs.append(run)
    return runs


def find(runs, key, size):
    for r in runs:
        if r["key"] == key and r["block_size"] == size:
            return r
    return None


def fmt(v, digits=2):
    return "-" if v is None else f"{v:.{digits}f}"


def tebench_row(run):
    return ((run or {}).get("result") or {}).get("row")


def median(values):
    v = sorted(x for x in values if x is not None)
    if not v:
        return None
    mid = len(v) // 2
    return v[mid] if len(v) % 2 else (v[mid - 1] + v[mid]) / 2


def ucx_bw(run):
    return ((run or {}).get("result") or {}).get("bw_avg_gbps")


def bw_rounds(runs):
    """The alternating 4 MiB rounds: [{"round", "tent_gbps", "ucx_gbps", "ratio"}]."""
    out = []
    for i in range(1, 1000):
        suffix = "" if i == 1 else f"-r{i}"
        tent, ucx = find(runs, "tent-worker" + suffix, LARGE), find(runs, "ucx" + suffix, LARGE)
        if tent is None and ucx is None:
            break
        t, u = (tebench_row(tent) or {}).get("bw_gbps"), ucx_bw(ucx)
        out.append({"round": i, "tent_gbps": t, "ucx_gbps": u,
                    "ratio": t / u if t is not None and u else None})
    return out


def table_line(runs, key, label, path):
    small, large = find(runs, key, SMALL), find(runs, key, LARGE)
    rounds = bw_rounds(runs)
    several = len(rounds) > 1
    if key in ("floor", "floor-handoff"):
        f = (small or {}).get("result") or {}
        if not f:
            why = (small or {}).get("skipped", "not run")
            return f"| {label} | {path} | skipped: {why} | - | - | - | - | - | - |", small
        window = (f"{fmt(f.get('p50_us'), 2)} (p50 round trip)" if key == "floor-handoff" else
                  f"{fmt(f.get('window_ns') and f['window_ns'] / 1e3, 1)} (window)")
        return (f"| {label} | {path} | this machine, no engine | - | {window} | "
                f"{fmt(f.get('p99_us'), 1)} | {fmt(f.get('p999_us'), 1)} | - | - |"), small
    if key == "ucx":
        lat = (small or {}).get("result") or {}
        bw = (large or {}).get("result") or {}
        big = "-" if not bw else (f"{bw['bw_avg_gbps']:.1f} (printed {bw['bw_avg_mib_s']:,.0f}"
                                  " \"MB/s\" = MiB/s)")
        if several:
            big = (f"{fmt(median(r['ucx_gbps'] for r in rounds), 1)} (median of "
                   f"{len(rounds)} rounds; its \"MB/s\" is MiB/s, converted)")
        return (f"| {label} | {path} | UCX defaults | - | {fmt(lat.get('lat_avg_us'), 3)} "
                f"| - | - | - | {big} |"), (small or large)
    s, b = tebench_row(small), tebench_row(large)
    where = "its own shm transport" if key == "peer" else "-"
    for run in (small, large):
        res = (run or {}).get("result") or {}
        if res.get("provider"):
            model = res.get("link_model") or "(link model unknown)"
            where = model if model.startswith(res["provider"]) else f"{res['provider']}; {model}"
            break
    skipped = next((r["skipped"] for r in (small, large) if r and "skipped" in r), None)
    if skipped:
        return f"| {label} | {path} | skipped: {skipped} | - | - | - | - | - | - |", small
    big = fmt(b and b["bw_gbps"], 1)
    if key == "tent-worker" and several:
        big = (f"{fmt(median(r['tent_gbps'] for r in rounds), 1)} (median of {len(rounds)} "
               "rounds)")
    return (f"| {label} | {path} | {where} | {fmt(s and s['bw_gbps'])} | "
            f"{fmt(s and s['avg_tx_us'], 1)} | {fmt(s and s['p99_tx_us'], 1)} | "
            f"{fmt(s and s['p999_tx_us'], 1)} | {fmt(s and s['avg_lat_us'], 1)} | "
            f"{big} |"), small


def ratio_target(name, ours, theirs, limit, what, at_most):
    """ours / theirs <= limit (at_most) or >= limit; met is None when not known."""
    if ours is None or theirs is None:
        return {"target": name, "met": None, "detail": "not evaluated: a run is missing"}
    if theirs <= 0:
        return {"target": name, "met": None,
                "detail": f"not evaluated: the reference {what} is {theirs}"}
    r = ours / theirs
    met = r <= limit if at_most else r >= limit
    return {"target": name, "met": met, "ratio": r,
            "detail": f"{ours:.3f} vs {theirs:.3f} {what}: {r:.2f}x"}


def bandwidth_target(runs):
    """4 MiB worker path against ucp_put_bw: one round's ratio, or the median of the
    rounds' ratios (each round's two runs are neighbours in time)."""
    name = "4 MiB worker-path WRITE >= 0.9x ucp_put_bw"
    rounds = bw_rounds(runs)
    if len(rounds) <= 1:
        r = rounds[0] if rounds else {}
        return ratio_target(name, r.get("tent_gbps"), r.get("ucx_gbps"), 0.9, "GB/s", False)
    ratios = [r["ratio"] for r in rounds if r["ratio"] is not None]
    if not ratios:
        return {"target": name, "met": None, "detail": "not evaluated: a run is missing"}
    m = median(ratios)
    each = ", ".join(f"{r['tent_gbps']:.2f}/{r['ucx_gbps']:.2f}" for r in rounds
                     if r["ratio"] is not None)
    return {"target": name, "met": m >= 0.9, "ratio": m,
            "detail": f"median of {len(ratios)} rounds' ratios {m:.2f}x (tent/UCX GB/s: {each})"}


def targets(runs):
    direct = tebench_row(find(runs, "tent-direct", SMALL))
    direct_us = tebench_row(find(runs, "tent-direct-us", SMALL))
    peer = tebench_row(find(runs, "peer", SMALL))
    g = lambda row, k: row[k] if row else None  # noqa: E731
    out = [
        ratio_target("4 KiB direct Avg Tx <= 0.5x Mooncake shm (both timers whole us)",
                     g(direct_us, "avg_tx_us"), g(peer, "avg_tx_us"), 0.5, "us", True),
        ratio_target("4 KiB direct Avg Tx <= 0.5x Mooncake shm (tent's ns timer)",
                     g(direct, "avg_tx_us"), g(peer, "avg_tx_us"), 0.5, "us", True),
        ratio_target("4 KiB direct Avg Lat <= 0.5x Mooncake shm",
                     g(direct, "avg_lat_us"), g(peer, "avg_lat_us"), 0.5, "us", True),
    ]
    out.append(bandwidth_target(runs))
    p999 = g(direct, "p999_tx_us")
    floor = (find(runs, "floor", SMALL) or {}).get("result") or {}
    detail = "not evaluated: a run is missing" if p999 is None else f"{p999:.1f} us"
    if p999 is not None and floor.get("p999_us") is not None:
        detail += (f" (the machine's floor for a {floor['window_ns'] / 1e3:.1f} us window: "
                   f"P999 {floor['p999_us']:.1f} us)")
    out.insert(3, {"target": "4 KiB direct P999 < 10 us", "met": None if p999 is None
                   else p999 < 10, "detail": detail})
    out.append(worker_tail_target(runs))
    return out


def worker_tail_target(runs):
    """Issue 20's worker-path goal, beside the least any hand-off shows on this machine
    (the bare round trip's P999: a worker transfer is that round trip plus its work)."""
    name = "4 KiB worker P999 <= Mooncake shm P999"
    ours = (tebench_row(find(runs, "tent-worker", SMALL)) or {}).get("p999_tx_us")
    theirs = (tebench_row(find(runs, "peer", SMALL)) or {}).get("p999_tx_us")
    if ours is None or theirs is None:
        return {"target": name, "met": None, "detail": "not evaluated: a run is missing"}
    detail = f"{ours:.1f} vs {theirs:.1f} us"
    hand = (find(runs, "floor-handoff", SMALL) or {}).get("result") or {}
    if hand.get("p999_us") is not None:
        detail += f" (the machine's floor for a bare hand-off: P999 {hand['p999_us']:.1f} us)"
    return {"target": name, "met": ours <= theirs, "detail": detail}


def verdict(t):
    return {True: "met", False: "NOT met", None: "n/a"}[t["met"]]


def render(runs, load, meta):
    lines = [f"- {k}: {v}" for k, v in meta.items()]
    lines += [f"- load average ({phase}): {avg}" for phase, avg in load]
    lines += ["- units: GB/s = 10^9 bytes/s; us = microseconds; UCX's \"MB/s\" is MiB/s "
              "(2^20 bytes/s), converted", "",
              "| run | path / transport | provider; link model | 4 KiB BW (GB/s) | "
              "4 KiB Avg Tx (us) | P99 Tx (us) | P999 Tx (us) | 4 KiB Avg Lat (us) | "
              "4 MiB BW (GB/s) |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for key, label, path in ROWS:
        if any(r["key"] == key for r in runs):
            lines.append(table_line(runs, key, label, path)[0])
    rounds = bw_rounds(runs)
    if len(rounds) > 1:
        lines += ["", "4 MiB rounds (tent worker path, then ucp_put_bw right after it):", "",
                  "| round | tent worker (GB/s) | ucp_put_bw (GB/s) | ratio |",
                  "| --- | --- | --- | --- |"]
        lines += [f"| {r['round']} | {fmt(r['tent_gbps'])} | {fmt(r['ucx_gbps'])} | "
                  f"{fmt(r['ratio'])} |" for r in rounds]
    lines += ["", "Targets (issue 14; the last, issue 20):", ""]
    lines += [f"- {t['target']}: {t['detail']} -> {verdict(t)}" for t in targets(runs)]
    return "\n".join(lines) + "\n"


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--load")
    ap.add_argument("--meta", action="append", default=[])
    ap.add_argument("--out-md")
    ap.add_argument("--out-json")
    a = ap.parse_args(argv)
    runs = read_manifest(a.manifest)
    load = []
    if a.load:
        with open(a.load) as f:
            load = [tuple(line.rstrip("\n").split("\t", 1)) for line in f if "\t" in line]
    meta = dict(m.split("=", 1) for m in a.meta)
    text = render(runs, load, meta)
    sys.stdout.write(text)
    if a.out_md:
        with open(a.out_md, "w") as f:
            f.write(text)
    if a.out_json:
        record = {"meta": meta, "load_average": [{"phase": p, "loadavg": v} for p, v in load],
                  "units": {"bandwidth": "GB/s = 1e9 bytes/s", "latency": "us",
                            "ucx": "MiB/s as printed, converted to GB/s"},
                  "runs": runs, "bw_rounds": bw_rounds(runs), "targets": targets(runs)}
        with open(a.out_json, "w") as f:
            json.dump(record, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
