#!/usr/bin/python3
"""Plots the foreground class's latency CDF of several tebench runs into a PNG.

usage: plot_cdf.py --out FILE.png [--fg CLASS] [--slo US] LABEL=DUMP.json [...]

Each DUMP is a --qos_latency_dump file of one mode. Left panel: the CDF on a
log latency axis; right panel: the tail as 1 - CDF on log axes, where p99 and
p999 differences show. Run it with /usr/bin/python3 (Debian's matplotlib).
"""
import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")  # no display on the benchmark machines
import matplotlib.pyplot as plt  # noqa: E402


def load_class(path, fg_name):
    with open(path) as f:
        dump = json.load(f)
    for c in dump.get("classes", []):
        if c.get("name") == fg_name:
            return dump, c
    names = [c.get("name") for c in dump.get("classes", [])]
    raise SystemExit(f"{path}: no class named {fg_name!r} (classes: {names})")


def plot(runs, fg_name, slo_us, out, title):
    fig, (ax_cdf, ax_tail) = plt.subplots(1, 2, figsize=(12, 4.8))
    for label, dump, cls in runs:
        points = cls["cdf"]
        xs = [max(p[0], 1e-3) for p in points]
        ys = [p[1] for p in points]
        legend = f"{label} (n={cls['count']})"
        ax_cdf.plot(xs, ys, label=legend)
        # Below 1/count the points interpolate between the slowest samples: not data.
        floor = 1.0 / max(cls["count"], 1)
        tail = [(x, 1 - y) for x, y in zip(xs, ys) if 1 - y >= floor * 0.999]
        if tail:
            ax_tail.plot([t[0] for t in tail], [t[1] for t in tail], label=legend)
    slo = slo_us or (runs[0][2].get("slo_us") if runs else 0)
    for ax in (ax_cdf, ax_tail):
        ax.set_xscale("log")
        ax.set_xlabel("transfer latency (us)")
        ax.grid(True, which="both", alpha=0.3)
        if slo:
            ax.axvline(slo, color="red", linestyle="--", linewidth=1, label=f"SLO {slo} us")
    ax_cdf.set_ylabel("fraction of transfers")
    ax_cdf.set_ylim(0, 1.01)
    ax_cdf.set_title(f"{fg_name}: latency CDF")
    ax_tail.set_yscale("log")
    ax_tail.set_ylabel("1 - CDF (fraction slower)")
    ax_tail.set_title(f"{fg_name}: tail")
    for y, name in ((1e-2, "p99"), (1e-3, "p999")):
        ax_tail.axhline(y, color="gray", linestyle=":", linewidth=1)
        ax_tail.text(ax_tail.get_xlim()[0], y, f" {name}", va="bottom", fontsize=8, color="gray")
    ax_cdf.legend(loc="lower right", fontsize=8)
    ax_tail.legend(loc="lower left", fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", metavar="LABEL=DUMP")
    parser.add_argument("--out", required=True, help="PNG to write")
    parser.add_argument("--fg", default="foreground", help="name of the foreground class")
    parser.add_argument("--slo", type=float, default=0, help="SLO line (us); default: the dump's")
    parser.add_argument("--title", default="", help="figure title")
    args = parser.parse_args(argv)
    runs = []
    for spec in args.runs:
        label, sep, path = spec.partition("=")
        if not sep:
            label, path = spec, spec
        dump, cls = load_class(path, args.fg)
        runs.append((label, dump, cls))
    title = args.title
    if not title and runs:
        d = runs[0][1]
        title = f"provider {d.get('provider', '?')}, link: {d.get('link_model', '?')}"
    plot(runs, args.fg, args.slo, args.out, title)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
