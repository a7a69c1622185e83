"""Bad arguments raise tent.Error (with the StatusCode name), never crash."""

import numpy as np
import pytest

import tent
from conftest import config

W, R = tent.OpCode.WRITE, tent.OpCode.READ


def expect_error(code, call, *args, **kwargs):
    with pytest.raises(tent.Error) as e:
        call(*args, **kwargs)
    assert e.value.code == code, e.value
    assert str(e.value).startswith(code + ": ")
    return e.value


def test_wrong_types(engine, seg, peer, local):
    a = local.ctypes.data
    cases = [
        (engine.open_segment, (42,)),
        (engine.close_segment, ("x",)),
        (engine.allocate_local_memory, ("1 MiB",)),
        (engine.allocate_local_memory, (1 << 20, 5)),
        (engine.allocate_local_memory, (1 << 20, "*", "rwx")),
        (engine.register_memory, (3.5,)),
        (engine.register_memory, (b"immutable bytes",)),  # not writable
        (engine.register_memory, (np.zeros((4, 4))[:, 1],)),  # not contiguous
        (engine.register_memory, (a,)),  # an int address needs a length
        (engine.allocate_batch, (None,)),
        (engine.allocate_batch, (True,)),
        (engine.submit, (1, "requests")),
        (engine.submit, (1, [1, 2])),
        (engine.wait, (1, 0, "soon")),
        (engine.wait, (1, 0, -1)),
        (engine.transfer_sync, (seg, "copy", [a], [peer.addr("numpy")], [8])),
        (engine.transfer_sync, (3.0, W, [a], [peer.addr("numpy")], [8])),
        (engine.transfer_sync, (seg, W, ["a"], [peer.addr("numpy")], [8])),
        (engine.transfer_sync, (seg, W, [1.5], [peer.addr("numpy")], [8])),
        (engine.transfer_sync, (seg, W, "abc", [peer.addr("numpy")], [8])),
        (engine.transfer_sync, (seg, W, [a, a], [peer.addr("numpy")], [8])),  # lengths differ
        (engine.transfer_sync, (seg, W, [], [], [])),
        (engine.transfer_sync, (seg, W, [[a]], [[peer.addr("numpy")]], [[8]])),
        (engine.transfer_sync, (seg, W, [-1], [peer.addr("numpy")], [8])),
        (engine.transfer_sync, (seg, W, [a], [peer.addr("numpy")], [8]), {"intent": "urgent"}),
        (engine.transfer_sync, (seg, W, [a], [peer.addr("numpy")], [8]), {"deadline_us": -5}),
        (tent.TransferEngine, (12,)),
        (tent.TransferEngine, ({"fabric": {"provider": object()}},)),
        (tent.Request, ("jump", a, seg, 0, 8)),
        (tent.Request, (W, "src", seg, 0, 8)),
    ]
    for case in cases:
        call, args, kwargs = case if len(case) == 3 else (*case, {})
        expect_error("InvalidArgument", call, *args, **kwargs)


def test_unregistered_memory_and_bad_ranges(engine, seg, peer, local):
    stray = np.zeros(4096, np.uint8)  # never registered
    err = expect_error("InvalidArgument", engine.transfer_sync, seg, W, [stray.ctypes.data],
                       [peer.addr("numpy")], [4096])
    assert "registered" in err.message
    expect_error("InvalidArgument", engine.transfer_sync, seg, W, [local.ctypes.data],
                 [peer.addr("numpy")], [0])  # zero length
    expect_error("OutOfRange", engine.transfer_sync, seg, W, [local.ctypes.data],
                 [peer.addr("numpy", peer.size - 8)], [4096])  # past the peer's buffer
    expect_error("NotFound", engine.unregister_memory, stray)
    expect_error("NotFound", engine.free_local_memory, stray.ctypes.data)
    expect_error("InvalidArgument", engine.register_memory, local, local.nbytes + 1)


def test_unknown_segments_batches_and_tasks(engine, seg, peer, local):
    expect_error("Unavailable", engine.open_segment, "127.0.0.1:1")
    expect_error("InvalidArgument", engine.open_segment, "no-port")
    expect_error("NotFound", engine.segment_buffers, 987654)
    expect_error("NotFound", engine.close_segment, 987654)
    expect_error("NotFound", engine.transfer_sync, 987654, W, [local.ctypes.data], [1], [1])
    expect_error("NotFound", engine.get_transfer_status, 987654, 0)
    expect_error("NotFound", engine.wait_batch, 987654, 1)
    expect_error("NotFound", engine.free_batch, 987654)
    batch = engine.allocate_batch(1)
    expect_error("OutOfRange", engine.get_transfer_status, batch, 5)
    expect_error("OutOfRange", engine.cancel, batch, 0)
    expect_error("InvalidArgument", engine.submit, batch, [tent.Request(W, 1, seg, 1, 1)] * 2)
    engine.free_batch(batch)
    expect_error("InvalidArgument", engine.allocate_batch, 0)
    expect_error("InvalidArgument", engine.allocate_batch, 1 << 40)


def test_a_closed_engine_refuses_every_call():
    e = tent.TransferEngine(config())
    addr = e.allocate_local_memory(4096)
    e.close()
    e.close()  # idempotent
    calls = [
        lambda: e.segment_name, lambda: e.stats(), lambda: e.open_segment("127.0.0.1:1"),
        lambda: e.allocate_local_memory(4096), lambda: e.free_local_memory(addr),
        lambda: e.allocate_batch(1), lambda: e.wait_batch(1, 1),
        lambda: e.transfer_sync(0, W, [addr], [addr], [8]),
    ]
    for call in calls:
        err = expect_error("FailedPrecondition", call)
        assert "closed" in err.message
