// A fake CUDA driver behind the CudaDriver table (engine/cuda/cuda_api.h), the way
// tests/fabric_verbs/fake_verbs.h stands in for libibverbs: no GPU, no CUDA here.
// Its "device memory" is host memory backed by memfd files, so it behaves like the
// real thing where tent cares: pointer classification (device ordinal, allocation
// range, legacy-IPC capability, VMM handle types), VMM ranges made of several
// physical chunks, POSIX-fd export and import, dma-buf export, legacy IPC between
// processes (pidfd_getfd on the exporter's memfd), streams whose copies and host
// functions may wait until the test runs them. Every call that moves or shares
// memory is recorded. One FakeCuda per process at a time; it installs itself as the
// process's driver and uninstalls on destruction.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/cuda_api.h"

namespace tent::cuda::testing {

struct FakeGpuSpec {
  std::string pci = "0000:3b:00.0";  // reported upper-case, as the driver does
  bool vmm = true;                   // VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
  bool posix_fd = true;              // HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED
  bool gdr = true;                   // GPU_DIRECT_RDMA_SUPPORTED (and with VMM)
  bool dma_buf = true;               // DMA_BUF_SUPPORTED
};

struct FakeCudaOptions {
  std::vector<FakeGpuSpec> gpus = {FakeGpuSpec{}};
  int driver_version = 12040;
  bool vmm_entries = true;         // the VMM entry points exist in the table
  bool dmabuf_entry = true;        // cuMemGetHandleForAddressRange exists in the table
  bool host_alloc_entries = true;  // cuMemHostAlloc / cuMemFreeHost exist in the table
  // Copies and host functions queued on a stream run when the test calls runStreams()
  // (or the stream is synchronised), not at once: completion must wait for them.
  bool deferred_streams = false;
  size_t granularity = size_t{2} << 20;  // VMM allocation granularity
  // The application has initialised CUDA (pointer queries answer); false: they return
  // CUDA_ERROR_NOT_INITIALIZED until something calls cuInit.
  bool app_initialised = true;
};

class FakeCuda {
 public:
  struct Copy {
    uint64_t dst = 0;
    uint64_t src = 0;
    size_t bytes = 0;
    bool async = false;
  };
  struct DmabufExport {
    uint64_t ptr = 0;
    size_t size = 0;
    int fd = -1;
  };

  explicit FakeCuda(FakeCudaOptions options = {});
  ~FakeCuda();
  FakeCuda(const FakeCuda&) = delete;
  FakeCuda& operator=(const FakeCuda&) = delete;

  const CudaDriver& table() const noexcept { return table_; }
  const FakeCudaOptions& options() const noexcept { return options_; }

  // ---- what an application (PyTorch) does, outside tent --------------------------
  void* appMalloc(int gpu, size_t length);  // like cudaMalloc: legacy-IPC capable
  void appFree(void* ptr);
  // A reserved range mapped from one physical allocation per chunk (PyTorch's
  // expandable segments); `exportable` asks for POSIX-fd handles.
  void* appVmm(int gpu, const std::vector<size_t>& chunk_sizes, bool exportable = true);
  void appVmmFree(void* ptr);

  // Runs every queued copy and host function (deferred_streams), in stream order.
  void runStreams();
  size_t queuedOps();

  // ---- records and switches ----------------------------------------------------------
  std::vector<Copy> copies();
  std::vector<DmabufExport> dmabufExports();
  std::map<std::string, int> calls();  // entry point -> times called
  int calls(const std::string& name);
  // Objects alive now: allocations (legacy + VMM physical), streams, IPC mappings,
  // primary-context references, exported fds not yet closed by the fake.
  struct Live {
    int allocations = 0;
    int physical = 0;
    int reservations = 0;
    int streams = 0;
    int ipc_mappings = 0;
    int context_refs = 0;
    int pinned_host = 0;  // cuMemHostAlloc allocations not yet freed
  };
  // [addr, addr+bytes) lies inside one live cuMemHostAlloc allocation.
  bool pinnedHost(uint64_t addr, size_t bytes);
  Live live();
  std::atomic<CUresult> fail_dmabuf{CUDA_SUCCESS};      // cuMemGetHandleForAddressRange
  std::atomic<CUresult> fail_alloc{CUDA_SUCCESS};       // cuMemAlloc and cuMemCreate
  std::atomic<CUresult> fail_ipc_open{CUDA_SUCCESS};    // cuIpcOpenMemHandle
  std::atomic<CUresult> fail_memcpy{CUDA_SUCCESS};      // cuMemcpyAsync
  std::atomic<CUresult> fail_host_alloc{CUDA_SUCCESS};  // cuMemHostAlloc

  // ---- the fake's state (fake_cuda.cc, fake_cuda_streams.cc) -----------------------
  struct Region;
  struct Physical;
  struct Stream;
  struct State;
  State& state() noexcept { return *state_; }

 private:
  FakeCudaOptions options_;
  CudaDriver table_{};
  State* state_;
};

// The fake that is installed now (nullptr when none); its functions act on it.
FakeCuda* currentFakeCuda() noexcept;

}  // namespace tent::cuda::testing
