#!/usr/bin/env python3
"""Hunts a lost openSegment completion: a client whose target is killed and restarted
on the same port many times, and which after every failed transfer closes the segment
and opens it again (tent.mooncake's reopen) while the peer is down.

    PYTHONPATH=<build>/python python3 scripts/reconnect_hunt.py [--rounds N] [--seed S]
        [--api mooncake|native|mixed] [--threads K] [--peer py|native:PATH]

A watchdog watches every call: one that takes longer than 2 x connect_timeout (plus the
transfer timeout for transfers) is a hang; it attaches gdb to this process, prints
every thread's stack and the control plane's state, and exits 3. Exit 0: every call
answered. Timings are random (seeded, printed).
"""

import argparse
import json
import os
import pathlib
import random
import signal
import socket
import subprocess
import sys
import threading
import time

import numpy as np

import tent
import tent.mooncake as mc

HERE = pathlib.Path(__file__).resolve().parent
PEER_PY = HERE.parent / "python" / "tests" / "peer.py"
SIZE = 1 << 20


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def config(listen, connect_ms, io_ms):
    return {
        "eal": {"mode": "eal"},
        "lcores": [{"pollers": ["rail:*", "background"],
                    "idle": {"spin_polls": 64, "pause_polls": 256, "sleep_min_us": 1,
                             "sleep_max_us": 200}}],
        "fabric": {"provider": "soft",
                   "soft": {"devices": [{"name": "soft0"}], "retry_budget_ms": 50}},
        "bootstrap": {"listen": listen, "connect_timeout_ms": connect_ms,
                      "io_timeout_ms": io_ms},
        "workers": {"slice_timeout_ms": 2000},
        "timeouts": {"endpoint_destroy_ms": 100},
        "log": {"level": os.environ.get("HUNT_LOG", "error")},
    }


class Target:
    def __init__(self, kind, port, connect_ms, io_ms):
        self.kind, self.port = kind, port
        self.cfg = config(f"127.0.0.1:{port}", connect_ms, io_ms)
        self.proc = None
        self.info = None

    def start(self, deadline_s=60):
        end = time.monotonic() + deadline_s
        while True:  # the port may still be held by a socket of the previous life
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
            if self.kind == "py":
                argv = [sys.executable, str(PEER_PY), json.dumps(self.cfg), str(SIZE)]
            else:
                argv = [self.kind.split(":", 1)[1], str(SIZE), "7", f"127.0.0.1:{self.port}"]
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, text=True, env=env)
            line = self.proc.stdout.readline()
            if line:
                if self.kind == "py":
                    self.info = json.loads(line)
                    self.addr = self.info["alloc"]
                else:
                    _, seg, addr, _ = line.split()
                    self.info = {"segment": seg}
                    self.addr = int(addr)
                return self.info["segment"]
            err = self.proc.stderr.read()
            self.proc.wait()
            if time.monotonic() > end:
                raise RuntimeError(f"target did not start: {err}")
            time.sleep(0.05)

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()


class Watchdog:
    """One slot per client thread: (what, started, bound)."""

    def __init__(self):
        self.slots = {}
        self.lock = threading.Lock()
        self.fired = False
        threading.Thread(target=self._run, daemon=True).start()

    def enter(self, what, bound):
        with self.lock:
            self.slots[threading.get_ident()] = (what, time.monotonic(), bound)

    def leave(self):
        with self.lock:
            self.slots.pop(threading.get_ident(), None)

    def _run(self):
        while True:
            time.sleep(0.2)
            now = time.monotonic()
            with self.lock:
                late = [(w, now - t) for w, t, b in self.slots.values() if now - t > b]
            if late and not self.fired:
                self.fired = True
                for what, held in late:
                    print(f"HANG: {what} has not returned after {held:.1f} s", flush=True)
                dump_with_gdb()
                print(f"HANG reproduced ({late[0][0]}); seed {ARGS.seed}", flush=True)
                os._exit(3)


