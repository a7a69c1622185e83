"""The peer process of the pytest suite: a tent engine with three buffers.

    python3 peer.py CONFIG_JSON SIZE

Buffers, each SIZE bytes with a seeded pattern, registered in this order under their
names: "alloc" (allocate_local_memory), "numpy" (a registered numpy array) and
"readonly" (a numpy array peers may only read, access "r"). Prints one JSON line {"segment", "size", "<buffer>": address}
and then answers commands on stdin until it closes:
    sum NAME OFFSET LENGTH   -> sha256 hex of those bytes, as this process sees them
    fill NAME SEED           -> refills the buffer with the pattern of SEED; "ok"
    metadata                 -> local_metadata() in hex (the blob tests' side channel)
    note NAME OFFSET LENGTH  -> waits (30 s) for one notification, then the JSON
                                {"name", "msg" (hex), "sum"}: "sum" is the sha256 of
                                those bytes right on receipt ({} when none came)
    send SEGMENT MESSAGE     -> send_notification(SEGMENT, MESSAGE): "ok" or the error code
"""

import ctypes
import hashlib
import json
import sys

import numpy as np

import tent


def pattern(size, seed):
    return np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8)


def main():
    config, size = json.loads(sys.argv[1]), int(sys.argv[2])
    with tent.TransferEngine(config) as engine:
        alloc = engine.allocate_local_memory(size, name="alloc")
        views = {
            "alloc": np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(alloc)),
            "numpy": np.empty(size, dtype=np.uint8),
            "readonly": np.empty(size, dtype=np.uint8),
        }
        engine.register_memory(views["numpy"], name="numpy")
        engine.register_memory(views["readonly"], access="r", name="readonly")
        for seed, view in enumerate(views.values()):
            view[:] = pattern(size, seed)
        ready = {"segment": engine.segment_name, "size": size}
        ready.update({name: view.ctypes.data for name, view in views.items()})
        print(json.dumps(ready), flush=True)
        for line in sys.stdin:
            if line.strip() == "metadata":
                print(engine.local_metadata().hex(), flush=True)
                continue
            cmd, name, *args = line.split()
            if cmd == "send":
                try:
                    engine.send_notification(name, args[0])
                    print("ok", flush=True)
                except tent.Error as e:
                    print(e.code, flush=True)
                continue
            view = views[name]
            if cmd == "sum":
                off, length = int(args[0]), int(args[1])
                print(hashlib.sha256(view[off:off + length]).hexdigest(), flush=True)
            elif cmd == "note":
                off, length = int(args[0]), int(args[1])
                got = engine.wait_notifications(30)
                out = {}
                if got:
                    sender, msg = got[0]
                    out = {"name": sender, "msg": msg.hex(), "count": len(got),
                           "sum": hashlib.sha256(view[off:off + length]).hexdigest()}
                print(json.dumps(out), flush=True)
            elif cmd == "fill":
                view[:] = pattern(size, int(args[0]))
                print("ok", flush=True)


if __name__ == "__main__":
    main()
