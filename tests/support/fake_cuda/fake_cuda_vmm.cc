// The fake CUDA driver: virtual memory management (reserve, create, map, export and
// import as POSIX descriptors) and dma-buf export.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "fake_cuda_internal.h"

namespace tent::cuda::testing {

namespace {

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "fake cuda: %s\n", what);
  std::abort();
}

int newMemfd(size_t size) {
  const int fd = memfd_create("tent-fake-gpu", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(size)) != 0) die("memfd_create");
  return fd;
}

const FakeGpuSpec* gpuSpec(int ordinal) {
  const auto& gpus = fake().options().gpus;
  return ordinal >= 0 && static_cast<size_t>(ordinal) < gpus.size() ? &gpus[ordinal] : nullptr;
}

FakeCuda::State& st() {
  return fake().state();
}

#define COUNT(name)                          \
  std::lock_guard<std::mutex> lock(st().mu); \
  st().countLocked(name)

CUresult granularity(size_t* out, const CUmemAllocationProp*, int) {
  *out = fake().options().granularity;
  return CUDA_SUCCESS;
}

CUresult memCreate(CUmemGenericAllocationHandle* out, size_t size, const CUmemAllocationProp* prop,
                   unsigned long long) {
  COUNT("cuMemCreate");
  if (fake().fail_alloc.load() != CUDA_SUCCESS) return fake().fail_alloc.load();
  const FakeGpuSpec* g = gpuSpec(prop->location.id);
  if (!g || size == 0 || size % fake().options().granularity != 0) return CUDA_ERROR_INVALID_VALUE;
  if ((prop->requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) && !g->posix_fd)
    return CUDA_ERROR_NOT_SUPPORTED;
  if (prop->allocFlags.gpuDirectRDMACapable && !(g->gdr && g->vmm)) return CUDA_ERROR_NOT_SUPPORTED;
  FakeCuda::Physical p;
  p.gpu = prop->location.id;
  p.size = size;
  p.memfd = newMemfd(size);
  p.handle_types = prop->requestedHandleTypes;
  p.refs = 1;
  *out = st().next_handle++;
  st().physical[*out] = p;
  return CUDA_SUCCESS;
}

CUresult memRelease(CUmemGenericAllocationHandle h) {
  COUNT("cuMemRelease");
  if (!st().physical.count(h)) return CUDA_ERROR_INVALID_VALUE;
  st().releasePhysicalLocked(h);
  return CUDA_SUCCESS;
}

CUresult addressReserve(CUdeviceptr* out, size_t size, size_t align, CUdeviceptr,
                        unsigned long long) {
  COUNT("cuMemAddressReserve");
  if (align == 0) align = fake().options().granularity;
  void* raw =
      mmap(nullptr, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  const auto begin = reinterpret_cast<uint64_t>(raw);
  const uint64_t base = (begin + align - 1) / align * align;
  if (base > begin) munmap(raw, base - begin);
  if (begin + size + align > base + size)
    munmap(reinterpret_cast<void*>(base + size), begin + size + align - base - size);
  st().reservations[base] = size;
  *out = base;
  return CUDA_SUCCESS;
}

CUresult addressFree(CUdeviceptr ptr, size_t size) {
  COUNT("cuMemAddressFree");
  auto it = st().reservations.find(ptr);
  if (it == st().reservations.end() || it->second != size) return CUDA_ERROR_INVALID_VALUE;
  munmap(reinterpret_cast<void*>(ptr), size);
  st().reservations.erase(it);
  return CUDA_SUCCESS;
}

CUresult memMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle h,
                unsigned long long) {
  COUNT("cuMemMap");
  auto p = st().physical.find(h);
  if (p == st().physical.end() || offset + size > p->second.size) return CUDA_ERROR_INVALID_VALUE;
  bool reserved = false;
  for (const auto& [base, len] : st().reservations)
    reserved = reserved || (ptr >= base && ptr + size <= base + len);
  if (!reserved || st().findLocked(ptr)) return CUDA_ERROR_INVALID_VALUE;
  void* m = mmap(reinterpret_cast<void*>(ptr), size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                 p->second.memfd, static_cast<off_t>(offset));
  if (m == MAP_FAILED) die("mmap (cuMemMap)");
  ++p->second.refs;
  FakeCuda::Region r;
  r.base = ptr;
  r.size = size;
  r.gpu = p->second.gpu;
  r.kind = FakeCuda::Region::Kind::kVmm;
  r.phys = h;
  r.id = st().next_id++;
  st().regions[ptr] = r;
  return CUDA_SUCCESS;
}

