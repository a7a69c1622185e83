#!/usr/bin/python3
"""Records, table and plot of perf/run_core_sweep.sh.

usage: core_sweep_report.py append --out SWEEP.jsonl --record RAW.jsonl --workload W
                                   --layout NAME --pinned yes|no --rails R --background N
                                   --threads N --block B --cpus LIST --load "1 5 15"
       core_sweep_report.py table --in SWEEP.jsonl [--idle IDLE.jsonl] [--out FILE.md]
       core_sweep_report.py plot --in SWEEP.jsonl --out FILE.png

append: reads the last tebench QoS record of RAW.jsonl and appends one sweep
record: the layout's dimensions, the figures the table shows, the lcores'
busy share (busy / (busy + idle) TSC cycles, per lcore) and the whole tebench
record under "tebench". table: markdown tables (bulk per block size, burst,
and the idle records of perf/scripts/idle_cpu.sh when --idle names them).
"""
import argparse
import json
import os
import sys


def last_record(path):
    last = None
    with open(path) as f:
        for line in f:
            if line.strip():
                last = json.loads(line)
    if last is None:
        sys.exit(f"{path}: no record")
    return last


def busy_share(lcore):
    total = lcore.get("busy_cycles", 0) + lcore.get("idle_cycles", 0)
    return round(lcore.get("busy_cycles", 0) / total, 4) if total else None


def summarize(record, workload):
    classes = record.get("classes", [])
    fg = next((c for c in classes if c.get("name") == "foreground"), None)
    bg = [c for c in classes if c is not fg]
    out = {
        "throughput_gbps": record.get("aggregate_throughput_gbps"),
        "bg_gbps": round(sum(c.get("throughput_gbps", 0.0) for c in bg), 4),
        "provider": record.get("provider"),
        "link_model": record.get("link_model"),
        "lcores": [{"cpu": l.get("cpu"), "pollers": l.get("pollers"), "busy": busy_share(l)}
                   for l in record.get("lcores", [])],
    }
    if workload == "bulk" and bg:
        out["p50_us"] = bg[0].get("p50_us")
        out["p99_us"] = bg[0].get("p99_us")
    if fg is not None:
        for key in ("p50_us", "p99_us", "p999_us", "slo_attainment"):
            out["fg_" + key] = fg.get(key)
    return out


def cmd_append(a):
    record = last_record(a.record)
    row = {"workload": a.workload, "layout": a.layout, "pinned": a.pinned == "yes",
           "rails": a.rails, "background_lcores": int(a.background), "threads": int(a.threads),
           "block_size": int(a.block) if a.block.isdigit() else a.block,
           "allowed_cpus": a.cpus, "loadavg": a.load}
    row.update(summarize(record, a.workload))
    row["tebench"] = record
    with open(a.out, "a") as f:
        f.write(json.dumps(row) + "\n")
    brief = f"{row['throughput_gbps']:.3f} GB/s" if row["throughput_gbps"] is not None else "?"
    if "fg_p99_us" in row:
        brief += f", foreground p99 {row['fg_p99_us']:.1f} us, background {row['bg_gbps']:.3f} GB/s"
    busy = ", ".join(f"{l['busy']:.2f}" for l in row["lcores"] if l["busy"] is not None)
    print(f"    {brief}; lcore busy share: {busy}")


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def fmt(v, spec):
    return "n/a" if v is None else format(v, spec)


def layout_cell(r):
    return (f"`{r['layout']}` | {'yes' if r['pinned'] else 'no'} | {r['rails']} | "
            f"{r['background_lcores']}")


def busy_cell(r):
    return " / ".join(fmt(l["busy"], ".2f") for l in r["lcores"])


def size_text(b):
    if not isinstance(b, int):
        return str(b)
    return f"{b >> 20} MiB" if b >= 1 << 20 and b % (1 << 20) == 0 else f"{b >> 10} KiB"


def link_text(rows):
    return rows[0].get("link_model") or "(unknown)" if rows else "(unknown)"


def bulk_blocks(bulk):
    return sorted({r.get("block_size", 4194304) for r in bulk},
                  key=lambda b: b if isinstance(b, int) else 0)


