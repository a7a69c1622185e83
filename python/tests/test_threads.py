"""Threads, the GIL and the process: waits release the GIL, ten threads share an
engine, Ctrl-C ends a wait, close() ends waits, fork() and exit are clean."""

import json
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import tent
from conftest import HERE, child_env, config, pattern, sha, slow_fabric

W, R = tent.OpCode.WRITE, tent.OpCode.READ


def run_child(body, *args, timeout=60):
    """Runs `body` (Python source using `tent`, `config`, `slow_fabric`) in a fresh process."""
    code = "import sys; sys.path.insert(0, %r)\n" % str(HERE) + textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          timeout=timeout, env=child_env())


@pytest.mark.parametrize("how", ["wait_batch", "wait", "transfer_sync"])
def test_a_python_thread_runs_during_a_long_transfer(peer, local, how):
    """With a huge switch interval the main thread never hands the GIL over on its
    own: the counter moves during the call only if the call released the GIL. For
    wait/wait_batch the transfer is already in flight, so the wait is the only
    place it can move; transfer_sync waits through the same code."""
    slow = tent.TransferEngine(config(fabric=slow_fabric(1)))  # 8 MiB at 1 Gb/s: ~67 ms
    slow.register_memory(local)
    local[: 8 << 20] = pattern(8 << 20, 40)
    args = (peer.segment, W, [local.ctypes.data], [peer.addr("numpy")], [8 << 20])
    count, stop = [0], threading.Event()

    def counter():
        while not stop.is_set():
            count[0] += 1
            time.sleep(0)  # gives the GIL back at once, so main gets it when it asks

    old = sys.getswitchinterval()
    sys.setswitchinterval(1000)
    worker = threading.Thread(target=counter)
    worker.start()
    try:
        batch = slow.transfer_async(*args) if how != "transfer_sync" else None
        before = count[0]
        if how == "wait_batch":
            state, _ = slow.wait_batch(batch, 30)
        elif how == "wait":
            state, _ = slow.wait(batch, 0, 30)
        else:
            state = slow.transfer_sync(*args) and tent.TransferState.COMPLETED
        during = count[0] - before
    finally:
        stop.set()
        sys.setswitchinterval(old)
        worker.join()
        if batch is not None:
            slow.free_batch(batch)
        slow.unregister_memory(local)
        slow.close()
    assert state == tent.TransferState.COMPLETED
    assert during > 0
    assert peer.sum("numpy", 0, 8 << 20) == sha(local[: 8 << 20])


