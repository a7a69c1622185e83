// GPU memory in the soft provider (soft_gpu.h): registering device memory and
// sharing it, opening a peer's, and the per-QP copy lanes. Everything here is the
// slow path: registration, or the first WR of a QP or of a peer's registration
// (the soft NIC's translation-cache miss), never the steady state of a WR.
#include "fabric/soft/soft_gpu.h"

#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "cuda/cuda_driver.h"
#include "cuda/cuda_memory.h"
#include "fabric/soft/soft_internal.h"
#include "tent/log.h"

namespace tent::fabric::soft {

using namespace tent::cuda;  // the driver's own names read best unqualified here

namespace {

// The GPU of this process with that UUID, or -1 (not visible here).
int ordinalOfUuid(const uint64_t uuid[2]) noexcept {
  auto n = deviceCount();
  if (!n.ok()) return -1;
  for (int i = 0; i < *n; ++i) {
    auto id = cuda::uuid(i);
    if (id.ok() && std::memcmp(id->bytes, uuid, sizeof(id->bytes)) == 0) return i;
  }
  return -1;
}

// What a peer needs to open `gpu` (the physical allocation holding the region).
Status exportGpuMemory(ProviderCore& core, const PointerInfo& gpu, GpuExportRecord* out,
                       int* owned_fd) {
  TENT_ASSIGN_OR_RETURN(const CudaDriver* d, driver());
  TENT_ASSIGN_OR_RETURN(CUuuid id, cuda::uuid(gpu.device));
  TENT_ASSIGN_OR_RETURN(ScopedContext scope, ScopedContext::enter(gpu.device));
  std::memcpy(out->uuid, id.bytes, sizeof(id.bytes));
  out->device = gpu.device;
  out->base = gpu.range_base;
  out->size = gpu.range_size;
  out->export_id = core.next_gpu_export.fetch_add(1, std::memory_order_relaxed);
  out->share = kGpuLocal;
  if (gpu.legacy_ipc) {
    CUipcMemHandle h{};
    const CUresult rc = d->cuIpcGetMemHandle(&h, gpu.range_base);
    if (rc != CUDA_SUCCESS) return Status::IoError("soft: cuIpcGetMemHandle: " + errorText(*d, rc));
    std::memcpy(out->ipc, h.reserved, sizeof(h.reserved));
    out->share = kGpuLegacyIpc;
    return Status::OK();
  }
  if ((gpu.handle_types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) &&
      d->cuMemRetainAllocationHandle && d->cuMemExportToShareableHandle && d->cuMemRelease) {
    CUmemGenericAllocationHandle h = 0;
    CUresult rc = d->cuMemRetainAllocationHandle(&h, reinterpret_cast<void*>(gpu.range_base));
    int fd = -1;
    if (rc == CUDA_SUCCESS) {
      rc = d->cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
      (void)d->cuMemRelease(h);
    }
    if (rc != CUDA_SUCCESS || fd < 0)
      return Status::IoError("soft: exporting VMM memory as a file descriptor: " +
                             errorText(*d, rc));
    out->fd = static_cast<uint32_t>(fd);
    out->share = kGpuVmmFd;
    *owned_fd = fd;
    return Status::OK();
  }
  TENT_INFO(kFabric,
            "soft: device memory at 0x%llx is neither cuMemAlloc memory nor VMM memory with a "
            "file-descriptor handle: peers in other processes cannot reach it",
            static_cast<unsigned long long>(gpu.range_base));
  return Status::OK();
}

// A descriptor of process `pid`, copied into this one (needs ptrace permission over it,
// as process_vm_* does). -1 on failure.
int stealFd(uint32_t pid, uint32_t fd) noexcept {
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0));
  if (pidfd < 0) return -1;
  const int local = static_cast<int>(syscall(SYS_pidfd_getfd, pidfd, static_cast<int>(fd), 0));
  close(pidfd);
  return local;
}

bool sameExport(const ControlView& view, uint32_t key, uint64_t export_id) noexcept {
  GpuExportRecord now;
  return readGpuExport(view, key, &now) && now.export_id == export_id;
}