def table(rows, idle=()):
    lines = []
    bulk = [r for r in rows if r["workload"] == "bulk"]
    for block in bulk_blocks(bulk):
        mine_block = [r for r in bulk if r.get("block_size", 4194304) == block]
        threads = sorted({r["threads"] for r in mine_block})
        layouts = list(dict.fromkeys(r["layout"] for r in mine_block))
        lines += [f"### bulk: {size_text(block)} WRITE, worker path (migration), throughput "
                  "(GB/s, 10^9 B/s) by caller threads", "",
                  f"provider {mine_block[0].get('provider')}, link model: {link_text(mine_block)}",
                  "",
                  "| layout | pinned | rails | background lcores | " +
                  " | ".join(f"{t} thr" for t in threads) + " | lcore busy share (max threads) |",
                  "|" + " --- |" * (5 + len(threads))]
        for name in layouts:
            mine = {r["threads"]: r for r in mine_block if r["layout"] == name}
            first = next(iter(mine.values()))
            cells = [fmt(mine[t]["throughput_gbps"], ".3f") if t in mine else "-" for t in threads]
            lines.append(f"| {layout_cell(first)} | " + " | ".join(cells) +
                         f" | {busy_cell(mine[max(mine)])} |")
        lines.append("")
    burst = [r for r in rows if r["workload"] == "burst"]
    if burst:
        lines += ["### burst: 1 foreground_get 4 KiB + 3 migration 4 MiB threads", "",
                  f"provider {burst[0].get('provider')}, link model: {link_text(burst)}", "",
                  "| layout | pinned | rails | background lcores | fg p50 (us) | fg p99 (us) | "
                  "fg p999 (us) | fg SLO 300 us | background GB/s | lcore busy share |",
                  "|" + " --- |" * 10]
        for r in burst:
            lines.append(f"| {layout_cell(r)} | {fmt(r.get('fg_p50_us'), '.1f')} | "
                         f"{fmt(r.get('fg_p99_us'), '.1f')} | {fmt(r.get('fg_p999_us'), '.1f')} | "
                         f"{fmt(r.get('fg_slo_attainment'), '.4f')} | {fmt(r['bg_gbps'], '.3f')} | "
                         f"{busy_cell(r)} |")
        lines.append("")
    if idle:
        lines += ["### idle: CPU of each lcore of an idle target (% of one core)", "",
                  f"provider {idle[0].get('provider')}, link model: {idle[0].get('link_model')}; "
                  "two unpinned lcores (rail:*, background), utime+stime from "
                  "/proc/PID/task/TID/stat", "",
                  "| run | idle policy | lcore CPU % | mean % per lcore | seconds | load average |",
                  "|" + " --- |" * 6]
        for r in idle:
            cpu = " / ".join(f"{p:.2f}" for p in r["lcore_cpu_pct"])
            lines.append(f"| `{r['label']}` | `{r['idle_policy']}` | {cpu} | "
                         f"{fmt(r['mean_cpu_pct_per_lcore'], '.2f')} | {r['seconds']} | "
                         f"{r['loadavg']} |")
        lines.append("")
    if rows:
        lines.append(f"allowed CPUs {rows[0].get('allowed_cpus')}; load average at each run's end: "
                     f"{min(x['loadavg'] for x in rows)} .. {max(x['loadavg'] for x in rows)}")
    return "\n".join(lines)


def cmd_table(a):
    idle = load(a.idle) if a.idle and os.path.exists(a.idle) else []
    text = table(load(a.inp), idle)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")


def short_link(text):
    """The link model of the first soft device: 'soft0 link_gbps=4 latency_ns=2000'."""
    first = text.split(";")[0]
    return first.split(":", 1)[1].strip() if first.startswith("soft:") else first


def cmd_plot(a):
    import matplotlib
    import matplotlib.ticker
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = load(a.inp)
    bulk = [r for r in rows if r["workload"] == "bulk"]
    burst = [r for r in rows if r["workload"] == "burst"]
    blocks = bulk_blocks(bulk)
    fig, axes = plt.subplots(1, len(blocks) + 1, figsize=(6 * (len(blocks) + 1), 5.2))
    for ax, block in zip(axes, blocks):
        mine_block = [r for r in bulk if r.get("block_size", 4194304) == block]
        for name in dict.fromkeys(r["layout"] for r in mine_block):
            mine = sorted((r for r in mine_block if r["layout"] == name),
                          key=lambda r: r["threads"])
            ax.plot([r["threads"] for r in mine], [r["throughput_gbps"] for r in mine],
                    marker="o", linestyle="-" if mine[0]["pinned"] else "--", label=name)
        ax.set_xlabel("caller threads")
        ax.set_ylabel("throughput (GB/s, 10^9 B/s)")
        ax.set_title(f"bulk {size_text(block)} WRITE (worker path)\n"
                     f"provider {mine_block[0].get('provider')}; link: "
                     f"{short_link(link_text(mine_block))}", fontsize=9)
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted({r["threads"] for r in mine_block}))
        ax.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    ax = axes[-1]
    names = [r["layout"] for r in burst]
    x = range(len(burst))
    ax.bar([i - 0.2 for i in x], [r.get("fg_p99_us") or 0 for r in burst], width=0.4,
           label="foreground p99 (us)", color="tab:red")
    ax.set_ylabel("foreground p99 (us)")
    ax.set_xticks(list(x))
    ax.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
    ax2 = ax.twinx()
    ax2.bar([i + 0.2 for i in x], [r["bg_gbps"] for r in burst], width=0.4,
            label="background GB/s", color="tab:blue")
    ax2.set_ylabel("background throughput (GB/s)")
    ax.set_title("foreground/background burst\n"
                 f"provider {burst[0].get('provider') if burst else '?'}; link: "
                 f"{short_link(link_text(burst))}", fontsize=9)
    handles = ax.get_legend_handles_labels()[0] + ax2.get_legend_handles_labels()[0]
    ax.legend(handles, ["foreground p99 (us)", "background GB/s"], fontsize=8, loc="upper left")
    if rows:
        fig.suptitle(f"core sweep (tent): provider {rows[0].get('provider')}, "
                     f"allowed CPUs {rows[0].get('allowed_cpus')}, "
                     f"load {min(x['loadavg'] for x in rows)} .. "
                     f"{max(x['loadavg'] for x in rows)}", fontsize=10)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print(a.out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("append")
    for k in ("out", "record", "workload", "layout", "pinned", "rails", "background",
              "threads", "block", "cpus", "load"):
        p.add_argument("--" + k, required=True)
    p.set_defaults(fn=cmd_append)
    p = sub.add_parser("table")
    p.add_argument("--in", dest="inp", required=True)
    p.add_argument("--idle")
    p.add_argument("--out")
    p.set_defaults(fn=cmd_table)
    p = sub.add_parser("plot")
    p.add_argument("--in", dest="inp", required=True)
    p.add_argument("--out", required=True)
    p.set_defaults(fn=cmd_plot)
    a = ap.parse_args()
    a.fn(a)


if __name__ == "__main__":
    main()
