#!/usr/bin/env python3
"""Message-rate table from the tebench JSONL records perf/run_message_rate.sh writes.

Slices per second come from the engine's own worker counters (slices completed in
the measured window), per lcore from the lcores that run a background poller, and
per busy lcore-second from the lcores' busy/idle cycle counters: what one fully busy
lcore would carry."""
import json
import sys


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def row(rec):
    cls = rec["classes"][0]
    elapsed = cls.get("elapsed_s") or rec.get("duration_s") or 0
    slices = rec["worker"]["slices_completed"]
    lcores = [l for l in rec.get("lcores", []) if "background" in l.get("pollers", "")]
    busy = sum(l["busy_cycles"] for l in lcores)
    total = busy + sum(l["idle_cycles"] for l in lcores)
    busy_frac = busy / total if total else None
    rate = slices / elapsed if elapsed else 0
    per_lcore = rate / len(lcores) if lcores else None
    per_busy = per_lcore / busy_frac if per_lcore and busy_frac else None
    return {
        "batch": cls.get("batch_size"),
        "threads": cls.get("threads"),
        "slices": slices,
        "rate": rate,
        "per_lcore": per_lcore,
        "busy": busy_frac,
        "per_busy": per_busy,
        "errors": rec["worker"].get("slice_errors", 0) + cls.get("failed_transfers", 0),
    }


def fmt(v, spec):
    return "n/a" if v is None else format(v, spec)


def main(argv):
    if len(argv) != 1:
        sys.exit("usage: message_rate.py RECORDS.jsonl")
    recs = load(argv[0])
    if not recs:
        sys.exit(f"message_rate.py: no records in {argv[0]}")
    first = recs[0]
    print(f"provider `{first.get('provider')}`; link `{first.get('link_model')}`; "
          f"paths `{first.get('paths')}`; lcores "
          + ", ".join(f"{l['lcore']}@cpu{l['cpu']}[{l['pollers']}]" for l in first.get("lcores", [])))
    print()
    print("| batch | caller threads | slices completed | slices/s | slices/s per lcore "
          "| lcore busy | slices/s per busy lcore-second | errors |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for rec in recs:
        r = row(rec)
        print(f"| {r['batch']} | {r['threads']} | {r['slices']} | {fmt(r['rate'], ',.0f')} "
              f"| {fmt(r['per_lcore'], ',.0f')} | {fmt(r['busy'] and 100 * r['busy'], '.1f')} % "
              f"| {fmt(r['per_busy'], ',.0f')} | {r['errors']} |")


if __name__ == "__main__":
    main(sys.argv[1:])
