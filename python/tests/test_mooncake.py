"""tent.mooncake.TransferEngine: every call of Mooncake's Python engine, with its
return codes, against the peer process."""

import socket
import threading

import numpy as np
import pytest

from conftest import config, pattern, sha, slow_fabric
import json

import tent
import tent.mooncake
from tent.mooncake import P2PHANDSHAKE, TransferEngine, TransferOpcode

UNREACHABLE = "127.0.0.1:1"


@pytest.fixture(scope="module")
def mc():
    e = TransferEngine(config())
    assert e.initialize("127.0.0.1", P2PHANDSHAKE, "rdma", "") == 0, e.last_error
    yield e
    e.close()


@pytest.fixture
def managed(mc):
    """Two engine-allocated 1 MiB buffers, as (address, numpy view)."""
    out = []
    for _ in range(2):
        addr = mc.allocate_managed_buffer(1 << 20)
        assert addr != 0
        out.append((addr, np.ctypeslib.as_array((np.ctypeslib.ctypes.c_uint8 * (1 << 20))
                                                .from_address(addr))))
    yield out
    for addr, _ in out:
        assert mc.free_managed_buffer(addr, 1 << 20) == 0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_initialize():
    e = TransferEngine(config())
    assert e.get_rpc_port() == -1  # not initialized
    assert e.initialize("127.0.0.1", "redis://127.0.0.1:6379", "rdma", "") == -1
    assert "P2PHANDSHAKE" in e.last_error and "etcd://" in e.last_error
    assert e.initialize("127.0.0.1", "etcd://", "rdma", "") == -1
    assert "etcd://host:port" in e.last_error
    # As Mooncake's binding: no scheme is etcd, and initialize_ext's type names one.
    assert e.initialize("127.0.0.1", "not-an-endpoint", "rdma", "") == -1
    assert "etcd://host:port" in e.last_error
    assert e.initialize_ext("127.0.0.1", "127.0.0.1:2379", "rdma", "", "redis") == -1
    assert "redis" in e.last_error
    assert e.initialize("127.0.0.1", P2PHANDSHAKE, "ucx", "") == -1
    assert "'tcp'" in e.last_error
    port = free_port()
    assert e.initialize(f"127.0.0.1:{port}", P2PHANDSHAKE, "rdma", "") == 0
    assert e.get_rpc_port() == port
    assert e.get_engine().segment_name == f"127.0.0.1:{port}"
    assert e.initialize("127.0.0.1", P2PHANDSHAKE, "rdma", "") == -1  # already
    e.close()
    named = TransferEngine(config(fabric={"provider": "soft"}))
    assert named.initialize_ext("localhost", P2PHANDSHAKE, "rdma", "mlx5_0, mlx5_1", "p2p") == 0
    assert named.get_engine().stats()["devices"] == ["mlx5_0", "mlx5_1"]
    assert named.get_engine().segment_name == f"localhost:{named.get_rpc_port()}"
    named.close()


def test_initialize_etcd_takes_a_name_without_a_port():
    # etcd mode: the name is only a name; the engine picks its port. Registration is
    # not waited for (no etcd needs to run here: the engine keeps retrying).
    e = TransferEngine(config())
    assert e.initialize("prefill-0", f"etcd://127.0.0.1:{free_port()},127.0.0.1:{free_port()}",
                        "rdma", "") == 0, e.last_error
    assert e.get_engine().segment_name == "prefill-0"
    fleet = e.get_engine().stats()["fleet"]
    assert fleet["backend"] == "etcd"
    # The port the engine picked, as peers dial it (not parsed from the name).
    address = e.get_engine().control_address
    assert address.startswith("127.0.0.1:")
    assert e.get_rpc_port() == int(address.rsplit(":", 1)[1]) > 0
    e.close()


def test_protocol_tcp_selects_the_tcp_provider_and_moves_bytes():
    engines = [TransferEngine(config(fabric={})) for _ in range(2)]
    for e in engines:
        assert e.initialize("127.0.0.1", P2PHANDSHAKE, "tcp", "") == 0, e.last_error
        s = e.get_engine().stats()
        assert s["provider"] == "tcp" and s["devices"] == ["tcp0"], s
        assert s["provider_choice"] == "configured (fabric.provider: tcp)"
    src, dst = (e.allocate_managed_buffer(1 << 20) for e in engines)
    data = bytes(pattern(1 << 20, 7))
    assert engines[0].write_bytes_to_buffer(src, data, len(data)) == 0
    peer = f"127.0.0.1:{engines[1].get_rpc_port()}"
    assert engines[0].transfer_sync_write(peer, src, dst, len(data)) == 0, engines[0].last_error
    assert engines[1].read_bytes_from_buffer(dst, len(data)) == data
    for e in engines:
        e.close()