// Opens the peer's allocation here. False (and nothing held) when it cannot be.
bool openImport(const PeerProcess& peer, const ControlView& view, uint32_t key,
                const GpuExportRecord& rec, GpuImport* out) noexcept {
  auto d = driver();
  if (!d.ok()) return false;
  const int device = ordinalOfUuid(rec.uuid);
  if (device < 0) {
    TENT_DEBUG(kFabric, "soft: a peer's GPU memory is on a GPU this process does not see");
    return false;
  }
  auto scope = ScopedContext::enter(device);
  if (!scope.ok()) return false;
  out->device = device;
  out->owner_base = rec.base;
  out->size = rec.size;
  out->share = rec.share;
  if (rec.share == kGpuLegacyIpc) {
    CUipcMemHandle h{};
    std::memcpy(h.reserved, rec.ipc, sizeof(h.reserved));
    CUdeviceptr p = 0;
    const CUresult rc = (*d)->cuIpcOpenMemHandle(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    if (rc != CUDA_SUCCESS) {
      TENT_DEBUG(kFabric, "soft: cuIpcOpenMemHandle: %s", errorText(**d, rc).c_str());
      return false;
    }
    out->local_base = reinterpret_cast<uint8_t*>(p);
    return true;
  }
  const CudaDriver& x = **d;
  if (rec.share != kGpuVmmFd || !x.cuMemImportFromShareableHandle || !x.cuMemAddressReserve ||
      !x.cuMemMap || !x.cuMemSetAccess)
    return false;
  const int fd = stealFd(peer.pid(), rec.fd);
  // The owner closes its descriptor only after clearing the entry: the registration
  // still being there after the copy proves the descriptor was the right file.
  if (fd < 0 || !sameExport(view, key, rec.export_id)) {
    if (fd >= 0) close(fd);
    return false;
  }
  CUmemGenericAllocationHandle h = 0;
  CUresult rc =
      x.cuMemImportFromShareableHandle(&h, reinterpret_cast<void*>(static_cast<intptr_t>(fd)),
                                       CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  close(fd);
  if (rc != CUDA_SUCCESS) return false;
  CUdeviceptr va = 0;
  rc = x.cuMemAddressReserve(&va, rec.size, 0, 0, 0);
  if (rc == CUDA_SUCCESS) rc = x.cuMemMap(va, rec.size, 0, h, 0);
  const CUmemAccessDesc access{{CU_MEM_LOCATION_TYPE_DEVICE, device},
                               CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  if (rc == CUDA_SUCCESS) rc = x.cuMemSetAccess(va, rec.size, &access, 1);
  if (rc != CUDA_SUCCESS) {
    TENT_DEBUG(kFabric, "soft: mapping a peer's VMM memory: %s", errorText(x, rc).c_str());
    if (va != 0) {
      (void)x.cuMemUnmap(va, rec.size);
      (void)x.cuMemAddressFree(va, rec.size);
    }
    (void)x.cuMemRelease(h);
    return false;
  }
  out->handle = h;
  out->local_base = reinterpret_cast<uint8_t*>(va);
  return true;
}

void closeImport(GpuImport& imp) noexcept {
  auto d = driver();
  if (d.ok() && imp.local_base != nullptr) {
    const auto va = reinterpret_cast<CUdeviceptr>(imp.local_base);
    if (imp.share == kGpuLegacyIpc) {
      (void)(*d)->cuIpcCloseMemHandle(va);
    } else {
      (void)(*d)->cuMemUnmap(va, imp.size);
      (void)(*d)->cuMemAddressFree(va, imp.size);
      (void)(*d)->cuMemRelease(imp.handle);
    }
  }
  imp = GpuImport{};
}

}  // namespace

// ---- registration -----------------------------------------------------------------------

Result<std::unique_ptr<MemoryRegion>> SoftDevice::registerGpuMemory(void* addr, size_t length,
                                                                    uint32_t access,
                                                                    const PointerInfo& gpu) {
  TENT_RETURN_IF_ERROR(checkRegistration(addr, length, access));
  if (gpu.kind != MemoryKind::kDevice)
    return Status::InvalidArgument("soft: registerGpuMemory of memory that is not device memory");
  // No provider is more forgiving than a NIC: where none could reach the GPU's memory,
  // the emulated one does not either.
  TENT_ASSIGN_OR_RETURN(int gdr,
                        attribute(gpu.device, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED));
  if (gdr == 0)
    return Status::FailedPrecondition("soft " + state_->info.name +
                                      ": cuda:" + std::to_string(gpu.device) +
                                      " memory: the GPU does not support GPUDirect RDMA "
                                      "(CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED is 0); "
                                      "no NIC can reach its memory");
  GpuExportRecord rec;
  int owned_fd = -1;
  TENT_RETURN_IF_ERROR(exportGpuMemory(*state_->core, gpu, &rec, &owned_fd));
  MrSnapshot entry;
  entry.addr = reinterpret_cast<uintptr_t>(addr);
  entry.length = length;
  entry.access = access;
  entry.gpu_share = rec.share;
  entry.gpu_device = rec.device;
  entry.gpu_base = rec.base;
  entry.gpu_export = rec.export_id;
  auto mr = publishMr(entry, &rec, owned_fd);
  if (!mr.ok() && owned_fd >= 0) close(owned_fd);
  return mr;
}

// ---- imports -------------------------------------------------------------------------------

const GpuImport* PeerProcess::gpuImport(const ControlView& view, uint32_t key,
                                        const MrSnapshot& mr) noexcept {
  if (!gpu_imports_) return nullptr;
  SpinGuard g(gpu_lock_);
  GpuImport* free_entry = nullptr;
  GpuImport* same_slot = nullptr;
  for (uint32_t i = 0; i < kMaxGpuImports; ++i) {
    GpuImport& e = gpu_imports_[i];
    if (e.export_id == mr.gpu_export && e.view == view.header) return &e;
    if (e.export_id == 0 && free_entry == nullptr) free_entry = &e;
    if (e.export_id != 0 && e.view == view.header && e.slot == mrSlotOf(key)) same_slot = &e;
  }
  // The slot now holds another registration: the one opened here is gone.
  if (same_slot != nullptr) {
    core_.quiesceGpuLanes();  // no copy of ours may still use the mapping
    closeImport(*same_slot);
    free_entry = same_slot;
  }
  if (free_entry == nullptr) {
    TENT_DEBUG(kFabric, "soft: %u GPU registrations of peer %u are open here already",
               kMaxGpuImports, pid_);
    return nullptr;
  }
  GpuExportRecord rec;
  if (!readGpuExport(view, key, &rec) || rec.export_id != mr.gpu_export) return nullptr;
  GpuImport imp;
  if (!openImport(*this, view, key, rec, &imp)) return nullptr;
  imp.export_id = rec.export_id;
  imp.view = view.header;
  imp.slot = mrSlotOf(key);
  *free_entry = imp;
  return free_entry;
}

void PeerProcess::closeGpuImports() noexcept {
  if (!gpu_imports_) return;
  bool any = false;
  for (uint32_t i = 0; i < kMaxGpuImports; ++i) any = any || gpu_imports_[i].export_id != 0;
  if (!any) return;
  core_.quiesceGpuLanes();
  for (uint32_t i = 0; i < kMaxGpuImports; ++i)
    if (gpu_imports_[i].export_id != 0) closeImport(gpu_imports_[i]);
}

// ---- copy lanes ------------------------------------------------------------------------------

GpuLane* GpuLane::create(ProviderCore& core, int device) noexcept {
  auto d = driver();
  if (!d.ok()) return nullptr;
  auto scope = ScopedContext::enter(device);
  if (!scope.ok()) {
    TENT_DEBUG(kFabric, "soft: no copy lane on cuda:%d: %s", device,
               scope.status().toString().c_str());
    return nullptr;
  }
  auto* lane = new (std::nothrow) GpuLane();
  if (lane == nullptr) return nullptr;
  lane->core_ = &core;
  lane->d_ = *d;
  lane->device_ = device;
  CUresult rc = (*d)->cuDevicePrimaryCtxRetain(&lane->ctx_, device);
  if (rc == CUDA_SUCCESS) rc = (*d)->cuStreamCreate(&lane->stream_, CU_STREAM_NON_BLOCKING);
  if (rc != CUDA_SUCCESS) {
    TENT_DEBUG(kFabric, "soft: no copy lane on cuda:%d: %s", device, errorText(**d, rc).c_str());
    if (lane->ctx_ != nullptr) (void)(*d)->cuDevicePrimaryCtxRelease(device);
    delete lane;
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(core.gpu_mutex);
  core.gpu_lanes.push_back(lane);
  return lane;
}

void GpuLane::destroy(GpuLane* lane) noexcept {
  if (lane == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(lane->core_->gpu_mutex);
    auto& lanes = lane->core_->gpu_lanes;
    lanes.erase(std::remove(lanes.begin(), lanes.end(), lane), lanes.end());
  }
  lane->synchronize();  // the host functions behind its copies reference the lane
  (void)lane->d_->cuStreamDestroy(lane->stream_);
  (void)lane->d_->cuDevicePrimaryCtxRelease(lane->device_);
  delete lane;
}

void GpuLane::synchronize() noexcept {
  (void)d_->cuStreamSynchronize(stream_);
}

void ProviderCore::quiesceGpuLanes() noexcept {
  std::lock_guard<std::mutex> lock(gpu_mutex);
  for (GpuLane* lane : gpu_lanes) lane->synchronize();
}

}  // namespace tent::fabric::soft
