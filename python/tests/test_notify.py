"""Notifications from Python: notify= on transfer_sync / transfer_async (the target
receives the message only after every byte landed, and checks them on receipt),
send_notification / get_notifications / wait_notifications (the wait releases the
GIL), and tent.mooncake's TransferNotify / get_notifies in Mooncake's shapes."""

import json
import threading
import time

import numpy as np
import pytest

from conftest import config, pattern, sha

import tent
from tent.mooncake import P2PHANDSHAKE, TransferEngine, TransferNotify, TransferOpcode


def test_transfer_sync_with_notify_arrives_after_every_byte(engine, peer, local):
    n = 1 << 20
    for round_ in range(3):
        local[:n] = pattern(n, 100 + round_)
        addrs = np.arange(16, dtype=np.uint64) * (n // 16)
        engine.transfer_sync(peer.segment, tent.OpCode.WRITE, local.ctypes.data + addrs,
                             peer.addr("numpy") + addrs, n // 16, notify=f"round {round_}")
        got = json.loads(peer.command("note", "numpy", 0, n))
        assert got["name"] == engine.segment_name
        assert bytes.fromhex(got["msg"]) == f"round {round_}".encode()
        assert got["sum"] == sha(local[:n])  # every byte was there on receipt
    assert engine.stats()["notify"]["sent"] >= 3


def test_transfer_async_with_notify_is_sent_by_the_wait(engine, peer, local):
    local[:4096] = pattern(4096, 7)
    batch = engine.transfer_async(peer.segment, "write", [local.ctypes.data],
                                  [peer.addr("alloc")], 4096, notify=b"\x00\x01bytes")
    state, _ = engine.wait_batch(batch, 30)
    engine.free_batch(batch)
    assert state == tent.TransferState.COMPLETED
    got = json.loads(peer.command("note", "alloc", 0, 4096))
    assert bytes.fromhex(got["msg"]) == b"\x00\x01bytes"
    assert got["sum"] == sha(local[:4096])


def test_send_and_wait_releases_the_gil(engine, peer):
    got = []
    waiter = threading.Thread(target=lambda: got.extend(engine.wait_notifications(30)))
    waiter.start()
    # The waiter holds no GIL: this thread runs and asks the peer to send.
    assert peer.command("send", engine.segment_name, "hello-from-peer") == "ok"
    waiter.join(60)
    assert not waiter.is_alive()
    assert got == [(peer.segment, b"hello-from-peer")]
    assert engine.get_notifications() == []
    assert engine.wait_notifications(0.05) == []


def test_send_notification_and_errors(engine, peer):
    engine.send_notification(peer.segment, "ping")
    got = json.loads(peer.command("note", "alloc", 0, 1))
    assert bytes.fromhex(got["msg"]) == b"ping"
    with pytest.raises(tent.Error) as e:
        engine.send_notification(peer.segment, "x" * 5000)  # notify.max_message_bytes 4096
    assert e.value.code == "InvalidArgument"
    with pytest.raises(tent.Error) as e:
        engine.send_notification(peer.segment, 42)
    assert e.value.code == "InvalidArgument"


def test_an_engine_without_notifications_refuses_clearly():
    with tent.TransferEngine(config(notify={"enabled": False})) as off:
        with pytest.raises(tent.Error) as e:
            off.send_notification(off.segment_name, "x")
        assert e.value.code == "NotSupported"


def test_mooncake_transfer_notify_and_get_notifies():
    mc = TransferEngine(config())
    assert mc.initialize("127.0.0.1", P2PHANDSHAKE, "rdma", "") == 0, mc.last_error
    try:
        me = f"127.0.0.1:{mc.get_rpc_port()}"
        src = mc.allocate_managed_buffer(1 << 20)
        dst = mc.allocate_managed_buffer(1 << 20)
        data = bytes(pattern(4096, 3))
        assert mc.write_bytes_to_buffer(src, data, 4096) == 0
        note = TransferNotify("req-7", "kv ready")
        assert mc.transfer_sync(me, src, dst, 4096, TransferOpcode.WRITE, notify=note) == 0
        assert mc.batch_transfer_sync(me, [src], [dst + 8192], [4096], TransferOpcode.WRITE,
                                      notify=TransferNotify("req-8", "")) == 0
        got = mc.get_notifies()
        assert got == [TransferNotify("req-7", "kv ready"), TransferNotify("req-8", "")]
        assert mc.read_bytes_from_buffer(dst, 4096) == data
        assert mc.get_notifies() == []
        assert mc.transfer_sync(me, src, dst, 64, TransferOpcode.WRITE, notify="no") == -1
        assert "TransferNotify" in mc.last_error
    finally:
        mc.close()
