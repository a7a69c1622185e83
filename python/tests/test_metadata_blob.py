"""The metadata blob between two processes (issue 25): the peer's local_metadata()
crosses a pipe (a serving stack's own side channel), add_remote_metadata opens the
segment from it, and no descriptor is fetched from the peer's control port."""

import os
import tempfile

import numpy as np
import pytest

import tent
from conftest import Peer, config, pattern, sha

W, R = tent.OpCode.WRITE, tent.OpCode.READ


@pytest.fixture(scope="module")
def auth():
    fd, path = tempfile.mkstemp(prefix="tent-py-blob-secret-")
    os.write(fd, b"p" * 64)
    os.close(fd)
    os.chmod(path, 0o600)
    bootstrap = dict(config()["bootstrap"], auth={"secret_file": path})
    yield config(bootstrap=bootstrap)
    os.unlink(path)


def test_blob_round_trip_between_processes(auth):
    size = 1 << 20
    peer = Peer(auth, size)
    try:
        with tent.TransferEngine(auth) as engine:
            blob = bytes.fromhex(peer.command("metadata"))
            fetches = engine.stats()["control"]["descriptor_fetches"]
            seg = engine.add_remote_metadata(blob)
            addrs = {b["addr"] for b in engine.segment_buffers(seg)}
            assert addrs == {peer.addr(n) for n in ("alloc", "numpy", "readonly")}
            local = np.zeros(size, dtype=np.uint8)
            engine.register_memory(local)
            # READ the peer's pattern of "alloc" (seed 0), then WRITE a new one and check
            # it with the peer's own checksum and by reading it back.
            assert engine.transfer_sync(seg, R, [local.ctypes.data], [peer.addr("alloc")],
                                        [size]) == size
            assert np.array_equal(local, pattern(size, 0))
            local[:] = pattern(size, 99)
            assert engine.transfer_sync(seg, W, [local.ctypes.data], [peer.addr("numpy")],
                                        [size]) == size
            assert peer.sum("numpy", 0, size) == sha(local)
            back = np.zeros(size, dtype=np.uint8)
            engine.register_memory(back)
            assert engine.transfer_sync(seg, R, [back.ctypes.data], [peer.addr("numpy")],
                                        [size]) == size
            assert np.array_equal(back, local)
            stats = engine.stats()
            assert stats["control"]["descriptor_fetches"] == fetches
            assert stats["fleet"]["blobs_added"] == 1
            engine.unregister_memory(back)
            engine.unregister_memory(local)
    finally:
        assert peer.stop() == 0


def test_blob_signed_with_another_secret_is_refused(auth):
    peer = Peer(auth, 1 << 16)
    try:
        with tent.TransferEngine(config()) as engine:  # no secret: cannot verify the tag
            blob = bytes.fromhex(peer.command("metadata"))
            with pytest.raises(tent.Error):
                engine.add_remote_metadata(blob[:-1])
    finally:
        assert peer.stop() == 0