GDB_SCRIPT = """
set pagination off
set print pretty on
thread apply all bt
python
import gdb
def dump():
    for th in gdb.selected_inferior().threads():
        th.switch()
        f = gdb.newest_frame()
        while f is not None:
            name = f.name() or ""
            if name.endswith("ControlPlane::openSegment") or name.endswith("ControlPlane::closeSegment"):
                f.select()
                print("=== control plane seen from thread %d (%s)" % (th.num, name))
                for expr in ("this->peers_._M_t._M_t._M_head_impl->peers_",
                             "this->peers_._M_t._M_t._M_head_impl->by_name_",
                             "this->loop_._M_t._M_t._M_head_impl->timers_",
                             "this->loop_._M_t._M_t._M_head_impl->posted_",
                             "this->loop_._M_t._M_t._M_head_impl->fds_"):
                    try:
                        print(expr, "=", gdb.parse_and_eval(expr))
                    except Exception as e:
                        print(expr, ": ", e)
                try:
                    peers = gdb.parse_and_eval("this->peers_._M_t._M_t._M_head_impl->peers_")
                    gdb.execute("print *this->peers_._M_t._M_t._M_head_impl")
                except Exception as e:
                    print("peers:", e)
                return
            f = f.older()
dump()
end
"""


def dump_with_gdb():
    path = f"/tmp/reconnect_hunt_{os.getpid()}.gdb"
    with open(path, "w") as f:
        f.write(GDB_SCRIPT)
    out = subprocess.run(["gdb", "-p", str(os.getpid()), "-batch", "-x", path],
                         capture_output=True, text=True, timeout=300)
    log = f"/tmp/reconnect_hunt_{os.getpid()}.txt"
    with open(log, "w") as f:
        f.write(out.stdout + out.stderr)
    print(f"gdb dump in {log}", flush=True)
    sys.stdout.write(out.stdout[-20000:])


SLOWEST = {}


def timed(what, bound, fn, *a, **kw):
    WATCH.enter(what, bound)
    t = time.monotonic()
    try:
        return fn(*a, **kw)
    finally:
        WATCH.leave()
        took = time.monotonic() - t
        if took > SLOWEST.get(what, 0):
            SLOWEST[what] = took


def client_loop(tid, eng, native, target, name_box, stop, stats, rng, bound):
    buf = np.zeros(SIZE, dtype=np.uint8)
    native.register_memory(buf)
    while not stop.is_set():
        name = name_box[0]
        mode = ARGS.api if ARGS.api != "mixed" else rng.choice(["mooncake", "native"])
        if mode == "mooncake":
            rc = timed("transfer_sync_read", bound + 5, eng.transfer_sync_read, name,
                       buf.ctypes.data, target.addr, 4096)
            if rc != 0:
                stats["failed"] += 1
                rc = timed("send_probe", bound, eng.send_probe, name)
                stats["probe_ok" if rc == 0 else "probe_fail"] += 1
            else:
                stats["ok"] += 1
        else:
            try:
                seg = timed("open_segment", bound, native.open_segment, name)
                stats["open_ok"] += 1
                if rng.random() < 0.7:
                    timed("close_segment", bound, native.close_segment, seg)
                    seg = timed("open_segment#2", bound, native.open_segment, name)
            except tent.Error as e:
                stats["open_fail"] += 1
        if rng.random() < 0.5:
            time.sleep(rng.random() * ARGS.pause)
    native.unregister_memory(buf)


