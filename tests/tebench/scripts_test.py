#!/usr/bin/python3
"""Tests of perf/scripts/compare.py and plot_cdf.py on small records shaped
like tebench's JSONL and latency dump (field names as bench_report.cc writes
them; tests/tebench/report_test.cc pins those on the C++ side)."""
import importlib.util
import io
import json
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

SRC = os.environ.get("TENT_TEST_SRCDIR",
                     os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPTS = os.path.join(SRC, "perf", "scripts")


def load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(SCRIPTS, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def record(fg_p99, fg_slo, bg_gbps, intent="unspec", deadline=0):
    return {
        "schema_version": 1, "aggregate_throughput_gbps": bg_gbps + 0.01,
        "weighted_goodput_gbps": 4 * 0.01 * fg_slo + bg_gbps, "jain_fairness": 0.5,
        "link_capacity_gbps": 5.0, "total_utilization": (bg_gbps + 0.01) / 5.0,
        "provider": "soft", "link_model": "2 x 20 Gb/s",
        "direct": {"attempted": 10, "succeeded": 9, "fallback_lane_busy": 1,
                   "fallback_mode_off": 0},
        "classes": [
            {"name": "foreground", "threads": 1, "operations": 1000,
             "transferred_bytes": 4096000, "throughput_gbps": 0.01, "p99_us": fg_p99,
             "slo_us": 300, "slo_attainment": fg_slo, "goodput_gbps": 0.01 * fg_slo,
             "weight": 4, "weighted_goodput_gbps": 0.04 * fg_slo, "avg_us": fg_p99 / 3,
             "p50_us": fg_p99 / 4, "p999_us": fg_p99 * 2, "intent_type": intent,
             "deadline_us": deadline, "avg_inst_gbps": 1.5},
            {"name": "migration", "threads": 2, "operations": 100,
             "transferred_bytes": 10 ** 9, "throughput_gbps": bg_gbps, "p99_us": 9000.0,
             "slo_us": 0, "slo_attainment": 1.0, "goodput_gbps": bg_gbps, "weight": 1,
             "weighted_goodput_gbps": bg_gbps, "avg_inst_gbps": 2.0},
        ],
    }


class CompareTest(unittest.TestCase):
    def setUp(self):
        self.compare = load("compare")
        self.dir = tempfile.mkdtemp()

    def write(self, name, *records):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            for r in records:
                f.write(json.dumps(r) + "\n")
        return path

    def run_compare(self, *args):
        out = io.StringIO()
        with redirect_stdout(out):
            self.assertEqual(self.compare.main(list(args)), 0)
        return out.getvalue()

    def test_table_rows_and_targets(self):
        base = self.write("base.jsonl", record(5000.0, 0.2, 4.0))
        direct = self.write("direct.jsonl", record(900.0, 0.5, 0.1),  # an older record...
                            record(40.0, 0.995, 3.8, "foreground_get"))  # ...the last wins
        text = self.run_compare(f"baseline={base}", f"direct={direct}")
        self.assertIn("| Metric | baseline | direct | Expected direction |", text)
        self.assertIn("| foreground `p99_us` | 5000.0 | 40.0 | lower |", text)
        self.assertIn("| foreground `slo_attainment` | 0.2000 | 0.9950 | higher |", text)
        self.assertIn("| background throughput (GB/s) | 4.000 | 3.800 |", text)
        self.assertIn("| direct path attempted / succeeded | 10 / 9 | 10 / 9 |", text)
        self.assertIn("direct: foreground p99 <= 1/10 of the baseline's: 0.008 x baseline -> met",
                      text)
        self.assertIn("direct: foreground SLO attainment >= 99%: 99.50% -> met", text)
        self.assertIn("direct: background throughput >= 90% of the baseline's: 95.0% of "
                      "baseline -> met", text)

    def test_unmet_target_is_reported(self):
        base = self.write("b.jsonl", record(100.0, 0.9, 4.0))
        slow = self.write("s.jsonl", record(50.0, 0.9, 1.0))
        text = self.run_compare(f"baseline={base}", f"x={slow}")
        self.assertIn("x: foreground p99 <= 1/10 of the baseline's: 0.500 x baseline -> NOT met",
                      text)
        self.assertIn("x: background throughput >= 90% of the baseline's: 25.0% of baseline "
                      "-> NOT met", text)

    def test_mooncake_record_without_tent_fields(self):
        r = record(100.0, 0.9, 1.0)
        for c in r["classes"]:
            for key in ("avg_us", "p50_us", "p999_us", "avg_inst_gbps", "intent_type"):
                c.pop(key, None)
        del r["direct"], r["provider"], r["link_model"]
        text = self.run_compare(self.write("mooncake.jsonl", r))
        self.assertIn("| foreground `p999_us` | n/a |", text)
        self.assertIn("| foreground `p99_us` | 100.0 |", text)

    def test_errors_name_the_problem(self):
        bad = self.write("bad.jsonl", {"schema_version": 2, "classes": []})
        with self.assertRaises(SystemExit) as e:
            self.compare.main([bad])
        self.assertIn("schema_version", str(e.exception))
        nofg = self.write("nofg.jsonl", record(1.0, 1.0, 1.0))
        with self.assertRaises(SystemExit) as e:
            self.compare.main(["--fg", "fg", nofg])
        self.assertIn("no class named 'fg'", str(e.exception))


class MessageRateTest(unittest.TestCase):
    def test_rates_per_lcore_and_per_busy_second(self):
        mr = load("message_rate")
        rec = {"provider": "soft", "link_model": "soft0 payload=not-copied", "paths": "p",
               "duration_s": 5.0,
               "lcores": [{"lcore": 0, "cpu": 1, "pollers": "rail:soft0,background",
                           "busy_cycles": 250, "idle_cycles": 750},
                          {"lcore": 1, "cpu": 0, "pollers": "rail:soft1",
                           "busy_cycles": 1, "idle_cycles": 1}],
               "worker": {"slices_completed": 4_000_000, "slice_errors": 0},
               "classes": [{"batch_size": 32, "threads": 1, "elapsed_s": 4.0,
                            "failed_transfers": 0}]}
        r = mr.row(rec)
        self.assertEqual(r["rate"], 1_000_000)       # slices over the measured window
        self.assertEqual(r["per_lcore"], 1_000_000)  # one lcore has a background poller
        self.assertAlmostEqual(r["busy"], 0.25)
        self.assertAlmostEqual(r["per_busy"], 4_000_000)
        path = os.path.join(tempfile.mkdtemp(), "r.jsonl")
        with open(path, "w") as f:
            f.write(json.dumps(rec) + "\n")
        buf = io.StringIO()
        with redirect_stdout(buf):
            mr.main([path])
        self.assertIn("payload=not-copied", buf.getvalue())  # the label is in every table
        self.assertIn("| 32 | 1 | 4000000 | 1,000,000 | 1,000,000 | 25.0 % | 4,000,000 | 0 |",
                      buf.getvalue())


class PlotTest(unittest.TestCase):
    def test_writes_png(self):
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            self.skipTest("matplotlib not installed (python3-matplotlib)")
        plot = load("plot_cdf")
        d = tempfile.mkdtemp()
        paths = []
        for label, scale in (("baseline", 50.0), ("direct", 5.0)):
            dump = {"run_label": label, "provider": "soft", "link_model": "m", "classes": [
                {"name": "foreground", "slo_us": 300, "count": 1000,
                 "cdf": [[scale * (1 + i / 100.0), i / 100.0] for i in range(101)]}]}
            path = os.path.join(d, label + ".json")
            with open(path, "w") as f:
                json.dump(dump, f)
            paths.append(f"{label}={path}")
        out = os.path.join(d, "cdf.png")
        with redirect_stdout(io.StringIO()):
            self.assertEqual(plot.main(["--out", out] + paths), 0)
        with open(out, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")


if __name__ == "__main__":
    unittest.main()