def test_ten_threads_share_one_engine(engine, seg, peer, local):
    threads, region, rounds = 10, 256 << 10, 8
    errors = []

    def sender(t):
        try:
            src = local[t * region: (t + 1) * region]
            dst = local[(8 << 20) + t * region: (8 << 20) + (t + 1) * region]
            remote = peer.addr("alloc", t * region)
            for r in range(rounds):
                src[:] = pattern(region, 1000 * t + r)
                intent = tent.Intent.FOREGROUND_GET if r % 2 else tent.Intent.UNSPEC
                engine.transfer_sync(seg, W, [src.ctypes.data], [remote], [region], intent=intent)
                dst[:] = 0
                engine.transfer_sync(seg, R, [dst.ctypes.data], [remote], [region])
                if not np.array_equal(src, dst):
                    errors.append(f"thread {t} round {r}: bytes differ")
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(f"thread {t}: {e!r}")

    pool = [threading.Thread(target=sender, args=(t,)) for t in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    assert errors == []
    assert peer.sum("alloc", 0, threads * region) == sha(local[: threads * region])


def test_ctrl_c_interrupts_a_wait():
    """SIGINT is sent once the transfer is in flight, i.e. while transfer_sync is
    inside its wait (the call has no Python code between submit and wait): the
    KeyboardInterrupt can only come out of the wait."""
    result = run_child("""
        import os, signal, threading, time, numpy as np, tent
        from conftest import config, slow_fabric
        e = tent.TransferEngine(config(fabric=slow_fabric(0.01)))  # 64 MiB: ~54 s
        buf = np.zeros(128 << 20, np.uint8); e.register_memory(buf)

        def ctrl_c_once_in_flight():
            for _ in range(30000):
                if e.stats()["worker"]["slices_posted"] > 0:
                    break
                time.sleep(0.001)
            os.kill(os.getpid(), signal.SIGINT)

        threading.Thread(target=ctrl_c_once_in_flight).start()
        try:
            e.transfer_sync(0, tent.OpCode.WRITE, [buf.ctypes.data], [buf.ctypes.data + (64 << 20)],
                            [64 << 20], timeout_s=120)
            print("COMPLETED")
        except KeyboardInterrupt:
            print("INTERRUPTED", e.stats()["worker"]["slices_completed"] < 1024)
        e.close()
        """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "INTERRUPTED True"


def test_close_ends_a_wait_in_another_thread(local):
    slow = tent.TransferEngine(config(fabric=slow_fabric(0.01)))
    slow.register_memory(local)
    batch = slow.transfer_async(0, W, [local.ctypes.data], [local.ctypes.data + (8 << 20)],
                                [8 << 20])  # ~7 s on the modeled link
    outcome = []

    def waiter():
        try:
            outcome.append(slow.wait_batch(batch, 60))
        except tent.Error as e:
            outcome.append(e.code)

    th = threading.Thread(target=waiter)
    th.start()
    slow.close()  # waits for the waiter's call to leave the engine
    th.join(timeout=60)
    assert not th.is_alive()
    # Closed during its wait (Canceled), or before it began (FailedPrecondition).
    assert outcome in (["Canceled"], ["FailedPrecondition"])
    with pytest.raises(tent.Error) as e:
        slow.stats()
    assert e.value.code == "FailedPrecondition" and "closed" in e.value.message


def test_close_cancels_an_open_segment_in_progress():
    """A peer that accepts and never answers: open_segment would wait its whole
    connect budget (a minute here); close() cancels it instead of waiting for it."""
    import socket
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    name = "127.0.0.1:%d" % silent.getsockname()[1]
    e = tent.TransferEngine(config(bootstrap={"listen": "127.0.0.1:0",
                                              "connect_timeout_ms": 60000}))
    outcome = []

    def opener():
        try:
            outcome.append(e.open_segment(name))
        except tent.Error as err:
            outcome.append(err.code)

    th = threading.Thread(target=opener)
    th.start()
    silent.settimeout(60)
    conn, _ = silent.accept()  # the engine is connecting: the open is in progress
    e.close()
    th.join(timeout=60)
    assert not th.is_alive()
    assert outcome == ["Canceled"]
    conn.close()
    silent.close()


def test_fork_with_an_engine_alive_is_refused_in_the_child():
    result = run_child("""
        import os, sys, tent
        from conftest import config
        e = tent.TransferEngine(config())
        def child(body):
            pid = os.fork()
            if pid == 0:
                body()
                os._exit(0)
            return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        def refused():
            for call in (lambda: e.stats(), lambda: tent.TransferEngine(config())):
                try:
                    call()
                    os._exit(1)
                except tent.Error as err:
                    if err.code != "FailedPrecondition" or "fork" not in err.message:
                        os._exit(2)
        print(child(refused))
        print(child(lambda: sys.exit(0)))  # exits through atexit: the inherited engine is left alone
        e.stats()                          # the parent's engine is untouched
        print("parent ok")
        """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["0", "0", "parent", "ok"]


def test_exit_without_close_is_clean(peer):
    result = run_child("""
        import sys, json, numpy as np, tent
        from conftest import config
        peer = json.loads(sys.argv[1])
        e = tent.TransferEngine(config())
        buf = np.ones(1 << 20, np.uint8); e.register_memory(buf)
        e.allocate_local_memory(1 << 20)
        e.transfer_sync(peer["segment"], tent.OpCode.READ, [buf.ctypes.data], [peer["alloc"]], [4096])
        batch = e.transfer_async(peer["segment"], tent.OpCode.WRITE, [buf.ctypes.data],
                                 [peer["alloc"] + (1 << 20)], [1 << 20])
        print("exiting", flush=True)
        """, json.dumps(peer.info))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "exiting"
    assert result.stderr == ""
