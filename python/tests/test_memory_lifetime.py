"""Memory a pending transfer uses is never released under it.

unregister_memory / free_local_memory raise tent.Error (FailedPrecondition, naming how
many transfers use the memory) while a transfer reads into or writes from it;
``cancel=True`` cancels those transfers and returns once they are drained; and the
binding keeps the registered Python object alive until the engine has released it.

The transfer is held without a race: it goes to a fresh peer whose process is
stopped (SIGSTOP), so its endpoints cannot connect and no slice is posted until the
test continues the peer (SIGCONT). The engine's control timeouts are far longer than
the hold.
"""

import contextlib
import gc
import os
import signal
import time
import weakref

import numpy as np
import pytest

import tent
from conftest import Peer, config, pattern, sha

R = tent.OpCode.READ
S = tent.TransferState
N = 256 << 10  # four worker slices

# Nothing gives up on the stopped peer while the test holds it.
HOLD = config(
    bootstrap={"listen": "127.0.0.1:0", "connect_timeout_ms": 60000, "io_timeout_ms": 60000,
               "peer_timeout_ms": 120000},
    workers={"slice_timeout_ms": 60000},
)


@pytest.fixture(scope="module")
def quiet_peer():
    p = Peer(config(), size=1 << 20)
    yield p
    assert p.stop() == 0


@pytest.fixture
def fresh(quiet_peer):
    """An engine of its own (no endpoint to the peer yet) and the peer's segment in it."""
    e = tent.TransferEngine(HOLD)
    yield e, e.open_segment(quiet_peer.segment)
    e.close()


def all_threads_stopped(pid):
    """Every thread of `pid` in the stopped state (SIGSTOP is delivered asynchronously:
    a thread runs on until it next enters the kernel)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:  # the thread ended
            continue
        if state not in ("T", "t"):
            return False
    return True


@contextlib.contextmanager
def stopped(peer):
    os.kill(peer.proc.pid, signal.SIGSTOP)
    try:
        deadline = time.monotonic() + 30  # a bound against a hang, not a speed requirement
        while not all_threads_stopped(peer.proc.pid):
            assert time.monotonic() < deadline, "the peer did not stop"
            time.sleep(0.001)
        yield
    finally:
        os.kill(peer.proc.pid, signal.SIGCONT)


def held_read(engine, seg, peer, addr):
    """A READ of the peer's "numpy" buffer into `addr`, pending while the peer is stopped."""
    batch = engine.transfer_async(seg, R, [addr], [peer.addr("numpy")], [N])
    assert engine.get_batch_status(batch)[0] == S.PENDING
    return batch


def test_unregister_is_refused_while_a_read_lands_and_a_new_buffer_never_gets_it(fresh,
                                                                                  quiet_peer):
    engine, seg = fresh
    a = np.zeros(N, dtype=np.uint8)
    engine.register_memory(a)
    refused = None
    with stopped(quiet_peer):
        batch = held_read(engine, seg, quiet_peer, a.ctypes.data)
        try:
            engine.unregister_memory(a)
        except tent.Error as e:
            refused = e
        else:
            a[:] = pattern(N, 99)  # the range is free: the application reuses it as buffer B
    state, moved = engine.wait_batch(batch, 30)
    if refused is None:
        pytest.fail(f"unregister_memory returned while a READ into A was pending; the READ then "
                    f"ended {state.name} and B "
                    f"{'kept its bytes' if np.array_equal(a, pattern(N, 99)) else 'was overwritten'}")
    assert refused.code == "FailedPrecondition", refused
    assert "1 transfer" in refused.message, refused
    assert (state, moved) == (S.COMPLETED, N)
    assert sha(a) == quiet_peer.sum("numpy", 0, N)  # A is still registered: the READ landed there
    engine.free_batch(batch)
    engine.unregister_memory(a)


def test_the_binding_keeps_the_buffer_alive_until_the_engine_released_it(fresh, quiet_peer):
    engine, seg = fresh
    a = np.zeros(N, dtype=np.uint8)
    engine.register_memory(a)
    addr, alive = a.ctypes.data, weakref.ref(a)
    with stopped(quiet_peer):
        batch = held_read(engine, seg, quiet_peer, addr)
        with pytest.raises(tent.Error, match="FailedPrecondition"):
            engine.unregister_memory(a)
        del a
        gc.collect()
        assert alive() is not None, "the READ's buffer was freed while the READ was pending"
    assert engine.wait_batch(batch, 30) == (S.COMPLETED, N)
    assert sha(alive()) == quiet_peer.sum("numpy", 0, N)
    engine.free_batch(batch)
    engine.unregister_memory(addr)  # by address: the binding held the only reference
    gc.collect()
    assert alive() is None


def test_cancel_true_cancels_the_transfers_returns_drained_and_releases_the_buffer(fresh,
                                                                                   quiet_peer):
    engine, seg = fresh
    a = np.zeros(N, dtype=np.uint8)
    other = np.zeros(N, dtype=np.uint8)  # a transfer into another buffer is left alone
    engine.register_memory(a)
    engine.register_memory(other)
    alive = weakref.ref(a)
    with stopped(quiet_peer):
        batch = held_read(engine, seg, quiet_peer, a.ctypes.data)
        kept = held_read(engine, seg, quiet_peer, other.ctypes.data)
        engine.unregister_memory(a, cancel=True)
        # Returned drained: the READ is over, nothing of it moved, none will.
        assert engine.get_batch_status(batch) == (S.CANCELED, 0)
        assert engine.get_batch_status(kept)[0] == S.PENDING
        del a
        gc.collect()
        assert alive() is None
    assert engine.wait_batch(kept, 30) == (S.COMPLETED, N)
    assert sha(other) == quiet_peer.sum("numpy", 0, N)
    for b in (batch, kept):
        engine.free_batch(b)
    engine.unregister_memory(other)


def test_free_local_memory_is_refused_then_cancels_with_cancel_true(fresh, quiet_peer):
    engine, seg = fresh
    mem = engine.allocate_local_memory(N)
    with stopped(quiet_peer):
        batch = held_read(engine, seg, quiet_peer, mem)
        with pytest.raises(tent.Error, match="FailedPrecondition.*1 transfer"):
            engine.free_local_memory(mem)
        engine.free_local_memory(mem, cancel=True)
        assert engine.get_batch_status(batch) == (S.CANCELED, 0)
    with pytest.raises(tent.Error, match="NotFound"):
        engine.free_local_memory(mem)
    engine.free_batch(batch)


def test_cancel_must_be_a_bool(engine):
    buf = np.zeros(4096, dtype=np.uint8)
    engine.register_memory(buf)
    with pytest.raises(tent.Error, match="InvalidArgument.*cancel"):
        engine.unregister_memory(buf, cancel="yes")
    engine.unregister_memory(buf, cancel=False)
