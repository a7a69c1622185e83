"""Bulk descriptors from numpy columns: a 10,000-descriptor batch scattered over
the peer's buffer, written and read back, and the column forms accepted."""

import time

import numpy as np
import pytest

import tent
from conftest import pattern, sha

W, R = tent.OpCode.WRITE, tent.OpCode.READ
ROWS, BLOCK = 10_000, 512


def scattered(peer, name, seed):
    """A permutation of ROWS block ids of the peer's buffer: remote addresses."""
    ids = np.random.default_rng(seed).permutation(ROWS).astype(np.uint64)
    return np.uint64(peer.addr(name)) + ids * np.uint64(BLOCK), ids


def test_ten_thousand_descriptors_write_and_read_back(engine, seg, peer, local):
    src = local[: ROWS * BLOCK]
    src[:] = pattern(ROWS * BLOCK, 21)
    local_addrs = np.uint64(src.ctypes.data) + np.arange(ROWS, dtype=np.uint64) * np.uint64(BLOCK)
    remote, ids = scattered(peer, "numpy", 1)
    lengths = np.full(ROWS, BLOCK, dtype=np.uint64)

    t0 = time.perf_counter()
    batch = engine.transfer_async(seg, W, local_addrs, remote, lengths)
    submit_ms = (time.perf_counter() - t0) * 1e3
    assert engine.wait_batch(batch, 60) == (tent.TransferState.COMPLETED, ROWS * BLOCK)
    engine.free_batch(batch)
    print(f"\n10,000-descriptor batch: transfer_async (submit) {submit_ms:.2f} ms")

    # The peer holds block i of src at block ids[i].
    expect = np.empty_like(src)
    expect.reshape(ROWS, BLOCK)[ids.astype(np.int64)] = src.reshape(ROWS, BLOCK)
    assert peer.sum("numpy", 0, ROWS * BLOCK) == sha(expect)

    dst = local[8 << 20: (8 << 20) + ROWS * BLOCK]
    dst[:] = 0
    dst_addrs = np.uint64(dst.ctypes.data) + np.arange(ROWS, dtype=np.uint64) * np.uint64(BLOCK)
    assert engine.transfer_sync(seg, R, dst_addrs, remote, BLOCK, timeout_s=60) == ROWS * BLOCK
    assert np.array_equal(dst, src)


@pytest.mark.parametrize("form", ["list", "int64", "strided", "scalar_length"])
def test_column_forms(engine, seg, peer, local, form):
    n, size = 8, 4096
    src = local[: n * size]
    src[:] = pattern(n * size, 30)
    base = np.arange(n, dtype=np.uint64) * np.uint64(size)
    local_addrs = np.uint64(src.ctypes.data) + base
    remote = np.uint64(peer.addr("alloc")) + base
    lengths = [size] * n
    if form == "list":
        local_addrs, remote = [int(a) for a in local_addrs], [int(a) for a in remote]
    elif form == "int64":
        local_addrs, remote = local_addrs.astype(np.int64), remote.astype(np.int64)
    elif form == "strided":  # a non-contiguous view is copied, not misread
        local_addrs = np.repeat(local_addrs, 2)[::2]
    else:
        lengths = size
    assert engine.transfer_sync(peer.segment, W, local_addrs, remote, lengths) == n * size
    assert peer.sum("alloc", 0, n * size) == sha(src)