def test_protocol_rdma_without_an_rdma_device_names_it_and_tcp():
    if _rdma_devices():
        pytest.skip("this host has RDMA devices: " + ", ".join(_rdma_devices()))
    e = TransferEngine(config(fabric={}))
    assert e.initialize("127.0.0.1", P2PHANDSHAKE, "rdma", "mlx5_0") == -1
    assert "mlx5_0" in e.last_error and "tcp" in e.last_error, e.last_error
    assert e.get_engine() is None


def _rdma_devices():
    import os
    path = "/sys/class/infiniband"
    return sorted(os.listdir(path)) if os.path.isdir(path) else []


def test_buffer_io(mc, managed):
    (addr, view), _ = managed
    data = bytes(pattern(1000, 1))
    assert mc.write_bytes_to_buffer(addr + 10, data, len(data)) == 0
    assert mc.read_bytes_from_buffer(addr + 10, len(data)) == data
    assert bytes(view[10:1010]) == data
    stray = np.zeros(64, np.uint8).ctypes.data
    assert mc.write_bytes_to_buffer(stray, data, 64) == -1
    assert mc.write_bytes_to_buffer(addr, data, -1) == -1
    assert mc.write_bytes_to_buffer(addr, 5, 5) == -1
    assert mc.write_bytes_to_buffer(addr, data, len(data) + 1) == -1
    assert mc.write_bytes_to_buffer(addr + (1 << 20) - 4, data, 8) == -1  # past the end
    assert mc.read_bytes_from_buffer(stray, 64) == b""


def test_sync_transfers(mc, managed, peer):
    (src, src_view), (dst, dst_view) = managed
    remote = peer.addr("numpy", 2 << 20)
    for n in (1, 4096, 1 << 20):
        src_view[:n] = pattern(n, n)
        assert mc.transfer_sync_write(peer.segment, src, remote, n) == 0
        assert peer.sum("numpy", 2 << 20, n) == sha(src_view[:n])
        dst_view[:n] = 0
        assert mc.transfer_sync_read(peer.segment, dst, remote, n) == 0
        assert np.array_equal(src_view[:n], dst_view[:n])
    src_view[:4096] = pattern(4096, 77)
    assert mc.transfer_sync(peer.segment, src, remote, 4096, TransferOpcode.WRITE) == 0
    assert peer.sum("numpy", 2 << 20, 4096) == sha(src_view[:4096])
    assert mc.transfer_sync(peer.segment, src, remote, 4096, TransferOpcode.WRITE,
                            notify=object()) == -1  # notify= takes a TransferNotify


def test_intent_and_deadline_keywords(mc, managed, peer):
    (src, view), _ = managed
    before = mc.get_engine().stats()["direct"]["attempted"]
    view[:4096] = pattern(4096, 8)
    assert mc.transfer_sync_write(peer.segment, src, peer.addr("alloc"), 4096,
                                  intent="foreground_get") == 0
    assert mc.transfer_sync_write(peer.segment, src, peer.addr("alloc"), 4096,
                                  deadline_us=5_000_000) == 0
    assert peer.sum("alloc", 0, 4096) == sha(view[:4096])
    assert mc.get_engine().stats()["direct"]["attempted"] >= before + 2
    assert mc.transfer_sync_write(peer.segment, src, peer.addr("alloc"), 4096,
                                  intent="urgent") == -1


