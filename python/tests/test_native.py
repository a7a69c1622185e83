"""The native API against a peer process: every transfer verifies its bytes, by
reading them back and by the peer's own checksum of its memory."""

import os
import pathlib

import numpy as np
import pytest

import tent
from conftest import config, pattern, sha

W, R = tent.OpCode.WRITE, tent.OpCode.READ


def roundtrip(engine, seg, peer, src, dst, src_addr, dst_addr, remote_name, offset, n):
    """WRITE src -> peer, READ back into dst; both checked byte for byte."""
    src[:n] = pattern(n, offset + n)
    dst[:n] = 0
    remote = peer.addr(remote_name, offset)
    assert engine.transfer_sync(seg, W, [src_addr], [remote], [n]) == n
    assert peer.sum(remote_name, offset, n) == sha(src[:n])
    assert engine.transfer_sync(seg, R, [dst_addr], [remote], [n]) == n
    assert np.array_equal(src[:n], dst[:n])


@pytest.mark.parametrize("remote_name", ["alloc", "numpy"])
def test_int_addresses(engine, seg, peer, remote_name):
    src = engine.allocate_local_memory(1 << 20)
    dst = engine.allocate_local_memory(1 << 20)
    try:
        view = lambda a: np.ctypeslib.as_array((np.ctypeslib.ctypes.c_uint8 * (1 << 20)).from_address(a))
        for n in (1, 4096, 65537, 1 << 20):
            roundtrip(engine, seg, peer, view(src), view(dst), src, dst, remote_name, 4096, n)
    finally:
        engine.free_local_memory(src)
        engine.free_local_memory(dst)


def test_numpy_arrays(engine, seg, peer, local):
    src, dst = local[: 4 << 20], local[4 << 20:]
    for n in (8, 300_000, 4 << 20):
        roundtrip(engine, seg, peer, src, dst, src.ctypes.data, dst.ctypes.data, "numpy", 0, n)


def test_memoryviews_and_bytearrays(engine, seg, peer):
    src, dst = bytearray(1 << 20), memoryview(bytearray(1 << 20))
    engine.register_memory(src)
    engine.register_memory(dst)
    try:
        src_np, dst_np = np.frombuffer(src, np.uint8), np.frombuffer(dst, np.uint8)
        addr = lambda b: np.frombuffer(b, np.uint8).ctypes.data
        roundtrip(engine, seg, peer, src_np, dst_np, addr(src), addr(dst), "alloc", 1 << 20,
                  1 << 20)
        # A Request takes the buffer object itself as its source.
        src_np[:] = pattern(1 << 20, 7)
        batch = engine.allocate_batch(1)
        engine.submit(batch, [tent.Request(W, memoryview(src), seg, peer.addr("alloc"), 1 << 20)])
        assert engine.wait(batch, 0, 30) == (tent.TransferState.COMPLETED, 1 << 20)
        engine.free_batch(batch)
        assert peer.sum("alloc", 0, 1 << 20) == sha(src)
    finally:
        engine.unregister_memory(src)
        engine.unregister_memory(dst)


def test_batch_api_with_requests(engine, seg, peer, local):
    blocks, size = 16, 64 << 10
    local[: blocks * size] = pattern(blocks * size, 11)
    reqs = [tent.Request(W, local.ctypes.data + i * size, seg, peer.addr("numpy", i * size), size,
                         intent=tent.Intent.MIGRATION) for i in range(blocks)]
    assert reqs[3].length == size and reqs[3].intent == tent.Intent.MIGRATION
    assert "WRITE" in repr(reqs[0])
    batch = engine.allocate_batch(blocks)
    engine.submit(batch, reqs[:10])
    engine.submit(batch, reqs[10:])  # task ids continue
    assert engine.wait_batch(batch, 30) == (tent.TransferState.COMPLETED, blocks * size)
    for i in range(blocks):
        assert engine.get_transfer_status(batch, i) == (tent.TransferState.COMPLETED, size)
    assert engine.get_batch_status(batch) == (tent.TransferState.COMPLETED, blocks * size)
    engine.free_batch(batch)
    assert peer.sum("numpy", 0, blocks * size) == sha(local[: blocks * size])


def test_foreground_takes_the_direct_path(engine, seg, peer, local):
    before = engine.stats()["direct"]["succeeded"]
    local[:4096] = pattern(4096, 5)
    engine.transfer_sync(peer.segment, W, [local.ctypes.data], [peer.addr("alloc")], 4096,
                         intent=tent.Intent.FOREGROUND_GET)
    assert peer.sum("alloc", 0, 4096) == sha(local[:4096])
    # The direct path served it, or fell back for a counted reason.
    direct = engine.stats()["direct"]
    assert direct["attempted"] > 0
    assert direct["succeeded"] > before or direct["fallback_endpoint_not_ready"] > 0


