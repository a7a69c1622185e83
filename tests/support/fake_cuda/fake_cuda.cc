// The fake CUDA driver: devices, memory, pointer attributes, VMM, IPC, dma-buf.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cuda/cuda_driver.h"
#include "fake_cuda_internal.h"

namespace tent::cuda::testing {

namespace {

std::atomic<FakeCuda*> g_fake{nullptr};

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "fake cuda: %s\n", what);
  std::abort();
}

int newMemfd(size_t size) {
  const int fd = memfd_create("tent-fake-gpu", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(size)) != 0) die("memfd_create");
  return fd;
}

void* mapShared(int fd, size_t size, void* at = nullptr) {
  void* p = mmap(at, size, PROT_READ | PROT_WRITE, MAP_SHARED | (at ? MAP_FIXED : 0), fd, 0);
  if (p == MAP_FAILED) die("mmap");
  return p;
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

// ---- devices ----------------------------------------------------------------------

CUresult init(unsigned) {
  COUNT("cuInit");
  if (fake().options().gpus.empty()) return CUDA_ERROR_NO_DEVICE;
  st().initialised = true;
  return CUDA_SUCCESS;
}

CUresult driverVersion(int* v) {
  *v = fake().options().driver_version;
  return CUDA_SUCCESS;
}

CUresult errorName(CUresult rc, const char** out) {
  switch (rc) {
    case CUDA_SUCCESS:
      *out = "CUDA_SUCCESS";
      break;
    case CUDA_ERROR_INVALID_VALUE:
      *out = "CUDA_ERROR_INVALID_VALUE";
      break;
    case CUDA_ERROR_OUT_OF_MEMORY:
      *out = "CUDA_ERROR_OUT_OF_MEMORY";
      break;
    case CUDA_ERROR_NOT_INITIALIZED:
      *out = "CUDA_ERROR_NOT_INITIALIZED";
      break;
    case CUDA_ERROR_NO_DEVICE:
      *out = "CUDA_ERROR_NO_DEVICE";
      break;
    case CUDA_ERROR_INVALID_DEVICE:
      *out = "CUDA_ERROR_INVALID_DEVICE";
      break;
    case CUDA_ERROR_INVALID_CONTEXT:
      *out = "CUDA_ERROR_INVALID_CONTEXT";
      break;
    case CUDA_ERROR_NOT_FOUND:
      *out = "CUDA_ERROR_NOT_FOUND";
      break;
    case CUDA_ERROR_NOT_SUPPORTED:
      *out = "CUDA_ERROR_NOT_SUPPORTED";
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult errorString(CUresult rc, const char** out) {
  const char* name = nullptr;
  if (errorName(rc, &name) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_VALUE;
  *out = "fake driver error";
  return CUDA_SUCCESS;
}

CUresult deviceCount(int* n) {
  COUNT("cuDeviceGetCount");
  if (!st().initialised) return CUDA_ERROR_NOT_INITIALIZED;
  *n = static_cast<int>(fake().options().gpus.size());
  return CUDA_SUCCESS;
}

CUresult deviceGet(CUdevice* dev, int ordinal) {
  if (!gpuSpec(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
  *dev = ordinal;
  return CUDA_SUCCESS;
}

CUresult deviceAttribute(int* v, int attr, CUdevice dev) {
  const FakeGpuSpec* g = gpuSpec(dev);
  if (!g) return CUDA_ERROR_INVALID_DEVICE;
  switch (attr) {
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
      *v = g->vmm;
      break;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
      *v = g->posix_fd;
      break;
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED:
      *v = g->gdr && g->vmm;
      break;
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED:
      *v = g->gdr;
      break;
    case CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED:
      *v = g->dma_buf;
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult pciBusId(char* out, int len, CUdevice dev) {
  const FakeGpuSpec* g = gpuSpec(dev);
  if (!g) return CUDA_ERROR_INVALID_DEVICE;
  std::string id = g->pci;
  for (char& c : id) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::snprintf(out, static_cast<size_t>(len), "%s", id.c_str());
  return CUDA_SUCCESS;
}

CUresult deviceUuid(CUuuid* out, CUdevice dev) {
  if (!gpuSpec(dev)) return CUDA_ERROR_INVALID_DEVICE;
  std::memset(out->bytes, 0x5a, sizeof(out->bytes));
  out->bytes[15] = static_cast<char>(dev);
  return CUDA_SUCCESS;
}

// ---- pointers ------------------------------------------------------------------------

CUresult pointerAttributes(unsigned n, int* attrs, void** data, CUdeviceptr ptr) {
  COUNT("cuPointerGetAttributes");
  if (!st().initialised) return CUDA_ERROR_NOT_INITIALIZED;
  const FakeCuda::Region* r = st().findLocked(ptr);
  for (unsigned i = 0; i < n; ++i) {
    switch (attrs[i]) {
      case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *static_cast<unsigned*>(data[i]) = r ? CU_MEMORYTYPE_DEVICE : 0;
        break;
      case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *static_cast<int*>(data[i]) = r ? r->gpu : -2;
        break;
      case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *static_cast<unsigned*>(data[i]) = 0;
        break;
      case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
        *static_cast<unsigned*>(data[i]) = r && r->kind == FakeCuda::Region::Kind::kLegacy;
        break;
      case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
        *static_cast<unsigned long long*>(data[i]) =
            r && r->kind == FakeCuda::Region::Kind::kVmm ? st().physical[r->phys].handle_types : 0;
        break;
      default:
        return CUDA_ERROR_INVALID_VALUE;
    }
  }
  return CUDA_SUCCESS;
}

CUresult addressRange(CUdeviceptr* base, size_t* size, CUdeviceptr ptr) {
  COUNT("cuMemGetAddressRange");
  const FakeCuda::Region* r = st().findLocked(ptr);
  if (!r) return CUDA_ERROR_NOT_FOUND;
  if (base) *base = r->base;
  if (size) *size = r->size;
  return CUDA_SUCCESS;
}

// ---- cuMemAlloc memory and legacy IPC --------------------------------------------------

uint64_t addLegacyLocked(int gpu, size_t size) {
  const int fd = newMemfd(size);
  auto* p = static_cast<uint8_t*>(mapShared(fd, size));
  FakeCuda::Region r;
  r.base = reinterpret_cast<uint64_t>(p);
  r.size = size;
  r.gpu = gpu;
  r.memfd = fd;
  r.id = st().next_id++;
  st().regions[r.base] = r;
  return r.base;
}

CUresult memAlloc(CUdeviceptr* out, size_t size) {
  COUNT("cuMemAlloc");
  if (fake().fail_alloc.load() != CUDA_SUCCESS) return fake().fail_alloc.load();
  if (size == 0) return CUDA_ERROR_INVALID_VALUE;
  const int gpu = currentGpuLocked();
  if (gpu < 0) return CUDA_ERROR_INVALID_CONTEXT;
  *out = addLegacyLocked(gpu, size);
  return CUDA_SUCCESS;
}

CUresult memFree(CUdeviceptr ptr) {
  COUNT("cuMemFree");
  auto it = st().regions.find(ptr);
  if (it == st().regions.end() || it->second.kind != FakeCuda::Region::Kind::kLegacy)
    return CUDA_ERROR_INVALID_VALUE;
  munmap(reinterpret_cast<void*>(ptr), it->second.size);
  close(it->second.memfd);
  st().regions.erase(it);
  return CUDA_SUCCESS;
}

CUresult ipcGet(CUipcMemHandle* out, CUdeviceptr ptr) {
  COUNT("cuIpcGetMemHandle");
  auto it = st().regions.find(ptr);  // the allocation's base, as the driver requires
  if (it == st().regions.end() || it->second.kind != FakeCuda::Region::Kind::kLegacy)
    return CUDA_ERROR_INVALID_VALUE;
  FakeIpcHandle h{kFakeIpcMagic,    static_cast<int32_t>(getpid()),
                  it->second.memfd, it->second.size,
                  it->second.gpu,   0,
                  it->second.id};
  std::memset(out, 0, sizeof(*out));
  std::memcpy(out->reserved, &h, sizeof(h));
  return CUDA_SUCCESS;
}

CUresult ipcOpen(CUdeviceptr* out, CUipcMemHandle handle, unsigned) {
  COUNT("cuIpcOpenMemHandle");
  if (fake().fail_ipc_open.load() != CUDA_SUCCESS) return fake().fail_ipc_open.load();
  FakeIpcHandle h;
  std::memcpy(&h, handle.reserved, sizeof(h));
  if (h.magic != kFakeIpcMagic) return CUDA_ERROR_INVALID_VALUE;
  if (h.pid == getpid()) return CUDA_ERROR_INVALID_CONTEXT;  // as the driver: not in-process
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, h.pid, 0));
  if (pidfd < 0) return CUDA_ERROR_INVALID_VALUE;
  const int fd = static_cast<int>(syscall(SYS_pidfd_getfd, pidfd, h.fd, 0));
  close(pidfd);
  if (fd < 0) return CUDA_ERROR_INVALID_VALUE;
  FakeCuda::Region r;
  r.base = reinterpret_cast<uint64_t>(mapShared(fd, h.size));
  r.size = h.size;
  r.gpu = h.gpu < static_cast<int>(fake().options().gpus.size()) ? h.gpu : 0;
  r.kind = FakeCuda::Region::Kind::kIpc;
  r.memfd = fd;
  r.id = h.id;
  st().regions[r.base] = r;
  *out = r.base;
  return CUDA_SUCCESS;
}

CUresult ipcClose(CUdeviceptr ptr) {
  COUNT("cuIpcCloseMemHandle");
  auto it = st().regions.find(ptr);
  if (it == st().regions.end() || it->second.kind != FakeCuda::Region::Kind::kIpc)
    return CUDA_ERROR_INVALID_VALUE;
  munmap(reinterpret_cast<void*>(ptr), it->second.size);
  close(it->second.memfd);
  st().regions.erase(it);
  return CUDA_SUCCESS;
}

#undef COUNT

}  // namespace

// ---- state ----------------------------------------------------------------------------

FakeCuda& fake() {
  FakeCuda* f = g_fake.load(std::memory_order_acquire);
  if (f == nullptr) die("a driver entry point was called with no FakeCuda installed");
  return *f;
}

FakeCuda* currentFakeCuda() noexcept {
  return g_fake.load(std::memory_order_acquire);
}

FakeCuda::Region* FakeCuda::State::findLocked(uint64_t addr) {
  auto it = regions.upper_bound(addr);
  if (it == regions.begin()) return nullptr;
  --it;
  return addr < it->second.base + it->second.size ? &it->second : nullptr;
}

void FakeCuda::State::releasePhysicalLocked(CUmemGenericAllocationHandle h) {
  auto it = physical.find(h);
  if (it == physical.end()) return;
  if (--it->second.refs > 0) return;
  close(it->second.memfd);
  physical.erase(it);
}

FakeCuda::FakeCuda(FakeCudaOptions options) : options_(std::move(options)), state_(new State()) {
  FakeCuda* expected = nullptr;
  if (!g_fake.compare_exchange_strong(expected, this)) die("two FakeCuda at once");
  state_->initialised = options_.app_initialised;
  state_->context_refs.assign(options_.gpus.size(), 0);
  state_->contexts.assign(options_.gpus.size() + 1, 0);
  CudaDriver& t = table_;
  t.cuInit = init;
  t.cuDriverGetVersion = driverVersion;
  t.cuGetErrorName = errorName;
  t.cuGetErrorString = errorString;
  t.cuDeviceGetCount = deviceCount;
  t.cuDeviceGet = deviceGet;
  t.cuDeviceGetAttribute = deviceAttribute;
  t.cuDeviceGetPCIBusId = pciBusId;
  t.cuDeviceGetUuid = deviceUuid;
  t.cuPointerGetAttributes = pointerAttributes;
  t.cuMemGetAddressRange = addressRange;
  t.cuMemAlloc = memAlloc;
  t.cuMemFree = memFree;
  t.cuIpcGetMemHandle = ipcGet;
  t.cuIpcOpenMemHandle = ipcOpen;
  t.cuIpcCloseMemHandle = ipcClose;
  fillVmmEntries(t, options_.vmm_entries, options_.dmabuf_entry);
  fillStreamEntries(t, options_.host_alloc_entries);
  setDriverOverride(&table_);
}

FakeCuda::~FakeCuda() {
  setDriverOverride(nullptr);
  runStreams();
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    for (auto& [base, r] : state_->regions) {
      munmap(reinterpret_cast<void*>(base), r.size);
      if (r.memfd >= 0) close(r.memfd);
    }
    for (auto& [h, p] : state_->physical) close(p.memfd);
    for (auto& [base, size] : state_->reservations) munmap(reinterpret_cast<void*>(base), size);
    for (auto& [base, size] : state_->pinned_host) munmap(reinterpret_cast<void*>(base), size);
    for (Stream* s : state_->streams) delete s;
  }
  g_fake.store(nullptr, std::memory_order_release);
  delete state_;
}

// ---- the application's side --------------------------------------------------------------

void* FakeCuda::appMalloc(int gpu, size_t length) {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->initialised = true;
  return reinterpret_cast<void*>(addLegacyLocked(gpu, length));
}

void FakeCuda::appFree(void* ptr) {
  if (memFree(reinterpret_cast<CUdeviceptr>(ptr)) != CUDA_SUCCESS) die("appFree");
}

void* FakeCuda::appVmm(int gpu, const std::vector<size_t>& chunks, bool exportable) {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->initialised = true;
  }
  size_t total = 0;
  for (size_t c : chunks) total += c;
  const CudaDriver& t = table_;
  if (t.cuMemCreate == nullptr) die("appVmm with vmm_entries off");
  CUdeviceptr base = 0;
  if (t.cuMemAddressReserve(&base, total, options_.granularity, 0, 0) != CUDA_SUCCESS)
    die("appVmm");
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.requestedHandleTypes = exportable ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : 0;
  prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, gpu};
  uint64_t at = base;
  for (size_t c : chunks) {
    CUmemGenericAllocationHandle h = 0;
    if (t.cuMemCreate(&h, c, &prop, 0) != CUDA_SUCCESS ||
        t.cuMemMap(at, c, 0, h, 0) != CUDA_SUCCESS)
      die("appVmm chunk (sizes must be multiples of the granularity)");
    (void)t.cuMemRelease(h);
    at += c;
  }
  return reinterpret_cast<void*>(base);
}

void FakeCuda::appVmmFree(void* ptr) {
  const auto base = reinterpret_cast<uint64_t>(ptr);
  size_t total = 0;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    total = state_->reservations.at(base);
  }
  for (uint64_t at = base; at < base + total;) {
    size_t size = 0;
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      size = state_->regions.at(at).size;
    }
    (void)table_.cuMemUnmap(at, size);
    at += size;
  }
  (void)table_.cuMemAddressFree(base, total);
}