def test_registration_and_batches(mc, peer):
    blocks = [np.zeros(256 << 10, np.uint8) for _ in range(4)]
    addrs = [b.ctypes.data for b in blocks]
    lengths = [b.nbytes for b in blocks]
    assert mc.batch_register_memory(addrs, lengths) == 0
    assert mc.batch_register_memory(addrs, lengths) == -1  # already registered
    remote = [peer.addr("alloc", 4 << 20) + i * (256 << 10) for i in range(4)]
    for i, b in enumerate(blocks):
        b[:] = pattern(b.nbytes, 50 + i)
    assert mc.batch_transfer_sync_write(peer.segment, addrs, remote, lengths) == 0
    assert peer.sum("alloc", 4 << 20, 1 << 20) == sha(np.concatenate(blocks))
    expect = [b.copy() for b in blocks]
    for b in blocks:
        b[:] = 0
    assert mc.batch_transfer_sync_read(peer.segment, addrs, remote, lengths) == 0
    assert all(np.array_equal(a, b) for a, b in zip(blocks, expect))
    assert mc.batch_transfer_sync(peer.segment, addrs, remote, lengths, TransferOpcode.READ) == 0

    handle = mc.batch_transfer_async_write(peer.segment, addrs[:2], remote[2:], lengths[:2])
    other = mc.batch_transfer_async_read(peer.segment, addrs[2:], remote[:2], lengths[2:])
    assert handle > 0 and other > 0 and handle != other
    assert mc.get_batch_transfer_status([handle, other]) == 0
    assert np.array_equal(blocks[2], expect[0]) and np.array_equal(blocks[3], expect[1])
    assert peer.sum("alloc", (4 << 20) + (512 << 10), 512 << 10) == sha(
        np.concatenate(blocks[:2]))
    assert mc.get_batch_transfer_status([handle]) == -1  # already waited for and freed
    third = mc.batch_transfer_async(peer.segment, addrs, remote, lengths, TransferOpcode.WRITE)
    assert mc.get_batch_transfer_status([third]) == 0

    assert mc.batch_unregister_memory(addrs) == 0
    assert mc.batch_unregister_memory(addrs) == -1
    assert mc.batch_transfer_sync_write(peer.segment, addrs, remote, lengths) == -1
    assert mc.register_memory(addrs[0], lengths[0]) == 0
    assert mc.unregister_memory(addrs[0]) == 0
    assert mc.unregister_memory(addrs[0]) == -1


def test_submit_and_check_status(mc, managed, peer):
    (src, view), _ = managed
    view[:65536] = pattern(65536, 9)
    handle = mc.transfer_submit_write(peer.segment, src, peer.addr("numpy"), 65536)
    assert handle > 0
    status = 0
    for _ in range(1_000_000):  # bounded poll, as Mooncake's callers do
        status = mc.transfer_check_status(handle)
        if status != 0:
            break
    assert status == 1
    assert peer.sum("numpy", 0, 65536) == sha(view[:65536])
    assert mc.transfer_check_status(handle) == -1  # finished: forgotten


def test_check_status_of_a_timed_out_task(peer):
    # A WRITE modeled to take ~0.8 s against a 1 ms worker slice timeout: TIMEOUT.
    slow = TransferEngine(config(fabric=slow_fabric(0.01), workers={"slice_timeout_ms": 1}))
    assert slow.initialize("127.0.0.1", P2PHANDSHAKE, "rdma", "") == 0, slow.last_error
    src = slow.allocate_managed_buffer(1 << 20)
    handle = slow.transfer_submit_write(peer.segment, src, peer.addr("numpy"), 1 << 20)
    assert handle > 0
    status = 0
    for _ in range(10_000_000):
        status = slow.transfer_check_status(handle)
        if status != 0:
            break
    assert status == -2
    slow.close()


def test_failures_return_mooncake_codes(mc, managed, peer):
    (src, _), _ = managed
    assert mc.transfer_sync_write(UNREACHABLE, src, 0, 8) == -1
    assert mc.batch_transfer_async_write(UNREACHABLE, [src], [0], [8]) == 0
    assert mc.transfer_submit_write(UNREACHABLE, src, 0, 8) == 0  # Mooncake: 0, no batch
    assert mc.get_batch_transfer_status([123456]) == -1
    assert mc.transfer_check_status(123456) == -1
    stray = np.zeros(4096, np.uint8).ctypes.data
    assert mc.transfer_sync_write(peer.segment, stray, peer.addr("numpy"), 4096) == -1
    assert mc.transfer_sync_write(peer.segment, src, peer.addr("readonly"), 4096) == -1
    assert mc.batch_transfer_sync_write(peer.segment, "abc", [1], [1]) == -1
    assert mc.batch_transfer_sync_write(peer.segment, [src], [1, 2], [8]) == -1
    assert mc.batch_transfer_async_read(peer.segment, [src], [peer.addr("numpy")], ["x"]) == 0
    assert mc.register_memory("addr", 10) == -1
    assert mc.batch_register_memory([src], [1, 2]) == -1
    assert mc.free_managed_buffer(stray, 4096) == -1
    assert mc.allocate_managed_buffer(-1) == 0