def sequential_round(eng, native, target, name, stats, rng, bound):
    """The reporter's sequence: kill, ~20 failing attempts (each: a transfer, then
    close_segment + open_segment of the same name), restart, until a transfer works."""
    buf = np.zeros(4096, dtype=np.uint8)
    native.register_memory(buf)
    seg = None
    try:
        seg = timed("open_segment(up)", bound, native.open_segment, name)
    except tent.Error:
        pass
    time.sleep(rng.random() * ARGS.up_s)
    target.kill()
    if rng.random() < 0.5:
        time.sleep(rng.random() * 0.05)
    for attempt in range(ARGS.attempts):
        how = rng.choice(["native", "mooncake", "probe"])
        if how == "mooncake":
            rc = timed("transfer_sync_read", bound + 5, eng.transfer_sync_read, name,
                       buf.ctypes.data, target.addr, 4096)
            ok = rc == 0
        else:
            try:
                if seg is None:
                    raise tent.Error("NotFound", "no segment")
                timed("transfer", bound + 5, native.transfer_sync, seg, tent.OpCode.READ,
                      [buf.ctypes.data], [target.addr], [4096], timeout_s=bound)
                ok = True
            except tent.Error:
                ok = False
        stats["ok" if ok else "failed"] += 1
        if how == "probe":
            rc = timed("send_probe", bound, eng.send_probe, name)
            stats["probe_ok" if rc == 0 else "probe_fail"] += 1
        else:
            if seg is not None:
                try:
                    timed("close_segment", bound, native.close_segment, seg)
                except tent.Error:
                    pass
            try:
                seg = timed("open_segment(down)", bound, native.open_segment, name)
                stats["open_ok"] += 1
            except tent.Error:
                stats["open_fail"] += 1
        if rng.random() < 0.5:
            time.sleep(rng.random() * ARGS.pause)
    target.start()
    for _ in range(100):
        try:
            seg = timed("open_segment(back)", bound, native.open_segment, name)
            timed("transfer(back)", bound + 5, native.transfer_sync, seg, tent.OpCode.READ,
                  [buf.ctypes.data], [target.addr], [4096], timeout_s=bound)
            break
        except tent.Error:
            if seg is not None:
                try:
                    native.close_segment(seg)
                except tent.Error:
                    pass
            time.sleep(0.05)
    native.unregister_memory(buf)


def main():
    global ARGS, WATCH
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--seed", type=int, default=random.randrange(1 << 30))
    p.add_argument("--api", default="mixed")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--peer", default="py")
    p.add_argument("--connect-ms", type=int, default=1000)
    p.add_argument("--io-ms", type=int, default=1000)
    p.add_argument("--down-s", type=float, default=3.0, help="mean time the target is down")
    p.add_argument("--up-s", type=float, default=1.0, help="mean time the target is up")
    p.add_argument("--pause", type=float, default=0.05)
    p.add_argument("--sequential", action="store_true", help="the reporter's kill/attempts/restart")
    p.add_argument("--attempts", type=int, default=20)
    ARGS = p.parse_args()
    print(f"reconnect_hunt seed {ARGS.seed} {vars(ARGS)}", flush=True)
    rng = random.Random(ARGS.seed)
    WATCH = Watchdog()
    bound = 2 * (ARGS.connect_ms + ARGS.io_ms) / 1000.0
    port = free_port()
    target = Target(ARGS.peer, port, ARGS.connect_ms, ARGS.io_ms)
    name = target.start()
    eng = mc.TransferEngine(config("127.0.0.1:0", ARGS.connect_ms, ARGS.io_ms))
    assert eng.initialize("127.0.0.1", mc.P2PHANDSHAKE, "rdma", "") == 0, eng.last_error
    native = eng.get_engine()
    stop = threading.Event()
    stats = {k: 0 for k in ("ok", "failed", "probe_ok", "probe_fail", "open_ok", "open_fail")}
    threads = [threading.Thread(target=client_loop,
                                args=(i, eng, native, target, [name], stop, stats,
                                      random.Random(rng.random()), bound))
               for i in range(ARGS.threads)]
    for t in threads if not ARGS.sequential else []:
        t.start()
    for r in range(ARGS.rounds):
        if ARGS.sequential:
            sequential_round(eng, native, target, name, stats, rng, bound)
        else:
            time.sleep(rng.expovariate(1 / ARGS.up_s))
            target.kill()
            time.sleep(rng.expovariate(1 / ARGS.down_s))
            target.start()
        print(f"round {r}: {stats}", flush=True)
    stop.set()
    for t in threads if not ARGS.sequential else []:
        t.join()
    target.kill()
    timed("close", bound, eng.close)
    print("slowest: " + ", ".join(f"{k} {v:.2f}s" for k, v in sorted(SLOWEST.items())), flush=True)
    print(f"no hang: {stats}", flush=True)


if __name__ == "__main__":
    try:
        main()
    except BaseException:
        import traceback
        traceback.print_exc()
        sys.stdout.flush()
        os._exit(4)