def test_deadline_us_is_relative(engine, seg, peer, local):
    local[:4096] = pattern(4096, 6)
    assert engine.transfer_sync(seg, W, [local.ctypes.data], [peer.addr("numpy")], [4096],
                                deadline_us=10_000_000) == 4096
    assert peer.sum("numpy", 0, 4096) == sha(local[:4096])


def test_read_only_buffer_refuses_writes(engine, seg, peer, local):
    n = 64 << 10
    assert engine.transfer_sync(seg, R, [local.ctypes.data], [peer.addr("readonly")], [n]) == n
    assert peer.sum("readonly", 0, n) == sha(local[:n])
    with pytest.raises(tent.Error) as e:
        engine.transfer_sync(seg, W, [local.ctypes.data], [peer.addr("readonly", 4096)], [n])
    # Refused before anything is posted, naming the range, the buffer and its access.
    assert e.value.code == "PermissionDenied"
    assert f"WRITE to target [{peer.addr('readonly', 4096):#x}, +{n})" in e.value.message
    assert "remote access error" in e.value.message
    assert "'readonly'" in e.value.message and "read-only (access r)" in e.value.message
    assert peer.sum("readonly", 0, n) == sha(local[:n])  # unchanged


def test_segment_buffers(engine, seg, peer):
    bufs = engine.segment_buffers(seg)
    # Registration order, whatever the addresses: the peer registered alloc, numpy, readonly.
    assert [b["name"] for b in bufs] == ["alloc", "numpy", "readonly"]
    assert [b["addr"] for b in bufs] == [peer.addr(n) for n in ("alloc", "numpy", "readonly")]
    assert [b["access"] for b in bufs] == ["rw", "rw", "r"]
    for b in bufs:
        assert b["length"] == peer.size
        assert isinstance(b["location"], str)
    assert engine.open_segment(peer.segment) == seg  # the same id by name
    assert engine.open_segment(engine.segment_name) == tent.LOCAL_SEGMENT_ID


def test_segment_buffers_come_in_registration_order_not_address_order(engine):
    mem = np.zeros(3 << 16, np.uint8)
    low, mid, high = (mem[i << 16:(i + 1) << 16] for i in range(3))
    engine.register_memory(high, name="high", access="w")
    engine.register_memory(low, name="low")
    engine.register_memory(mid, access="r")  # no name
    try:
        mine = [b for b in engine.segment_buffers(tent.LOCAL_SEGMENT_ID)
                if mem.ctypes.data <= b["addr"] < mem.ctypes.data + mem.nbytes]
        assert [(b["addr"], b["name"], b["access"]) for b in mine] == [
            (high.ctypes.data, "high", "w"), (low.ctypes.data, "low", "rw"),
            (mid.ctypes.data, "", "r")]
        with pytest.raises(tent.Error) as e:
            engine.register_memory(np.zeros(4096, np.uint8), name="x" * 256)
        assert e.value.code == "InvalidArgument" and "at most 255" in e.value.message
    finally:
        for view in (high, low, mid):
            engine.unregister_memory(view)


def test_loopback_within_this_process(engine, local):
    local[: 1 << 20] = pattern(1 << 20, 9)
    dst = local.ctypes.data + (4 << 20)
    assert engine.transfer_sync(tent.LOCAL_SEGMENT_ID, W, [local.ctypes.data], [dst],
                                [1 << 20]) == 1 << 20
    assert np.array_equal(local[: 1 << 20], local[4 << 20: 5 << 20])


def test_cancel_and_get_status(engine, seg, peer, local):
    batch = engine.allocate_batch(2)
    engine.submit(batch, [tent.Request(W, local.ctypes.data, seg, peer.addr("numpy"), 4 << 20)])
    engine.cancel(batch, 0)  # completed or canceled, never left pending
    state, _ = engine.wait(batch, 0, 30)
    assert state in (tent.TransferState.COMPLETED, tent.TransferState.CANCELED)
    engine.free_batch(batch)


def test_stats_has_every_engine_stats_field(engine):
    s = engine.stats()
    counts = tent._tent._stats_field_counts()
    assert len(s) == counts["EngineStats"]
    for section in ("worker", "direct", "deadlines", "resources", "control", "fleet", "notify",
                    "target", "device_events"):
        assert len(s[section]) == counts[section], section
    assert len(s["lcores"][0]) == counts["lcores"]
    assert s["provider"] == "soft" and s["devices"] == ["soft0", "soft1"]
    assert s["bytes_transferred"] > 0 and s["worker"]["tasks"] > 0
    assert isinstance(s["direct"]["latency_histogram_ns"], list)
    assert isinstance(s["bytes_per_device"], dict) and isinstance(s["bytes_per_intent"], list)


