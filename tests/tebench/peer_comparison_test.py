#!/usr/bin/python3
"""Tests of perf/run_peer_comparison.sh and perf/scripts/peer_table.py.

Without arguments (unit suite): the table and targets from small logs shaped
like each tool's output, the MiB/s conversion, and the script's skip and error
paths (--dry-run: nothing is started). With a tebench binary as the argument
(multiprocess suite): a short real run with the peer missing and --skip-ucx,
checking the message, the exit code, and that every tent row names its
provider and link model."""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest

SRC = os.environ.get("TENT_TEST_SRCDIR",
                     os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(SRC, "perf", "run_peer_comparison.sh")
TEBENCH = None  # set from argv for the end-to-end test

TENT_LOG = """# provider: soft  devices: soft0
# link model: soft: soft0 link_gbps=unlimited latency_ns=0
# lcores: 0@any[rail:*,background]
# op: write  duration: 3 s
# units: GB/s = 10^9 bytes/s
BlkSize (B)   Batch   BW (GB/s)     Avg Inst GB/s Avg Lat (us)  Avg Tx (us)   P99 Tx (us)   P999 Tx (us)  Threads
----------------------------------------------------------------------------------
{size:<13} 1       {bw:<13} 2.000000      {lat:<13} {tx:<13} 2.0           {p999:<13} 1
"""
PEER_LOG = ("\x1b[0mBlkSize (B)   Batch   BW (GB/s)     Avg Inst GB/s     Avg Lat (us)  "
            "Avg Tx (us)   P99 Tx (us)   P999 Tx (us)\n" + "-" * 160 + "\n"
            "{size:<14}1       {bw:<14}1.500000          {lat:<14}{tx:<14}2.0           4.0\n")
UCX_LAT = "Final:                100000      0.100     0.114     0.120      0.00   0.00  1 1\n"
UCX_BW = ("Final:                  3000  80.000    85.000   87.000     45508.00    "
          "44000.00   11  11\n")


def load_table():
    spec = importlib.util.spec_from_file_location(
        "peer_table", os.path.join(SRC, "perf", "scripts", "peer_table.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class TableTest(unittest.TestCase):
    def setUp(self):
        self.table = load_table()
        self.dir = tempfile.mkdtemp()
        self.manifest = []

    def log(self, key, kind, size, text):
        path = os.path.join(self.dir, f"{key}-{size}.log")
        with open(path, "w") as f:
            f.write(text)
        self.manifest.append(f"{key}\t{kind}\t{size}\t{path}\tcmd {key} {size}")

    def render(self):
        path = os.path.join(self.dir, "manifest.tsv")
        with open(path, "w") as f:
            f.write("\n".join(self.manifest) + "\n")
        runs = self.table.read_manifest(path)
        return self.table.render(runs, [("start", "0.10 0.20 0.30 1/100 7")], {"date": "d"}), runs

    def tent(self, key, size, bw, lat, tx, p999):
        self.log(key, "tent", size, TENT_LOG.format(size=size, bw=bw, lat=lat, tx=tx, p999=p999))

    def test_rows_units_and_targets(self):
        self.tent("tent-direct", 4096, 2.5, 0.9, 0.25, 3.0)
        self.tent("tent-direct-us", 4096, 2.5, 0.9, 0.2, 1.0)
        self.tent("tent-worker", 4194304, 44.0, 95.0, 94.0, 200.0)
        self.log("peer", "peer", 4096, PEER_LOG.format(size=4096, bw=2.7, lat=1.5, tx=0.6))
        self.log("ucx", "ucx-lat", 4096, UCX_LAT)
        self.log("ucx", "ucx-bw", 4194304, UCX_BW)
        text, runs = self.render()
        self.assertIn("units: GB/s = 10^9 bytes/s", text)
        self.assertIn("| tent direct path | `--tent_intent_type=foreground_get` | "
                      "soft: soft0 link_gbps=unlimited latency_ns=0 | 2.50 | 0.2 | 2.0 | 3.0 "
                      "| 0.9 | - |", text)
        self.assertIn("| Mooncake TENT tebench | `--xport_type=shm` | its own shm transport "
                      "| 2.70 | 0.6 |", text)
        # 45508 MiB/s as printed is 47.7 GB/s.
        self.assertIn("| 47.7 (printed 45,508 \"MB/s\" = MiB/s) |", text)
        self.assertIn("0.114", text)
        self.assertIn("(both timers whole us): 0.200 vs 0.600 us: 0.33x -> met", text)
        self.assertIn("(tent's ns timer): 0.250 vs 0.600 us: 0.42x -> met", text)
        self.assertIn("Avg Lat <= 0.5x Mooncake shm: 0.900 vs 1.500 us: 0.60x -> NOT met", text)
        self.assertIn("P999 < 10 us: 3.0 us -> met", text)
        self.assertIn("0.9x ucp_put_bw: 44.000 vs 47.719 GB/s: 0.92x -> met", text)
        ucx = [r for r in runs if r["kind"] == "ucx-bw"][0]["result"]
        self.assertAlmostEqual(ucx["bw_avg_gbps"], 45508 * 2 ** 20 / 1e9)

    def test_bandwidth_rounds_give_medians_and_the_median_ratio(self):
        # Three rounds whose single ratios straddle 0.9x: the median ratio decides, and
        # each side's column is its median (not round 1's value).
        for i, (tent_bw, ucx_mib) in enumerate([(4.0, 5000.0), (6.0, 6000.0), (5.0, 5200.0)], 1):
            suffix = "" if i == 1 else f"-r{i}"
            self.tent("tent-worker" + suffix, 4194304, tent_bw, 900.0, 899.0, 2000.0)
            self.log("ucx" + suffix, "ucx-bw", 4194304,
                     f"Final: 3000 800.0 810.0 820.0 {ucx_mib} {ucx_mib} 1 1\n")
        text, _ = self.render()
        gb = lambda mib: mib * 2 ** 20 / 1e9  # noqa: E731
        ratios = sorted([4.0 / gb(5000), 6.0 / gb(6000), 5.0 / gb(5200)])
        self.assertIn("| tent worker path |", text)
        self.assertIn("| 5.0 (median of 3 rounds) |", text)
        self.assertIn(f"| {gb(5200):.1f} (median of 3 rounds;", text)
        self.assertIn(f"| 2 | 6.00 | {gb(6000):.2f} | {6.0 / gb(6000):.2f} |", text)
        self.assertIn(f"0.9x ucp_put_bw: median of 3 rounds' ratios {ratios[1]:.2f}x", text)
        self.assertIn("-> met" if ratios[1] >= 0.9 else "-> NOT met",
                      text.split("0.9x ucp_put_bw")[1].splitlines()[0])

    def test_a_round_without_its_ucx_run_is_left_out_of_the_ratio(self):
        self.tent("tent-worker", 4194304, 5.0, 900.0, 899.0, 2000.0)
        self.log("ucx", "ucx-bw", 4194304, "Final: 3000 800.0 810.0 820.0 5000 5000 1 1\n")
        self.tent("tent-worker-r2", 4194304, 1.0, 900.0, 899.0, 2000.0)
        self.manifest.append("ucx-r2\tucx-bw\t4194304\t-\t--skip-ucx")
        text, _ = self.render()
        self.assertIn(f"median of 1 rounds' ratios {5.0 / (5000 * 2 ** 20 / 1e9):.2f}x", text)

    def test_worker_tail_against_mooncake_names_the_handoff_floor(self):
        self.tent("tent-worker", 4096, 2.5, 0.9, 0.6, 5.9)
        self.log("peer", "peer", 4096, PEER_LOG.format(size=4096, bw=2.7, lat=1.5, tx=0.4))
        text, _ = self.render()
        self.assertIn("4 KiB worker P999 <= Mooncake shm P999: 5.9 vs 4.0 us -> NOT met", text)
        self.log("floor-handoff", "floor", 4096,
                 "timer floor: window_ns=0 gap_ns=150 duration_s=3 threads=2 n=1900401 "
                 "p50_us=0.26 p99_us=0.93 p999_us=2.54 max_us=812.0\n")
        text, _ = self.render()
        self.assertIn("4 KiB worker P999 <= Mooncake shm P999: 5.9 vs 4.0 us (the machine's "
                      "floor for a bare hand-off: P999 2.5 us) -> NOT met", text)
        self.manifest.clear()
        self.tent("tent-worker", 4096, 2.5, 0.9, 0.6, 4.0)
        self.log("peer", "peer", 4096, PEER_LOG.format(size=4096, bw=2.7, lat=1.5, tx=0.4))
        text, _ = self.render()
        self.assertIn("4 KiB worker P999 <= Mooncake shm P999: 4.0 vs 4.0 us -> met", text)

    def test_skipped_peer_leaves_its_targets_unevaluated(self):
        self.tent("tent-direct", 4096, 2.5, 0.9, 0.25, 30.0)
        self.manifest.append("peer\tpeer\t4096\t-\tnot found at /x")
        text, _ = self.render()
        self.assertIn("| Mooncake TENT tebench | `--xport_type=shm` | skipped: not found at /x |",
                      text)
        self.assertIn("Avg Lat <= 0.5x Mooncake shm: not evaluated: a run is missing -> n/a", text)
        self.assertIn("P999 < 10 us: 30.0 us -> NOT met", text)

    def test_machine_floor_row_and_p999_context(self):
        self.tent("tent-direct", 4096, 2.5, 1.0, 0.8, 10.4)
        self.log("floor", "floor", 4096,
                 "timer floor: window_ns=800 gap_ns=200 duration_s=3 n=2358658 p50_us=0.91 "
                 "p99_us=0.94 p999_us=10.25 max_us=101.1\n")
        text, _ = self.render()
        self.assertIn("| machine floor (no transfer) |", text)
        self.assertIn("| this machine, no engine | - | 0.8 (window) | 0.9 | 10.2 | - | - |", text)
        self.assertIn("P999 < 10 us: 10.4 us (the machine's floor for a 0.8 us window: "
                      "P999 10.2 us) -> NOT met", text)

    def test_handoff_floor_row_shows_the_round_trip(self):
        self.log("floor-handoff", "floor", 4096,
                 "timer floor: window_ns=0 gap_ns=150 duration_s=3 threads=2 n=1900401 "
                 "p50_us=0.26 p99_us=0.93 p999_us=3.20 max_us=812.0\n")
        self.manifest.append("floor\tfloor\t4096\t-\tno direct 4 KiB row")
        text, _ = self.render()
        self.assertIn("| machine floor, hand-off (no transfer) |", text)
        self.assertIn("| this machine, no engine | - | 0.26 (p50 round trip) | 0.9 | 3.2 | - | - |",
                      text)
        self.assertIn("4 KiB worker P999 <= Mooncake shm P999: not evaluated: a run is missing "
                      "-> n/a", text)
        self.assertIn("| machine floor (no transfer) | `perf/timer_floor`: a busy wait of tent "
                      "direct's Avg Tx, timed the same way | skipped: no direct 4 KiB row |", text)


def run_script(*args, env=None):
    full_env = dict(os.environ)
    full_env.pop("TENT_PEER_TEBENCH", None)
    full_env.update(env or {})
    return subprocess.run(["bash", SCRIPT, *args], capture_output=True, text=True, env=full_env,
                          timeout=600)


class ScriptTest(unittest.TestCase):
    def test_missing_peer_is_skipped_with_how_to_build(self):
        missing = os.path.join(tempfile.mkdtemp(), "no-tebench")
        r = run_script("--tebench", "/bin/true", "--dry-run", "--skip-ucx",
                       env={"TENT_PEER_TEBENCH": missing})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"Mooncake TENT's tebench not found at {missing}", r.stderr)
        self.assertIn("docs/perf/peer-comparison.md", r.stderr)
        self.assertIn("--peer PATH or set TENT_PEER_TEBENCH", r.stderr)
        self.assertIn("peer:  skipped", r.stdout)

    def test_present_peer_needs_whole_seconds(self):
        r = run_script("--tebench", "/bin/true", "--peer", "/bin/true", "--duration", "0.5",
                       "--dry-run")
        self.assertEqual(r.returncode, 1)
        self.assertIn("whole seconds", r.stderr)

    def test_missing_tent_tebench_is_an_error(self):
        r = run_script("--tebench", "/nonexistent/tebench", "--dry-run")
        self.assertEqual(r.returncode, 1)
        self.assertIn("no tent tebench at /nonexistent/tebench", r.stderr)

    def test_bandwidth_rounds_must_be_a_positive_whole_number(self):
        for bad in ("0", "two", "1.5"):
            r = run_script("--tebench", "/bin/true", "--bw-rounds", bad, "--dry-run")
            self.assertEqual(r.returncode, 1, bad)
            self.assertIn(f"--bw-rounds {bad}: a whole number of rounds", r.stderr)

    def test_unknown_argument(self):
        r = run_script("--bogus")
        self.assertEqual(r.returncode, 1)
        self.assertIn("unknown argument '--bogus'", r.stderr)


class EndToEndTest(unittest.TestCase):
    def test_short_run_without_peer(self):
        if not TEBENCH:
            self.skipTest("needs the tebench binary as the argument")
        out = tempfile.mkdtemp()
        r = run_script("--tebench", TEBENCH, "--peer", os.path.join(out, "none"), "--skip-ucx",
                       "--duration", "0.2", "--warmup", "0.1", "--bw-rounds", "2", "--out", out)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("its rows are skipped", r.stderr)
        with open(os.path.join(out, "peer-comparison.json")) as f:
            record = json.load(f)
        tent = [x for x in record["runs"] if x["kind"] == "tent"]
        # direct, direct whole-us, worker at 4 KiB; at 4 MiB direct, the worker path with
        # cached copies, and two worker rounds
        self.assertEqual(len(tent), 7)
        self.assertEqual(sorted(x["key"] for x in tent if x["block_size"] == 4194304),
                         ["tent-direct", "tent-worker", "tent-worker-cached", "tent-worker-r2"])
        cached = [x for x in tent if x["key"] == "tent-worker-cached"][0]["result"]
        streamed = [x for x in tent if x["key"] == "tent-worker"
                    and x["block_size"] == 4194304][0]["result"]
        self.assertNotIn("non-temporal", cached["link_model"])
        self.assertIn("non-temporal from 65536 B", streamed["link_model"])
        self.assertEqual([r["round"] for r in record["bw_rounds"]], [1, 2])
        for run in tent:
            self.assertEqual(run["result"]["provider"], "soft", run["log"])
            self.assertIn("link_gbps=unlimited", run["result"]["link_model"])
            self.assertGreater(run["result"]["row"]["bw_gbps"], 0)
        self.assertIn("skipped", [x for x in record["runs"] if x["kind"] == "peer"][0])
        # The machine floor: a window as long as the direct run's Avg Tx, the rest of its
        # loop (Avg Lat - Avg Tx) outside it.
        floor = [x for x in record["runs"] if x["kind"] == "floor"][0]
        if "skipped" not in floor:
            direct = [x for x in tent if x["key"] == "tent-direct" and x["block_size"] == 4096]
            row = direct[0]["result"]["row"]
            self.assertEqual(floor["result"]["window_ns"], round(row["avg_tx_us"] * 1000))
            self.assertEqual(floor["result"]["gap_ns"],
                             max(0, round((row["avg_lat_us"] - row["avg_tx_us"]) * 1000)))
        # The hand-off floor: a bare round trip between two threads, the rest of the worker
        # run's loop outside it.
        hand = [x for x in record["runs"] if x["key"] == "floor-handoff"][0]
        if "skipped" not in hand:
            worker = [x for x in tent if x["key"] == "tent-worker" and x["block_size"] == 4096]
            row = worker[0]["result"]["row"]
            self.assertEqual(hand["result"]["threads"], 2)
            self.assertEqual(hand["result"]["window_ns"], 0)
            self.assertEqual(hand["result"]["gap_ns"],
                             max(0, round((row["avg_lat_us"] - row["avg_tx_us"]) * 1000)))
        with open(os.path.join(out, "peer-comparison.md")) as f:
            self.assertIn("| tent worker path |", f.read())


if __name__ == "__main__":
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        TEBENCH = sys.argv.pop(1)
    unittest.main()
