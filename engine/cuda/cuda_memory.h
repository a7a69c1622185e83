// GPU memory through the active driver table (cuda_driver.h): what a pointer is,
// where its physical allocations begin and end, the GPUs the driver sees, and the
// device memory the engine allocates itself. Control path; every call returns
// Status / Result with a message naming what is missing or wrong.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda/cuda_api.h"
#include "tent/status.h"

namespace tent::cuda {

enum class MemoryKind : uint8_t {
  kHost = 0,     // pageable or pinned host memory, or no CUDA in this process
  kDevice = 1,   // device memory of one GPU (cuMemAlloc, or a VMM mapping)
  kManaged = 2,  // CUDA managed (unified) memory: migrates, no NIC can pin it
};

// What the driver says about one address.
struct PointerInfo {
  MemoryKind kind = MemoryKind::kHost;
  int device = -1;          // CUDA ordinal in this process (kDevice)
  uint64_t range_base = 0;  // the physical allocation holding the address
  uint64_t range_size = 0;  // (cuMemGetAddressRange: a cuMemAlloc block, or one VMM chunk)
  bool legacy_ipc = false;  // cuIpcGetMemHandle works on it (cuMemAlloc memory)
  int handle_types = 0;     // VMM: the CU_MEM_HANDLE_TYPE_* bits it was created with
};

// Host memory when CUDA is not loaded or not initialised in this process (no device
// memory can exist then); never initialises CUDA itself.
Result<PointerInfo> classify(const void* addr);

// A piece of a range that lies inside one physical allocation.
struct Chunk {
  uint64_t addr = 0;
  uint64_t length = 0;
  PointerInfo info;
};
// Splits [addr, addr+length) where its physical allocations end: a VMM range made of
// several chunks (PyTorch's expandable segments) gives one piece per chunk, because a
// NIC registration or an IPC export covers one physical allocation. Host memory is one
// piece. A range that mixes host and device memory, runs into unmapped addresses or
// needs more than `max_chunks` pieces: InvalidArgument.
Result<std::vector<Chunk>> chunksOf(const void* addr, size_t length, size_t max_chunks = 4096);

// The GPUs: initialises the driver. Errors name what is missing (no driver library,
// driver without a GPU, no such ordinal).
Result<int> deviceCount();
Status checkDevice(int ordinal);
Result<int> attribute(int ordinal, int attribute);
// "0000:3b:00.0" (lower-case, as the topology spells PCI addresses).
Result<std::string> pciBusId(int ordinal);
Result<CUuuid> uuid(int ordinal);

// "cuda:3" -> 3; "cpu:0", "*" -> -1; "cuda:" or "cuda:x" -> InvalidArgument.
Result<int> parseCudaLocation(const std::string& location);

// Device memory the engine allocates: a VMM allocation exportable as a POSIX file
// descriptor (and GPUDirect-RDMA capable where the GPU says so) when the driver
// supports it, else cuMemAlloc. Holds the GPU's primary context until freed.
struct DeviceAllocation {
  void* ptr = nullptr;
  size_t length = 0;  // asked for
  size_t mapped = 0;  // VMM: rounded up to the allocation granularity
  int device = -1;
  bool vmm = false;
};
Result<DeviceAllocation> allocateDevice(int ordinal, size_t length);
Status freeDevice(const DeviceAllocation& allocation);

// Makes the GPU's primary context current on the calling thread for the lifetime of
// the guard, and restores the previous one after (the application's context stays).
class ScopedContext {
 public:
  static Result<ScopedContext> enter(int ordinal);
  ~ScopedContext();
  ScopedContext(ScopedContext&& other) noexcept;
  ScopedContext& operator=(ScopedContext&&) = delete;
  ScopedContext(const ScopedContext&) = delete;

 private:
  ScopedContext() = default;
  const CudaDriver* d_ = nullptr;
  CUcontext previous_ = nullptr;
  int device_ = -1;
};

}  // namespace tent::cuda
