#!/usr/bin/python3
"""Prints the RFC's metrics table (markdown) from tebench QoS JSONL records.

usage: compare.py [--fg CLASS] [--out FILE] LABEL=FILE.jsonl [LABEL=FILE.jsonl ...]

Each FILE is a --qos_output_jsonl file of one mode (worker baseline, direct
foreground, deadline variant, ...); its last record is used. The first file
is the baseline the targets are checked against. The foreground class is
CLASS (default "foreground"); every other class counts as background.
Records written by Mooncake's tebench (schema_version 1) work too: the
fields it lacks show as "n/a".
"""
import argparse
import json
import sys


def load_last_record(path):
    last = None
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                last = json.loads(line)
            except json.JSONDecodeError as e:
                raise SystemExit(f"{path}:{number}: not JSON: {e}")
    if last is None:
        raise SystemExit(f"{path}: no records")
    if last.get("schema_version") != 1:
        raise SystemExit(f"{path}: schema_version {last.get('schema_version')!r}, expected 1")
    return last


def split_classes(record, fg_name):
    fg, bg = None, []
    for c in record.get("classes", []):
        if c.get("name") == fg_name:
            fg = c
        else:
            bg.append(c)
    if fg is None:
        names = [c.get("name") for c in record.get("classes", [])]
        raise SystemExit(f"no class named {fg_name!r} (classes: {names}); use --fg")
    return fg, bg


def metrics(record, fg_name):
    """The RFC's metrics of one run, as numbers (None when absent)."""
    fg, bg = split_classes(record, fg_name)
    bg_gbps = sum(c.get("throughput_gbps", 0.0) for c in bg)
    bg_inst = [c.get("avg_inst_gbps") for c in bg if c.get("avg_inst_gbps") is not None]
    direct = record.get("direct") or {}
    fallbacks = sum(v for k, v in direct.items() if k.startswith("fallback_"))
    return {
        "fg_slo": fg.get("slo_attainment"),
        "fg_avg": fg.get("avg_us"),
        "fg_p50": fg.get("p50_us"),
        "fg_p99": fg.get("p99_us"),
        "fg_p999": fg.get("p999_us"),
        "fg_goodput": fg.get("goodput_gbps"),
        "weighted_goodput": record.get("weighted_goodput_gbps"),
        "aggregate": record.get("aggregate_throughput_gbps"),
        "bg_gbps": bg_gbps,
        "fg_inst": fg.get("avg_inst_gbps"),
        "bg_inst": sum(bg_inst) / len(bg_inst) if bg_inst else None,
        "fg_ops": fg.get("operations"),
        "fg_intent": fg.get("intent_type"),
        "fg_deadline": fg.get("deadline_us"),
        "direct_attempted": direct.get("attempted"),
        "direct_succeeded": direct.get("succeeded"),
        "direct_fallbacks": fallbacks if direct else None,
        "utilization": record.get("total_utilization"),
    }


ROWS = [
    # (label, key, format, expected direction)
    ("foreground `slo_attainment`", "fg_slo", "{:.4f}", "higher"),
    ("foreground average transfer latency (us)", "fg_avg", "{:.1f}", "lower"),
    ("foreground `p50_us`", "fg_p50", "{:.1f}", "lower"),
    ("foreground `p99_us`", "fg_p99", "{:.1f}", "lower"),
    ("foreground `p999_us`", "fg_p999", "{:.1f}", "lower"),
    ("foreground `goodput_gbps`", "fg_goodput", "{:.4f}", "higher"),
    ("`weighted_goodput_gbps`", "weighted_goodput", "{:.4f}", "higher"),
    ("aggregate throughput (GB/s)", "aggregate", "{:.3f}", "similar or workload-dependent"),
    ("background throughput (GB/s)", "bg_gbps", "{:.3f}", "may decrease during foreground bursts"),
    ("`Avg Inst GB/s` foreground", "fg_inst", "{:.3f}", "diagnostic"),
    ("`Avg Inst GB/s` background", "bg_inst", "{:.3f}", "diagnostic"),
    ("link utilization", "utilization", "{:.3f}", "diagnostic"),
    ("foreground transfers", "fg_ops", "{}", "diagnostic"),
    ("direct path attempted / succeeded", None, None, "diagnostic"),
    ("direct path fallbacks", "direct_fallbacks", "{}", "diagnostic"),
]