std::vector<FakeCuda::Copy> FakeCuda::copies() {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->copies;
}

std::vector<FakeCuda::DmabufExport> FakeCuda::dmabufExports() {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->dmabufs;
}

std::map<std::string, int> FakeCuda::calls() {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->calls;
}

int FakeCuda::calls(const std::string& name) {
  std::lock_guard<std::mutex> lock(state_->mu);
  auto it = state_->calls.find(name);
  return it == state_->calls.end() ? 0 : it->second;
}

bool FakeCuda::pinnedHost(uint64_t addr, size_t bytes) {
  std::lock_guard<std::mutex> lock(state_->mu);
  auto it = state_->pinned_host.upper_bound(addr);
  if (it == state_->pinned_host.begin()) return false;
  --it;
  return addr - it->first <= it->second && bytes <= it->second - (addr - it->first);
}

FakeCuda::Live FakeCuda::live() {
  std::lock_guard<std::mutex> lock(state_->mu);
  Live l;
  for (const auto& [base, r] : state_->regions) {
    if (r.kind == Region::Kind::kLegacy) ++l.allocations;
    if (r.kind == Region::Kind::kIpc) ++l.ipc_mappings;
  }
  l.physical = static_cast<int>(state_->physical.size());
  l.reservations = static_cast<int>(state_->reservations.size());
  l.streams = static_cast<int>(state_->streams.size());
  for (int r : state_->context_refs) l.context_refs += r;
  l.pinned_host = static_cast<int>(state_->pinned_host.size());
  return l;
}

}  // namespace tent::cuda::testing
