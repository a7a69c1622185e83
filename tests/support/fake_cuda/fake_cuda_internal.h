// The fake CUDA driver's state (fake_cuda.h), shared by its two source files.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "fake_cuda.h"

namespace tent::cuda::testing {

struct FakeCuda::Physical {
  int gpu = 0;
  size_t size = 0;
  int memfd = -1;
  int handle_types = 0;
  int refs = 0;  // mappings and retained handles
  bool released = false;
};

struct FakeCuda::Region {
  enum class Kind { kLegacy, kVmm, kIpc };
  uint64_t base = 0;
  size_t size = 0;
  int gpu = 0;
  Kind kind = Kind::kLegacy;
  int memfd = -1;                         // kLegacy, kIpc: the region's own file
  CUmemGenericAllocationHandle phys = 0;  // kVmm
  uint64_t id = 0;
};

struct FakeCuda::Stream {
  std::deque<std::function<void()>> ops;
};

struct FakeCuda::State {
  std::mutex mu;
  std::map<uint64_t, Region> regions;  // by base
  std::map<CUmemGenericAllocationHandle, Physical> physical;
  std::map<uint64_t, size_t> reservations;  // base -> size
  std::map<uint64_t, size_t> pinned_host;   // cuMemHostAlloc: base -> size
  std::set<Stream*> streams;
  std::map<std::string, int> calls;
  std::vector<Copy> copies;
  std::vector<DmabufExport> dmabufs;
  std::vector<int> context_refs;  // per GPU
  std::vector<char> contexts;     // one byte per GPU: its primary context's address
  bool initialised = false;
  CUmemGenericAllocationHandle next_handle = 1;
  uint64_t next_id = 1;

  // Under mu.
  Region* findLocked(uint64_t addr);
  void countLocked(const char* name) { ++calls[name]; }
  void releasePhysicalLocked(CUmemGenericAllocationHandle h);
};

// The installed fake (fake_cuda.cc); the table's functions act on it.
FakeCuda& fake();
// Fills the stream, copy, event and context entries, and the pinned host memory ones
// when `host_alloc` (fake_cuda_streams.cc).
void fillStreamEntries(CudaDriver& table, bool host_alloc);
// Fills the VMM entries (when `vmm`) and the dma-buf export (when `dmabuf`) (fake_cuda_vmm.cc).
void fillVmmEntries(CudaDriver& table, bool vmm, bool dmabuf);
// The GPU of the calling thread's current context, -1 without one. Under State::mu.
int currentGpuLocked();

// Identifies a fake IPC handle: magic, exporter pid, its memfd, size, gpu, id.
struct FakeIpcHandle {
  uint64_t magic;
  int32_t pid;
  int32_t fd;
  uint64_t size;
  int32_t gpu;
  int32_t pad;
  uint64_t id;
};
inline constexpr uint64_t kFakeIpcMagic = 0x4b414654534f4654ull;

}  // namespace tent::cuda::testing
