"""KV-cache transfer between a prefill and a decode process on the soft fabric.

    PYTHONPATH=build/python /usr/bin/python3 examples/kv_connector/run.py

Prefill writes the KV blocks of its requests (numpy, scattered block ids) into
decode's registered pool, layer by layer; meanwhile decode pulls the first layers
of the next request from prefill with FOREGROUND_GET. A second phase repeats it
with the pulls untagged, for comparison. Prints latency per class and the path
each took, from the engines' stats (direct path vs worker path).
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent


def start(script, shape):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    proc = subprocess.Popen([sys.executable, str(HERE / script)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env)
    send(proc, shape)
    return proc


def send(proc, obj):
    proc.stdin.write(json.dumps(obj) + "\n")
    proc.stdin.flush()


def receive(proc):
    line = proc.stdout.readline()
    if not line:
        raise SystemExit(f"{proc.args[-1]} exited early ({proc.wait()})")
    return json.loads(line)


def path_text(p):
    fell_back = {k[len("fallback_"):]: v for k, v in p.items() if k.startswith("fallback_") and v}
    text = f"direct {p['succeeded']}/{p['attempted']} attempted, worker {p['worker_tasks']} tasks"
    return text + (f" (fell back: {fell_back})" if fell_back else "")


def row(name, result, nbytes):
    us = np.asarray(result["latency_us"])
    p50, p99 = np.percentile(us, 50), np.percentile(us, 99)
    return (f"{name:<32} {len(us):>6} {nbytes >> 10:>7} KiB {p50:>9.1f} {p99:>9.1f}   "
            f"{path_text(result['path'])}")


def phase(prefill, decode, intent):
    """One phase. Decode stops pulling once prefill's notifications said every request
    landed; prefill counts the pulls decode's notifications freed. run.py only starts
    the phase and collects the figures: it carries no completion."""
    send(decode, {"intent": intent})
    receive(decode)  # pulling
    send(prefill, {"go": True})
    written = receive(prefill)
    pulled = receive(decode)
    send(prefill, {"report": True})
    written.update(receive(prefill))
    return written, pulled


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[1])
    ap.add_argument("--requests", type=int, default=8)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--blocks", type=int, default=64, help="KV blocks per request and layer")
    ap.add_argument("--block-kib", type=int, default=16)
    ap.add_argument("--fg-layers", type=int, default=2, help="layers a foreground pull reads")
    ap.add_argument("--fg-kib", type=int, default=64, help="bytes of a layer a pull reads")
    ap.add_argument("--link-gbps", type=float, default=25.0)
    ap.add_argument("--latency-ns", type=int, default=2000)
    a = ap.parse_args()
    shape = {"requests": a.requests, "layers": a.layers, "blocks": a.blocks,
             "block_bytes": a.block_kib << 10, "fg_layers": a.fg_layers, "fg_bytes": a.fg_kib << 10,
             "min_pulls": 20, "link_gbps": a.link_gbps, "latency_ns": a.latency_ns, "seed": 7}
    decode = start("decode.py", shape)
    prefill = start("prefill.py", shape)
    send(prefill, receive(decode))
    send(decode, receive(prefill))
    results = [("foreground_get", phase(prefill, decode, "foreground_get")),
               ("unspec", phase(prefill, decode, "unspec"))]
    for proc in (prefill, decode):
        proc.stdin.close()
        proc.wait(timeout=60)

    layer_bytes = a.blocks * shape["block_bytes"]
    print(f"soft fabric, 2 devices x {a.link_gbps:g} Gb/s, {a.latency_ns} ns (modeled); "
          f"{a.requests} requests x {a.layers} layers x {a.blocks} blocks x {a.block_kib} KiB")
    print(f"{'class':<32} {'count':>6} {'each':>11} {'p50 us':>9} {'p99 us':>9}   path taken")
    ok = True
    for intent, (written, pulled) in results:
        print(row(f"kv_write ({intent} phase)", written, layer_bytes))
        print(row(f"first_layers_get {intent}", pulled, shape["fg_bytes"]))
        pulls = len(pulled["latency_us"])
        ok &= pulled["bad_pulls"] == 0 and pulled["bad_blocks"] == 0
        ok &= pulled["bad_on_receipt"] == 0 and written["freed"] == pulls
        print(f"  verified: {pulls - pulled['bad_pulls']}/{pulls} pulls, "
              f"{a.requests * a.layers * a.blocks - pulled['bad_blocks']}/"
              f"{a.requests * a.layers * a.blocks} KV blocks in decode's pool "
              f"({pulled['bad_on_receipt']} wrong on receipt of their notification), "
              f"{written['freed']}/{pulls} pulled layers freed on decode's notification")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
