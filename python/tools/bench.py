"""Per-call cost of the Python binding (not a test; docs/python.md has the figures).

    PYTHONPATH=build/python /usr/bin/python3 python/tools/bench.py [--iters N] [--config FILE]

Starts a peer process (python/tests/peer.py) with the same config and measures:
- transfer_sync_write of 4 KiB through tent.mooncake, one call at a time, on the
  worker path (untagged) and the direct path (intent="foreground_get");
- the same through the native transfer_sync;
- submitting a 10,000-descriptor batch: transfer_async from numpy columns, from
  lists of int, and allocate_batch + submit of 10,000 tent.Request objects.
The config defaults to the engine's defaults (what tebench uses without --config).
"""

import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import time

import numpy as np

import tent
import tent.mooncake

HERE = pathlib.Path(__file__).resolve().parent
ROWS, BLOCK = 10_000, 512


def percentiles(ns):
    us = sorted(n / 1e3 for n in ns)
    pick = lambda q: us[min(len(us) - 1, int(q * len(us)))]
    return f"mean {statistics.fmean(us):7.2f}  p50 {pick(0.5):7.2f}  p99 {pick(0.99):7.2f} us"


def per_call(fn, iters, warmup=1000):
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(iters):
        t0 = time.perf_counter_ns()
        fn()
        out.append(time.perf_counter_ns() - t0)
    return out


def check(rc):
    if rc != 0:
        raise SystemExit(f"a transfer failed ({rc})")


def bench_calls(cfg, peer, iters):
    mc = tent.mooncake.TransferEngine(cfg)
    check(mc.initialize("127.0.0.1", "P2PHANDSHAKE", "rdma", ""))
    src, dst = mc.allocate_managed_buffer(4096), peer["alloc"]
    seg = peer["segment"]
    fg = {"intent": "foreground_get"}
    print("4 KiB WRITE, one call at a time, to a peer process:")
    for name, fn in [
        ("mooncake transfer_sync_write, worker path", lambda: check(
            mc.transfer_sync_write(seg, src, dst, 4096))),
        ("mooncake transfer_sync_write, direct path", lambda: check(
            mc.transfer_sync_write(seg, src, dst, 4096, **fg))),
        ("native transfer_sync, worker path", lambda: mc.get_engine().transfer_sync(
            seg, tent.OpCode.WRITE, [src], [dst], [4096])),
        ("native transfer_sync, direct path", lambda: mc.get_engine().transfer_sync(
            seg, tent.OpCode.WRITE, [src], [dst], [4096], intent=tent.Intent.FOREGROUND_GET)),
    ]:
        print(f"  {name:<44} {percentiles(per_call(fn, iters))}")
    d = mc.get_engine().stats()["direct"]
    print(f"  (direct path: {d['succeeded']} of {d['attempted']} attempts succeeded)")
    return mc


def bench_submit(engine, peer, rounds=20):
    src = np.zeros(ROWS * BLOCK, np.uint8)
    engine.register_memory(src)
    seg = engine.open_segment(peer["segment"])
    local = np.uint64(src.ctypes.data) + np.arange(ROWS, dtype=np.uint64) * np.uint64(BLOCK)
    remote = np.uint64(peer["numpy"]) + np.arange(ROWS, dtype=np.uint64) * np.uint64(BLOCK)
    lengths = np.full(ROWS, BLOCK, np.uint64)
    W = tent.OpCode.WRITE

    def requests():
        return [tent.Request(W, int(a), seg, int(r), BLOCK) for a, r in zip(local, remote)]

    forms = [
        ("transfer_async, numpy uint64 columns", lambda: engine.transfer_async(
            seg, W, local, remote, lengths)),
        ("transfer_async, lists of int", lambda: engine.transfer_async(
            seg, W, local.tolist(), remote.tolist(), lengths.tolist())),
        ("allocate_batch + submit of tent.Request objects", None),
    ]
    print(f"submitting a batch of {ROWS:,} x {BLOCK} B WRITE descriptors ({rounds} rounds):")
    for name, fn in forms:
        times = []
        for _ in range(rounds):
            t0 = time.perf_counter_ns()
            if fn is None:
                batch = engine.allocate_batch(ROWS)
                engine.submit(batch, requests())
            else:
                batch = fn()
            times.append(time.perf_counter_ns() - t0)
            state, _ = engine.wait_batch(batch, 60)
            engine.free_batch(batch)
            if state != tent.TransferState.COMPLETED:
                raise SystemExit(f"batch ended {state}")
        ms = sorted(t / 1e6 for t in times)
        print(f"  {name:<48} median {ms[len(ms) // 2]:7.2f} ms  min {ms[0]:7.2f} ms")
    engine.unregister_memory(src)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=20000)
    ap.add_argument("--config", default="", help="tent YAML config for both processes")
    a = ap.parse_args()
    cfg = {}
    if a.config:
        import yaml  # python3-yaml

        cfg = yaml.safe_load(open(a.config)) or {}
    proc = subprocess.Popen([sys.executable, str(HERE.parent / "tests" / "peer.py"), json.dumps(cfg),
                             str(16 << 20)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    peer = json.loads(proc.stdout.readline())
    try:
        mc = bench_calls(cfg, peer, a.iters)
        bench_submit(mc.get_engine(), peer)
        mc.close()
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)


if __name__ == "__main__":
    main()
