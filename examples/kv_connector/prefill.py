"""The prefill process: holds the KV cache of its requests in a registered numpy
array and writes it, layer by layer, into the decode process's KV pool at the
block slots decode handed out (bulk: the worker path).

Driven by run.py over stdin/stdout (one JSON object a line)."""

import sys

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
        with timer:
            engine.transfer_sync(decode["segment"], tent.OpCode.WRITE, local, remote, block)


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
            for r in range(shape["requests"]):
                write_request(engine, decode, shape, kv, slot_of, r, timer)
            common.say({"latency_us": timer.us, "path": common.stats_delta(engine.stats(),
                                                                            before)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
