"""The decode process: owns the KV pool (a registered numpy array prefill writes
into) and, while prefill writes, pulls the first layers of the next request from
prefill with FOREGROUND_GET (the direct path) -- or untagged, for comparison.
Learns that a request's KV blocks landed from prefill's notification (push) and
verifies them right then; each pull carries a notification back, on which prefill
frees the pulled layer (pull). No other channel says that a transfer completed.

Driven by run.py over stdin/stdout (one JSON object a line)."""

import json
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
        note = json.dumps({"request": r, "layer": layer})
        with timer:
            engine.transfer_sync(prefill["segment"], tent.OpCode.READ, [fg.ctypes.data], [remote],
                                 [fg.nbytes], intent=intent, notify=note)
        bad += not np.array_equal(fg, kv[r, layer].reshape(-1)[: fg.nbytes])
        i += 1
    engine.unregister_memory(fg)
    return timer.us, bad


def receive_requests(engine, pool, kv, slot_of, shape, done):
    """Push: waits for prefill's notification of each request and checks that
    request's blocks on receipt. Sets `done` once every request arrived."""
    arrived, bad = set(), 0
    while len(arrived) < shape["requests"]:
        for _, msg in engine.wait_notifications(30):
            r = json.loads(msg)["request"]
            got = pool[:, slot_of[r]]  # [layers, blocks, bytes]
            bad += int(np.count_nonzero((got != kv[r]).any(axis=-1)))
            arrived.add(r)
    done.set()
    return bad


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
            stop, before, on_receipt = threading.Event(), engine.stats(), []
            receiver = threading.Thread(target=lambda: on_receipt.append(
                receive_requests(engine, pool, kv, slot_of, shape, stop)))
            receiver.start()
            common.say({"pulling": True})
            us, bad = pull_until_stopped(engine, prefill, shape, kv, cmd["intent"], stop)
            receiver.join()
            common.say({"latency_us": us, "bad_pulls": bad, "bad_on_receipt": on_receipt[0],
                        "bad_blocks": pool_mismatches(pool, kv, slot_of),
                        "path": common.stats_delta(engine.stats(), before)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