CUresult memUnmap(CUdeviceptr ptr, size_t size) {
  COUNT("cuMemUnmap");
  auto it = st().regions.find(ptr);
  if (it == st().regions.end() || it->second.kind != FakeCuda::Region::Kind::kVmm ||
      it->second.size != size)
    return CUDA_ERROR_INVALID_VALUE;
  mmap(reinterpret_cast<void*>(ptr), size, PROT_NONE,
       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
  const CUmemGenericAllocationHandle h = it->second.phys;
  st().regions.erase(it);
  st().releasePhysicalLocked(h);
  return CUDA_SUCCESS;
}

CUresult setAccess(CUdeviceptr ptr, size_t, const CUmemAccessDesc* desc, size_t count) {
  COUNT("cuMemSetAccess");
  if (count == 0 || desc == nullptr || !st().findLocked(ptr)) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

CUresult retainHandle(CUmemGenericAllocationHandle* out, void* addr) {
  COUNT("cuMemRetainAllocationHandle");
  const FakeCuda::Region* r = st().findLocked(reinterpret_cast<uint64_t>(addr));
  if (!r || r->kind != FakeCuda::Region::Kind::kVmm) return CUDA_ERROR_INVALID_VALUE;
  ++st().physical[r->phys].refs;
  *out = r->phys;
  return CUDA_SUCCESS;
}

CUresult exportHandle(void* out, CUmemGenericAllocationHandle h, int type, unsigned long long) {
  COUNT("cuMemExportToShareableHandle");
  auto p = st().physical.find(h);
  if (p == st().physical.end() || type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR ||
      !(p->second.handle_types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
    return CUDA_ERROR_INVALID_VALUE;
  *static_cast<int*>(out) = fcntl(p->second.memfd, F_DUPFD_CLOEXEC, 0);
  return CUDA_SUCCESS;
}

CUresult importHandle(CUmemGenericAllocationHandle* out, void* shareable, int type) {
  COUNT("cuMemImportFromShareableHandle");
  const int fd = static_cast<int>(reinterpret_cast<intptr_t>(shareable));
  struct stat sb {};
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || fstat(fd, &sb) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  FakeCuda::Physical p;
  p.size = static_cast<size_t>(sb.st_size);
  p.memfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  p.handle_types = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  p.refs = 1;
  *out = st().next_handle++;
  st().physical[*out] = p;
  return CUDA_SUCCESS;
}

CUresult dmabufHandle(void* out, CUdeviceptr ptr, size_t size, int type, unsigned long long) {
  COUNT("cuMemGetHandleForAddressRange");
  if (fake().fail_dmabuf.load() != CUDA_SUCCESS) return fake().fail_dmabuf.load();
  const FakeCuda::Region* r = st().findLocked(ptr);
  const long page = sysconf(_SC_PAGESIZE);
  if (!r || type != CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD || ptr % page != 0 || size % page != 0 ||
      size == 0 || ptr + size > r->base + r->size)
    return CUDA_ERROR_INVALID_VALUE;
  if (!gpuSpec(r->gpu)->dma_buf) return CUDA_ERROR_NOT_SUPPORTED;
  const int src = r->kind == FakeCuda::Region::Kind::kVmm ? st().physical[r->phys].memfd : r->memfd;
  const int fd = fcntl(src, F_DUPFD_CLOEXEC, 0);
  st().dmabufs.push_back({ptr, size, fd});
  *static_cast<int*>(out) = fd;
  return CUDA_SUCCESS;
}

#undef COUNT

}  // namespace

void fillVmmEntries(CudaDriver& t, bool vmm, bool dmabuf) {
  if (vmm) {
    t.cuMemGetAllocationGranularity = granularity;
    t.cuMemCreate = memCreate;
    t.cuMemRelease = memRelease;
    t.cuMemAddressReserve = addressReserve;
    t.cuMemAddressFree = addressFree;
    t.cuMemMap = memMap;
    t.cuMemUnmap = memUnmap;
    t.cuMemSetAccess = setAccess;
    t.cuMemRetainAllocationHandle = retainHandle;
    t.cuMemExportToShareableHandle = exportHandle;
    t.cuMemImportFromShareableHandle = importHandle;
  }
  if (dmabuf) t.cuMemGetHandleForAddressRange = dmabufHandle;
}

}  // namespace tent::cuda::testing
