// GPU memory in the soft provider (private to engine/fabric/soft): how a registration
// of device memory is shared with peers, how a peer's is opened here (once per
// registration), and the per-QP copy lane that moves the bytes with the CUDA driver.
//
//   owner (registerGpuMemory)              peer (first WR to that rkey)
//   cuMemAlloc memory: cuIpcGetMemHandle  -> cuIpcOpenMemHandle
//   VMM memory with a POSIX-fd handle:
//     cuMemExportToShareableHandle (fd)   -> pidfd_getfd (ptrace permission, like
//                                            process_vm_*), cuMemImportFromShareableHandle,
//                                            reserve, map, set access
//   other device memory                   -> reachable in its own process only
//
// A WR that touches device memory on either side is a cuMemcpyAsync per SGE on its
// QP's lane (a CUDA stream of the engine, created at the QP's first such WR) and a
// host function behind them that counts the WR done; its completion is not visible
// before that count reaches it, however early the link model would show it.
#pragma once

#include <atomic>
#include <cstdint>

#include "cuda/cuda_api.h"
#include "fabric/fabric.h"

namespace tent::fabric::soft {

struct ProviderCore;

// How a peer reaches a registration of device memory (MrEntry::gpu_share).
enum GpuShare : uint32_t {
  kGpuNone = 0,       // host memory
  kGpuLocal = 1,      // device memory its owner cannot share: its own process only
  kGpuLegacyIpc = 2,  // cuMemAlloc memory: a CUipcMemHandle
  kGpuVmmFd = 3,      // VMM memory: a POSIX file descriptor in the owner's process
};

// The copy engine of one QP: a stream in a GPU's primary context, and how many of
// the WRs posted on it have finished (written by the host function behind them).
class GpuLane {
 public:
  // Creates the stream on GPU `device` (a CUDA ordinal of this process); nullptr when
  // the driver refuses (logged at debug).
  static GpuLane* create(ProviderCore& core, int device) noexcept;
  static void destroy(GpuLane* lane) noexcept;  // waits for its copies first

  // Queues one copy per iovec between `remote` (the remote range as this process
  // sees it) and the local SGEs, then the host function. Returns the WR's sequence
  // number: done() reaches it once the copies queued are over (0: nothing to wait
  // for). `*ok` is false when the driver refused a step: the WR failed.
  uint64_t copy(WrOpcode op, const struct iovec* iov, uint32_t n, uint8_t* remote,
                bool* ok) noexcept;
  bool done(uint64_t seq) const noexcept {
    return seq == 0 || done_.load(std::memory_order_acquire) >= seq;
  }
  int device() const noexcept { return device_; }
  void synchronize() noexcept;

 private:
  GpuLane() = default;
  static void onDone(void* lane) noexcept;

  ProviderCore* core_ = nullptr;
  const cuda::CudaDriver* d_ = nullptr;
  int device_ = -1;
  cuda::CUcontext ctx_ = nullptr;
  cuda::CUstream stream_ = nullptr;
  uint64_t issued_ = 0;  // the QP's poster only
  std::atomic<uint64_t> done_{0};
};

struct GpuLaneDeleter {
  void operator()(GpuLane* lane) const noexcept { GpuLane::destroy(lane); }
};

// A peer's registration of device memory, opened in this process.
struct GpuImport {
  uint64_t export_id = 0;      // the owner's id of the registration; 0 = free entry
  const void* view = nullptr;  // the peer device's control file it was found in
  uint32_t slot = 0;           // and its MR slot there
  uint32_t share = kGpuNone;
  uint64_t owner_base = 0;  // the physical allocation, in the owner's address space
  uint64_t size = 0;
  uint8_t* local_base = nullptr;                  // the same allocation here
  int device = -1;                                // the CUDA ordinal of its GPU in this process
  cuda::CUmemGenericAllocationHandle handle = 0;  // kGpuVmmFd: the imported allocation
};

}  // namespace tent::fabric::soft
