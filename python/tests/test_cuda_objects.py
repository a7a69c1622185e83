"""register_memory with GPU array objects: __cuda_array_interface__ (cupy, numba,
torch) and data_ptr() (torch) are read for the address and length, and a GPU tensor
registers on its GPU. This machine has no GPU: the fakes below expose host memory,
so without a CUDA driver the engine registers them as host memory, and one that says
it lives on a GPU is refused with the reason. On a GPU machine with torch the last
test registers a real CUDA tensor."""

import numpy as np
import pytest

import tent
from conftest import pattern, sha

W = tent.OpCode.WRITE


class CudaArray:
    """The smallest object with __cuda_array_interface__ (v3), over a numpy array."""

    def __init__(self, array, strides=None, readonly=False, device=None):
        self.array = array
        self.__cuda_array_interface__ = {
            "version": 3,
            "shape": array.shape,
            "typestr": array.dtype.str,
            "data": (array.ctypes.data, readonly),
            "strides": strides,
            "stream": None,
        }
        if device is not None:
            self.device = device


class Device:
    def __init__(self, ident):
        self.id = ident


def local_buffers(engine):
    return {b["addr"]: b for b in engine.segment_buffers(0)}


def test_cuda_array_interface_gives_address_and_length(engine, seg, peer):
    host = np.zeros((256, 1024), dtype=np.float32)  # 1 MiB
    obj = CudaArray(host)
    engine.register_memory(obj)
    try:
        entry = local_buffers(engine)[host.ctypes.data]
        assert entry["length"] == host.nbytes
        assert not entry["location"].startswith("cuda:")  # no CUDA here: host memory
        data = pattern(host.nbytes, 5)
        host.view(np.uint8).reshape(-1)[:] = data
        remote = peer.addr("numpy", 0)
        assert engine.transfer_sync(seg, W, [host.ctypes.data], [remote], [host.nbytes]) == host.nbytes
        assert peer.sum("numpy", 0, host.nbytes) == sha(data)
    finally:
        engine.unregister_memory(obj)
    assert host.ctypes.data not in local_buffers(engine)


def test_an_object_on_a_gpu_is_registered_there_or_refused_with_the_reason(engine):
    host = np.zeros(4096, dtype=np.uint8)
    with pytest.raises(tent.Error) as err:
        engine.register_memory(CudaArray(host, device=Device(0)))
    assert err.value.code == "InvalidArgument"
    assert "cuda:0" in str(err.value) and "host memory" in str(err.value)
    assert host.ctypes.data not in local_buffers(engine)


def test_non_contiguous_and_read_only_arrays_are_refused(engine):
    host = np.zeros((64, 64), dtype=np.uint16)
    with pytest.raises(tent.Error, match="contiguous"):
        engine.register_memory(CudaArray(host, strides=(2, 128)))  # column-major
    with pytest.raises(tent.Error, match="read-only"):
        engine.register_memory(CudaArray(host, readonly=True))
    with pytest.raises(tent.Error, match="typestr"):
        bad = CudaArray(host)
        bad.__cuda_array_interface__["typestr"] = "<f"
        engine.register_memory(bad)


class TensorLike:
    """What register_memory reads of a torch tensor."""

    def __init__(self, array, contiguous=True):
        self.array = array
        self.contiguous = contiguous

    def data_ptr(self):
        return self.array.ctypes.data

    def numel(self):
        return self.array.size

    def element_size(self):
        return self.array.itemsize

    def is_contiguous(self):
        return self.contiguous


def test_a_non_contiguous_tensor_is_refused(engine):
    host = np.zeros(1024, dtype=np.float64)
    with pytest.raises(tent.Error, match="contiguous"):
        engine.register_memory(TensorLike(host, contiguous=False))
    engine.register_memory(TensorLike(host))
    assert local_buffers(engine)[host.ctypes.data]["length"] == host.nbytes
    engine.unregister_memory(host.ctypes.data)


def test_a_cuda_tensor_registers_on_its_gpu(engine):
    torch = pytest.importorskip("torch", reason="torch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU: the fakes above cover the argument handling")
    t = torch.zeros(1 << 20, dtype=torch.uint8, device="cuda:0")
    engine.register_memory(t)
    try:
        assert local_buffers(engine)[t.data_ptr()]["location"].startswith("cuda:")
    finally:
        engine.unregister_memory(t)
