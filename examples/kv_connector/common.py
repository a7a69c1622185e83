"""What the prefill and decode processes of the example share: the engine
config, the KV layout, the block contents (so each side can verify) and the
latency summary."""

import json
import sys
import time

import numpy as np


def engine_config(shape):
    """Real EAL lcores on the soft fabric with a modeled link (docs/config.md)."""
    link = {"link_gbps": shape["link_gbps"], "latency_ns": shape["latency_ns"]}
    return {
        "eal": {"mode": "eal"},
        "lcores": [{"pollers": ["rail:*", "background"],
                    "idle": {"spin_polls": 256, "pause_polls": 1024, "sleep_max_us": 100}}],
        "fabric": {"provider": "soft", "soft": {"devices": [
            dict(name="soft0", **link), dict(name="soft1", **link)]}},
        "bootstrap": {"listen": "127.0.0.1:0"},
        "log": {"level": "error"},
    }


def kv_blocks(shape):
    """Every KV block of every request: uint8 [requests, layers, blocks, block_bytes].

    Block (r, l, b) holds arange ^ tag(r, l, b) as uint64 words, so any block that
    lands in the wrong place or is torn is caught."""
    r, l, b = shape["requests"], shape["layers"], shape["blocks"]
    words = shape["block_bytes"] // 8
    tag = ((np.arange(r, dtype=np.uint64)[:, None, None] << np.uint64(40))
           | (np.arange(l, dtype=np.uint64)[None, :, None] << np.uint64(20))
           | np.arange(b, dtype=np.uint64)[None, None, :])
    kv = np.arange(words, dtype=np.uint64)[None, None, None, :] ^ tag[..., None]
    return kv.view(np.uint8)


def slots(shape):
    """The decode pool slot of each (request, block): scattered, as a block manager
    hands them out. [requests, blocks]"""
    n = shape["requests"] * shape["blocks"]
    return np.random.default_rng(shape["seed"]).permutation(n).reshape(shape["requests"], -1)


def addrs(base, offsets):
    return np.uint64(base) + np.asarray(offsets, dtype=np.uint64)


class Timer:
    def __init__(self):
        self.us = []

    def __enter__(self):
        self.t0 = time.perf_counter_ns()
        return self

    def __exit__(self, *exc):
        self.us.append((time.perf_counter_ns() - self.t0) / 1e3)


def stats_delta(after, before):
    """The path counters an engine gained between two stats() calls."""
    keys = ("attempted", "succeeded", "fallback_lane_busy", "fallback_endpoint_not_ready",
            "fallback_unresolvable", "fallback_over_size_cap", "fallback_mode_off")
    delta = {k: after["direct"][k] - before["direct"][k] for k in keys}
    delta["worker_tasks"] = after["worker"]["tasks"] - before["worker"]["tasks"]
    return delta


def say(obj):
    print(json.dumps(obj), flush=True)


def hear():
    line = sys.stdin.readline()
    return json.loads(line) if line else None