def cell(m, key, fmt):
    if key is None:
        a, s = m.get("direct_attempted"), m.get("direct_succeeded")
        return "n/a" if a is None else f"{a} / {s}"
    value = m.get(key)
    return "n/a" if value is None else fmt.format(value)


def table(labels, runs):
    header = "| Metric | " + " | ".join(labels) + " | Expected direction |"
    lines = [header, "|" + " --- |" * (len(labels) + 2)]
    for label, key, fmt, direction in ROWS:
        cells = [cell(m, key, fmt) for m in runs]
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {direction} |")
    return "\n".join(lines)


def ratio(a, b):
    return None if a is None or b in (None, 0) else a / b


def targets(labels, runs):
    """Issue 6's evaluation targets, each run after the first against the first."""
    base = runs[0]
    lines = []
    for label, m in zip(labels[1:], runs[1:]):
        if label == "unloaded":  # no background: the reference of class_targets()
            continue
        p99 = ratio(m["fg_p99"], base["fg_p99"])
        bg = ratio(m["bg_gbps"], base["bg_gbps"])
        checks = [
            ("foreground p99 <= 1/10 of the baseline's", p99 is not None and p99 <= 0.1,
             "n/a" if p99 is None else f"{p99:.3f} x baseline"),
            ("foreground SLO attainment >= 99%", (m["fg_slo"] or 0) >= 0.99,
             "n/a" if m["fg_slo"] is None else f"{100 * m['fg_slo']:.2f}%"),
            ("background throughput >= 90% of the baseline's", bg is not None and bg >= 0.9,
             "n/a" if bg is None else f"{100 * bg:.1f}% of baseline"),
        ]
        for what, ok, value in checks:
            lines.append(f"- {label}: {what}: {value} -> {'met' if ok else 'NOT met'}")
    return "\n".join(lines)


def class_targets(labels, runs):
    """Issue 24's goals when an `unloaded` run (foreground only) is given: each loaded
    direct run's foreground p99 within 1.5x of the unloaded one, background at least 90%
    of the first run's."""
    if "unloaded" not in labels:
        return ""
    unloaded = runs[labels.index("unloaded")]
    base = runs[0]
    lines = []
    for label, m in zip(labels, runs):
        if label in ("unloaded", labels[0]) or not label.startswith("direct"):
            continue
        p99 = ratio(m["fg_p99"], unloaded["fg_p99"])
        bg = ratio(m["bg_gbps"], base["bg_gbps"])
        lines.append(f"- {label}: foreground p99 <= 1.5x unloaded: "
                     f"{'n/a' if p99 is None else f'{p99:.2f} x unloaded'} -> "
                     f"{'met' if p99 is not None and p99 <= 1.5 else 'NOT met'}")
        lines.append(f"- {label}: background >= 90% of {labels[0]}'s: "
                     f"{'n/a' if bg is None else f'{100 * bg:.1f}%'} -> "
                     f"{'met' if bg is not None and bg >= 0.9 else 'NOT met'}")
    return "\n".join(lines)


def run_notes(labels, records, fg_name):
    lines = []
    for label, rec in zip(labels, records):
        fg, _ = split_classes(rec, fg_name)
        what = f"intent `{fg.get('intent_type', 'n/a')}`, deadline_us {fg.get('deadline_us', 'n/a')}"
        lines.append(f"- {label}: foreground {what}; paths `{rec.get('paths', 'n/a')}`; "
                     f"provider `{rec.get('provider', 'n/a')}`, link `{rec.get('link_model', 'n/a')}`")
    return "\n".join(lines)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", metavar="LABEL=FILE")
    parser.add_argument("--fg", default="foreground", help="name of the foreground class")
    parser.add_argument("--out", help="also write the markdown to this file")
    args = parser.parse_args(argv)
    labels, records = [], []
    for spec in args.runs:
        label, sep, path = spec.partition("=")
        if not sep:
            label, path = spec.rsplit("/", 1)[-1].removesuffix(".jsonl"), spec
        labels.append(label)
        records.append(load_last_record(path))
    runs = [metrics(r, args.fg) for r in records]
    text = table(labels, runs)
    if len(runs) > 1:
        text += "\n\nTargets (issue 6), against " + labels[0] + ":\n" + targets(labels, runs)
    goals = class_targets(labels, runs)
    if goals:
        text += "\n\nTraffic-class goals (issue 24), against unloaded:\n" + goals
    text += "\n\nRuns:\n" + run_notes(labels, records, args.fg) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