def test_first_buffer_address_and_probe(mc, managed, peer):
    (src, view), _ = managed
    first = mc.get_first_buffer_address(peer.segment)
    native = mc.get_engine()
    assert first == native.segment_buffers(native.open_segment(peer.segment))[0]["addr"]
    assert first == peer.addr("alloc")  # the peer registered it first
    assert mc.get_first_buffer_address(UNREACHABLE) == 0
    assert mc.send_probe(peer.segment) == 0
    view[:4096] = pattern(4096, 12)
    assert mc.transfer_sync_write(peer.segment, src, peer.addr("alloc"), 4096) == 0
    assert peer.sum("alloc", 0, 4096) == sha(view[:4096])
    assert mc.send_probe(UNREACHABLE) != 0


def test_ten_sender_threads(mc, peer):
    """About ten sender threads, as vLLM's and SGLang's connectors run them."""
    region, errors = 128 << 10, []
    bufs = [np.zeros(region, np.uint8) for _ in range(10)]
    assert mc.batch_register_memory([b.ctypes.data for b in bufs], [region] * 10) == 0

    def sender(t):
        for r in range(6):
            bufs[t][:] = pattern(region, 100 * t + r)
            half = region // 2
            rc = mc.batch_transfer_sync_write(
                peer.segment, [bufs[t].ctypes.data, bufs[t].ctypes.data + half],
                [peer.addr("numpy", t * region), peer.addr("numpy", t * region + half)],
                [half, half])
            if rc != 0:
                errors.append(f"thread {t} round {r}: {rc} {mc.last_error}")

    pool = [threading.Thread(target=sender, args=(t,)) for t in range(10)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    assert errors == []
    assert peer.sum("numpy", 0, 10 * region) == sha(np.concatenate(bufs))
    assert mc.batch_unregister_memory([b.ctypes.data for b in bufs]) == 0


def test_opcode_spellings_as_mooncake_binding(mc, managed, peer):
    # Mooncake: TransferOpcode.Read/.Write, the class attribute TransferEngine.TransferOpcode
    # (FlexKV: engine.TransferOpcode.Write) and the values exported at module level.
    assert TransferOpcode.Write == tent.OpCode.WRITE and TransferOpcode.Read == tent.OpCode.READ
    assert TransferOpcode.WRITE == TransferOpcode.Write
    assert TransferEngine.TransferOpcode is TransferOpcode
    assert mc.TransferOpcode.Write == tent.OpCode.WRITE
    assert tent.mooncake.Write == TransferOpcode.Write and tent.mooncake.Read == TransferOpcode.Read
    (src, view), (dst, dst_view) = managed
    view[:8192] = pattern(8192, 31)
    assert mc.transfer_sync(peer.segment, src, peer.addr("numpy"), 8192,
                            mc.TransferOpcode.Write) == 0
    assert mc.transfer_sync(peer.segment, dst, peer.addr("numpy"), 8192, TransferOpcode.Read) == 0
    assert sha(dst_view[:8192]) == sha(view[:8192]) == peer.sum("numpy", 0, 8192)


def test_first_buffer_address_is_the_first_registered(mc):
    # Registered high address first, then a lower one: Mooncake answers the first.
    a, b = np.zeros(8192, np.uint8), np.zeros(8192, np.uint8)
    low, high = sorted([a, b], key=lambda x: x.ctypes.data)
    fresh = TransferEngine(config())
    assert fresh.initialize("127.0.0.1", P2PHANDSHAKE, "rdma", "") == 0, fresh.last_error
    me = fresh.get_engine().segment_name
    assert fresh.register_memory(high.ctypes.data, high.nbytes) == 0
    assert fresh.register_memory(low, None) == 0  # a numpy array, as tent allows
    assert fresh.get_first_buffer_address(me) == high.ctypes.data
    assert fresh.unregister_memory(high.ctypes.data) == 0
    assert fresh.get_first_buffer_address(me) == low.ctypes.data
    assert fresh.unregister_memory(low) == 0
    fresh.close()


def test_local_topology_has_mooncakes_json_shape(mc):
    topo = json.loads(mc.get_local_topology())
    assert topo, "at least cpu:0"
    for key, entry in topo.items():
        assert key.startswith("cpu:") and key[4:].isdigit(), key
        assert isinstance(entry, list) and len(entry) == 2, entry
        preferred, available = entry
        assert all(isinstance(d, str) for d in preferred + available)
        assert not set(preferred) & set(available)
    assert TransferEngine().get_local_topology("no_such_device") == json.dumps(
        {k: [[], []] for k in topo})