def test_config_forms(tmp_path):
    yaml_text = "eal: {mode: manual}\nfabric: {provider: soft, soft: {devices: [{name: m0}]}}\n"
    path = tmp_path / "tent.yaml"
    path.write_text(yaml_text)
    for cfg in (yaml_text, str(path), pathlib.Path(path),
                {"eal": {"mode": "manual"}, "fabric": {"provider": "soft",
                                                       "soft": {"devices": [{"name": "m0"}]}}}):
        with tent.TransferEngine(cfg) as e:
            assert e.stats()["devices"] == ["m0"]
            assert ":" in e.segment_name
        assert e.closed
    with pytest.raises(tent.Error) as err:
        tent.TransferEngine({"workers": {"block_size": "big"}})
    assert err.value.code == "InvalidArgument" and "workers.block_size" in err.value.message
    with pytest.raises(tent.Error) as err:
        tent.TransferEngine(str(tmp_path / "missing.yaml"))
    assert err.value.code == "NotFound"


def test_every_config_failure_is_a_tent_error(tmp_path):
    """Invalid UTF-8 in a config file raised UnicodeDecodeError (the engine's message
    quotes the bad bytes); any config that cannot be used is a tent.Error."""
    bad = {
        "value.yaml": b'bootstrap:\n  advertise_host: "\xff\xfe"\n',
        "key.yaml": b"\xff\xfe: 1\n",
        "binary.yaml": bytes(range(256)) * 4,
    }
    for name, data in bad.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(tent.Error) as err:
            tent.TransferEngine(str(tmp_path / name))
        assert err.value.code == "InvalidArgument", (name, err.value)
    with pytest.raises(tent.Error) as err:  # a device: refused before it is read
        tent.TransferEngine("/dev/zero")
    assert err.value.code == "IoError" and "character device" in err.value.message
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    with pytest.raises(tent.Error) as err:  # returns at once: nobody writes to it
        tent.TransferEngine(fifo)
    assert "FIFO" in err.value.message
    for text in ("\udcff: 1\n", "eal: {mode: \udcff}\n"):  # not encodable as UTF-8
        with pytest.raises(tent.Error) as err:
            tent.TransferEngine(text)
        assert err.value.code == "InvalidArgument"
    with pytest.raises(tent.Error):
        tent.TransferEngine({"eal": {"mode": object()}})  # not JSON
    with pytest.raises(tent.Error):
        tent.TransferEngine(42)


def test_a_config_path_need_not_be_utf8(tmp_path):
    name = os.fsencode(tmp_path) + b"/tent-\xff.yaml"
    try:
        with open(name, "w") as f:
            f.write("eal: {mode: manual}\nfabric: {provider: soft, soft: {devices: [{name: u0}]}}\n")
    except OSError as e:  # a file system that only takes UTF-8 names
        pytest.skip(f"cannot create a non-UTF-8 file name here: {e}")
    with tent.TransferEngine(pathlib.Path(os.fsdecode(name))) as e:
        assert e.stats()["devices"] == ["u0"]


def test_second_engine_in_this_process(engine, local):
    """Own fabric, same lcores: works (and talks to the first); other process-wide
    settings: a clear error."""
    with tent.TransferEngine(config(fabric={"provider": "soft",
                                            "soft": {"devices": [{"name": "other0"}]}})) as other:
        buf = np.zeros(1 << 20, np.uint8)
        other.register_memory(buf)
        local[: 1 << 20] = pattern(1 << 20, 3)
        engine.transfer_sync(other.segment_name, W, [local.ctypes.data], [buf.ctypes.data],
                             [1 << 20])
        assert np.array_equal(buf, local[: 1 << 20])
        assert other.stats()["devices"] == ["other0"]
    idle = config()
    idle["lcores"][0]["idle"]["sleep_max_us"] = 1000
    with pytest.raises(tent.Error) as e:
        tent.TransferEngine(idle)
    assert e.value.code == "FailedPrecondition" and "lcores[0] differs" in e.value.message
    with pytest.raises(tent.Error) as e:
        tent.TransferEngine(config(eal={"mode": "eal", "memory_mb": 128}))
    assert e.value.code == "FailedPrecondition" and "cannot be re-initialised" in e.value.message


def test_metadata_blob(engine):
    blob = engine.local_metadata()
    assert isinstance(blob, bytes) and len(blob) > 0
    # Our own blob names our own segment.
    assert engine.add_remote_metadata(blob) == tent.LOCAL_SEGMENT_ID
    assert engine.add_remote_metadata(bytearray(blob)) == tent.LOCAL_SEGMENT_ID
    with pytest.raises(tent.Error):
        engine.add_remote_metadata(b"not a blob")
    with pytest.raises(TypeError):
        engine.add_remote_metadata("text")
    assert engine.stats()["fleet"]["backend"] == "p2p"
