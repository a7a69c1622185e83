"""The decode process: owns the KV pool (a registered numpy array prefill writes
into) and, while prefill writes, pulls the first layers of the next request from
prefill with FOREGROUND_GET (the direct path) -- or untagged, for comparison.
Verifies every pulled layer and, after each phase, every block of the pool.

Driven by run.py over stdin/stdout (one JSON object a line)."""

import sys
import threading

import numpy as np

import common
import tent


def pull_until_stopped(engine, prefill, shape, kv, intent, stop):
    """Foreground pulls: the first `fg_bytes` of layers [0, fg_layers) of the next
    request, one READ each, until run.py says prefill is done."""
    fg = np.zeros(shape["fg_bytes"], np.uint8)
    engine.register_memory(fg)
    timer, bad, i = common.Timer(), 0, 0
    layer_bytes = shape["blocks"] * shape["block_bytes"]
    while not stop.is_set() or i < shape["min_pulls"]:
        r, layer = (i // shape["fg_layers"]) % shape["requests"], i % shape["fg_layers"]
        remote = prefill["kv"] + (r * shape["layers"] + layer) * layer_bytes
        fg[:] = 0
        with timer:
            engine.transfer_sync(prefill["segment"], tent.OpCode.READ, [fg.ctypes.data], [remote],
                                 [fg.nbytes], intent=intent)
        bad += not np.array_equal(fg, kv[r, layer].reshape(-1)[: fg.nbytes])
        i += 1
    engine.unregister_memory(fg)
    return timer.us, bad


def pool_mismatches(pool, kv, slot_of):
    """Blocks of the pool that do not hold what prefill wrote there."""
    got = pool[:, slot_of]  # [layers, requests, blocks, bytes]
    return int(np.count_nonzero((got != kv.transpose(1, 0, 2, 3)).any(axis=-1)))


def main():
    shape = common.hear()
    kv = common.kv_blocks(shape)  # what prefill holds: to verify against
    slot_of = common.slots(shape)
    pool_slots = shape["requests"] * shape["blocks"]
    pool = np.zeros((shape["layers"], pool_slots, shape["block_bytes"]), np.uint8)
    with tent.TransferEngine(common.engine_config(shape)) as engine:
        engine.register_memory(pool)
        common.say({"segment": engine.segment_name, "pool": pool.ctypes.data})
        prefill = common.hear()
        while (cmd := common.hear()) is not None:  # {"intent": ...}: one phase
            pool[:] = 0
            stop, before = threading.Event(), engine.stats()
            threading.Thread(target=lambda: (common.hear(), stop.set())).start()
            common.say({"pulling": True})
            us, bad = pull_until_stopped(engine, prefill, shape, kv, cmd["intent"], stop)
            common.say({"latency_us": us, "bad_pulls": bad,
                        "bad_blocks": pool_mismatches(pool, kv, slot_of),
                        "path": common.stats_delta(engine.stats(), before)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
