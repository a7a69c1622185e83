"""The prefill process: holds the KV cache of its requests in a registered numpy
array and writes it, layer by layer, into the decode process's KV pool at the
block slots decode handed out (bulk: the worker path). The last layer's write of a
request carries a notification (push): decode learns from it that the request's
blocks landed. Decode's pulls carry one back (pull): prefill frees a pulled layer
when it arrives.

Driven by run.py over stdin/stdout (one JSON object a line)."""

import json
import sys
import threading

import numpy as np

import common
import tent


def write_request(engine, decode, shape, kv, slot_of, r, timer):
    block = shape["block_bytes"]
    pool_slots = shape["requests"] * shape["blocks"]
    for layer in range(shape["layers"]):
        # One descriptor per block: local block b of (r, layer) -> pool[layer, slot].
        local = common.addrs(kv[r, layer].ctypes.data, np.arange(shape["blocks"]) * block)
        remote = common.addrs(decode["pool"], (layer * pool_slots + slot_of[r]) * block)
        last = layer == shape["layers"] - 1
        note = json.dumps({"request": int(r)}) if last else None
        with timer:
            engine.transfer_sync(decode["segment"], tent.OpCode.WRITE, local, remote, block,
                                 notify=note)


class Freer:
    """Frees (here: counts, then zeroes) the layers decode pulled, as decode's
    notifications say: no other message tells prefill that a pull is done."""

    def __init__(self, engine, kv):
        self.engine, self.kv, self.freed = engine, kv, 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run)
        self.thread.start()

    def take(self, notes):
        for _, msg in notes:
            pulled = json.loads(msg)
            # A real prefill would return the request's blocks to its allocator here.
            self.freed += 1
            assert pulled["layer"] < self.kv.shape[1]

    def run(self):
        while not self.stop.is_set():
            self.take(self.engine.wait_notifications(0.1))

    def finish(self):
        self.stop.set()
        self.thread.join()
        self.take(self.engine.get_notifications())  # delivered before decode reported
        return self.freed


def main():
    shape = common.hear()
    kv = common.kv_blocks(shape)
    slot_of = common.slots(shape)
    with tent.TransferEngine(common.engine_config(shape)) as engine:
        engine.register_memory(kv)
        common.say({"segment": engine.segment_name, "kv": kv.ctypes.data})
        decode = common.hear()
        while common.hear() is not None:  # one phase per "go"
            timer, before = common.Timer(), engine.stats()
            freer = Freer(engine, kv)
            for r in range(shape["requests"]):
                write_request(engine, decode, shape, kv, slot_of, r, timer)
            common.say({"latency_us": timer.us, "path": common.stats_delta(engine.stats(),
                                                                            before)})
            common.hear()  # decode has reported: every pull's notification was delivered
            common.say({"freed": freer.finish()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
