// GPU memory through the driver table (cuda_memory.h).
#include "cuda/cuda_memory.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>

#include "base/hex.h"
#include "cuda/cuda_driver.h"

namespace tent::cuda {

namespace {

Status failed(const CudaDriver& d, const std::string& what, CUresult rc) {
  if (rc == CUDA_ERROR_OUT_OF_MEMORY)
    return Status::ResourceExhausted(what + " failed: " + errorText(d, rc));
  return Status::IoError(what + " failed: " + errorText(d, rc));
}

// The driver, initialised. cuInit is cheap after the first call.
Result<const CudaDriver*> initialisedDriver() {
  TENT_ASSIGN_OR_RETURN(const CudaDriver* d, driver());
  const CUresult rc = d->cuInit(0);
  if (rc == CUDA_ERROR_NO_DEVICE)
    return Status::NotFound(
        "the CUDA driver is loaded but sees no GPU (cuInit: " + errorText(*d, rc) + ")");
  if (rc != CUDA_SUCCESS)
    return Status::FailedPrecondition("the CUDA driver failed to initialise: cuInit: " +
                                      errorText(*d, rc));
  return d;
}

Result<CUdevice> deviceHandle(const CudaDriver& d, int ordinal) {
  CUdevice dev = 0;
  const CUresult rc = d.cuDeviceGet(&dev, ordinal);
  if (rc != CUDA_SUCCESS) return failed(d, "cuDeviceGet(" + std::to_string(ordinal) + ")", rc);
  return dev;
}

int attributeOr(const CudaDriver& d, CUdevice dev, int attr, int fallback) {
  int v = 0;
  return d.cuDeviceGetAttribute(&v, attr, dev) == CUDA_SUCCESS ? v : fallback;
}

bool hasVmm(const CudaDriver& d) {
  return d.cuMemCreate && d.cuMemRelease && d.cuMemAddressReserve && d.cuMemAddressFree &&
         d.cuMemMap && d.cuMemUnmap && d.cuMemSetAccess && d.cuMemGetAllocationGranularity;
}

}  // namespace

Result<PointerInfo> classify(const void* addr) {
  PointerInfo info;
  const CudaDriver* d = driverIfLoaded();
  if (d == nullptr) return info;
  unsigned memory_type = 0;
  int ordinal = -1;
  unsigned managed = 0;
  unsigned legacy_ipc = 0;
  int attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                 CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE};
  void* data[] = {&memory_type, &ordinal, &managed, &legacy_ipc};
  const auto ptr = reinterpret_cast<CUdeviceptr>(addr);
  CUresult rc = d->cuPointerGetAttributes(4, attrs, data, ptr);
  // Not initialised: this process has made no CUDA allocation, so the memory is host's.
  if (rc == CUDA_ERROR_NOT_INITIALIZED) return info;
  if (rc != CUDA_SUCCESS) return failed(*d, "cuPointerGetAttributes(" + hexAddr(ptr) + ")", rc);
  if (managed != 0 || memory_type == CU_MEMORYTYPE_UNIFIED) {
    info.kind = MemoryKind::kManaged;
    info.device = ordinal;
    return info;
  }
  if (memory_type != CU_MEMORYTYPE_DEVICE) return info;  // host, pinned host, or unknown to CUDA
  info.kind = MemoryKind::kDevice;
  info.device = ordinal;
  info.legacy_ipc = legacy_ipc != 0;
  CUdeviceptr base = 0;
  size_t size = 0;
  rc = d->cuMemGetAddressRange(&base, &size, ptr);
  if (rc != CUDA_SUCCESS) return failed(*d, "cuMemGetAddressRange(" + hexAddr(ptr) + ")", rc);
  info.range_base = base;
  info.range_size = size;
  unsigned long long handle_types = 0;
  int attr = CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES;
  void* out = &handle_types;
  if (!info.legacy_ipc && d->cuPointerGetAttributes(1, &attr, &out, ptr) == CUDA_SUCCESS)
    info.handle_types = static_cast<int>(handle_types);
  return info;
}

Result<std::vector<Chunk>> chunksOf(const void* addr, size_t length, size_t max_chunks) {
  const auto begin = reinterpret_cast<uint64_t>(addr);
  const uint64_t end = begin + length;
  TENT_ASSIGN_OR_RETURN(PointerInfo first, classify(addr));
  if (first.kind != MemoryKind::kDevice) return std::vector<Chunk>{{begin, length, first}};
  std::vector<Chunk> out;
  PointerInfo info = first;
  for (uint64_t at = begin;;) {
    if (info.kind != MemoryKind::kDevice || info.range_size == 0 || info.range_base > at)
      return Status::InvalidArgument(
          "range [" + hexAddr(begin) + ", +" + std::to_string(length) +
          ") is not device memory throughout: at " + hexAddr(at) + " it is " +
          (info.kind == MemoryKind::kHost ? "host memory or unmapped" : "managed memory"));
    const uint64_t chunk_end = std::min(end, info.range_base + info.range_size);
    out.push_back({at, chunk_end - at, info});
    if (chunk_end == end) return out;
    if (out.size() == max_chunks)
      return Status::InvalidArgument("range [" + hexAddr(begin) + ", +" + std::to_string(length) +
                                     ") spans more than " + std::to_string(max_chunks) +
                                     " physical allocations; register it in smaller pieces");
    at = chunk_end;
    TENT_ASSIGN_OR_RETURN(info, classify(reinterpret_cast<const void*>(at)));
  }
}

Result<int> deviceCount() {
  TENT_ASSIGN_OR_RETURN(const CudaDriver* d, initialisedDriver());
  int n = 0;
  const CUresult rc = d->cuDeviceGetCount(&n);
  if (rc != CUDA_SUCCESS) return failed(*d, "cuDeviceGetCount", rc);
  return n;
}

Status checkDevice(int ordinal) {
  TENT_ASSIGN_OR_RETURN(int n, deviceCount());
  if (ordinal >= 0 && ordinal < n) return Status::OK();
  std::string seen =
      n == 0   ? "no GPU"
      : n == 1 ? "1 GPU (cuda:0)"
               : std::to_string(n) + " GPUs (cuda:0 to cuda:" + std::to_string(n - 1) + ")";
  return Status::NotFound("no such GPU cuda:" + std::to_string(ordinal) +
                          ": the CUDA driver sees " + seen +
                          " in this process (CUDA_VISIBLE_DEVICES renumbers them)");
}

Result<int> attribute(int ordinal, int attr) {
  TENT_RETURN_IF_ERROR(checkDevice(ordinal));
  TENT_ASSIGN_OR_RETURN(const CudaDriver* d, driver());
  TENT_ASSIGN_OR_RETURN(CUdevice dev, deviceHandle(*d, ordinal));
  int v = 0;
  const CUresult rc = d->cuDeviceGetAttribute(&v, attr, dev);
  if (rc != CUDA_SUCCESS)
    return failed(*d, "cuDeviceGetAttribute(" + std::to_string(attr) + ")", rc);
  return v;
}

Result<std::string> pciBusId(int ordinal) {
  TENT_RETURN_IF_ERROR(checkDevice(ordinal));
  TENT_ASSIGN_OR_RETURN(const CudaDriver* d, driver());
  TENT_ASSIGN_OR_RETURN(CUdevice dev, deviceHandle(*d, ordinal));
  char buf[32] = {};
  const CUresult rc = d->cuDeviceGetPCIBusId(buf, sizeof(buf) - 1, dev);
  if (rc != CUDA_SUCCESS) return failed(*d, "cuDeviceGetPCIBusId", rc);
  std::string id(buf);
  for (char& c : id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return id;
}

Result<CUuuid> uuid(int ordinal) {
  TENT_RETURN_IF_ERROR(checkDevice(ordinal));
  TENT_ASSIGN_OR_RETURN(const CudaDriver* d, driver());
  TENT_ASSIGN_OR_RETURN(CUdevice dev, deviceHandle(*d, ordinal));
  CUuuid id{};
  const CUresult rc = d->cuDeviceGetUuid(&id, dev);
  if (rc != CUDA_SUCCESS) return failed(*d, "cuDeviceGetUuid", rc);
  return id;
}

Result<int> parseCudaLocation(const std::string& location) {
  if (location.rfind("cuda:", 0) != 0) return -1;
  const std::string digits = location.substr(5);
  const bool numeric = !digits.empty() && digits.size() <= 6 &&
                       digits.find_first_not_of("0123456789") == std::string::npos;
  if (!numeric)
    return Status::InvalidArgument("location " + location + ": expected cuda:N, N a GPU ordinal");
  return std::atoi(digits.c_str());
}

// ---- the engine's own device memory --------------------------------------------------

Result<ScopedContext> ScopedContext::enter(int ordinal) {
  TENT_RETURN_IF_ERROR(checkDevice(ordinal));
  TENT_ASSIGN_OR_RETURN(const CudaDriver* d, driver());
  TENT_ASSIGN_OR_RETURN(CUdevice dev, deviceHandle(*d, ordinal));
  ScopedContext s;
  CUresult rc = d->cuCtxGetCurrent(&s.previous_);
  if (rc != CUDA_SUCCESS) return failed(*d, "cuCtxGetCurrent", rc);
  CUcontext ctx = nullptr;
  rc = d->cuDevicePrimaryCtxRetain(&ctx, dev);
  if (rc != CUDA_SUCCESS)
    return failed(*d, "cuDevicePrimaryCtxRetain(cuda:" + std::to_string(ordinal) + ")", rc);
  s.d_ = d;
  s.device_ = dev;
  rc = d->cuCtxSetCurrent(ctx);
  if (rc != CUDA_SUCCESS) return failed(*d, "cuCtxSetCurrent", rc);  // the guard releases
  return s;
}

ScopedContext::ScopedContext(ScopedContext&& other) noexcept
    : d_(other.d_), previous_(other.previous_), device_(other.device_) {
  other.d_ = nullptr;
}

ScopedContext::~ScopedContext() {
  if (d_ == nullptr) return;
  (void)d_->cuCtxSetCurrent(previous_);
  (void)d_->cuDevicePrimaryCtxRelease(device_);
}

namespace {

Result<DeviceAllocation> allocateVmm(const CudaDriver& d, CUdevice dev, int ordinal,
                                     size_t length) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, ordinal};
  // A VMM allocation is reachable by a NIC only when created with this flag.
  prop.allocFlags.gpuDirectRDMACapable =
      attributeOr(d, dev, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, 0) ? 1 : 0;
  size_t granularity = 0;
  CUresult rc =
      d.cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  if (rc != CUDA_SUCCESS || granularity == 0) return failed(d, "cuMemGetAllocationGranularity", rc);
  DeviceAllocation a;
  a.length = length;
  a.mapped = (length + granularity - 1) / granularity * granularity;
  a.device = ordinal;
  a.vmm = true;
  CUmemGenericAllocationHandle handle = 0;
  rc = d.cuMemCreate(&handle, a.mapped, &prop, 0);
  if (rc != CUDA_SUCCESS) return failed(d, "cuMemCreate(" + std::to_string(a.mapped) + ")", rc);
  CUdeviceptr va = 0;
  rc = d.cuMemAddressReserve(&va, a.mapped, granularity, 0, 0);
  if (rc == CUDA_SUCCESS) {
    rc = d.cuMemMap(va, a.mapped, 0, handle, 0);
    if (rc != CUDA_SUCCESS) (void)d.cuMemAddressFree(va, a.mapped);
  }
  // The mapping holds the physical memory from here on; unmapping frees it.
  (void)d.cuMemRelease(handle);
  if (rc != CUDA_SUCCESS) return failed(d, "mapping a VMM allocation", rc);
  const CUmemAccessDesc access{{CU_MEM_LOCATION_TYPE_DEVICE, ordinal},
                               CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  rc = d.cuMemSetAccess(va, a.mapped, &access, 1);
  if (rc != CUDA_SUCCESS) {
    (void)d.cuMemUnmap(va, a.mapped);
    (void)d.cuMemAddressFree(va, a.mapped);
    return failed(d, "cuMemSetAccess", rc);
  }
  a.ptr = reinterpret_cast<void*>(va);
  return a;
}

}  // namespace

Result<DeviceAllocation> allocateDevice(int ordinal, size_t length) {
  if (length == 0) return Status::InvalidArgument("allocate: zero length");
  TENT_ASSIGN_OR_RETURN(ScopedContext scope, ScopedContext::enter(ordinal));
  TENT_ASSIGN_OR_RETURN(const CudaDriver* d, driver());
  TENT_ASSIGN_OR_RETURN(CUdevice dev, deviceHandle(*d, ordinal));
  const bool vmm =
      hasVmm(*d) &&
      attributeOr(*d, dev, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0) &&
      attributeOr(*d, dev, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 0);
  Result<DeviceAllocation> a = DeviceAllocation{};
  if (vmm) {
    a = allocateVmm(*d, dev, ordinal, length);
  } else {
    CUdeviceptr p = 0;
    const CUresult rc = d->cuMemAlloc(&p, length);
    if (rc != CUDA_SUCCESS) return failed(*d, "cuMemAlloc(" + std::to_string(length) + ")", rc);
    a = DeviceAllocation{reinterpret_cast<void*>(p), length, length, ordinal, false};
  }
  if (!a.ok()) return a.status().withContext("cuda:" + std::to_string(ordinal));
  // The allocation keeps the primary context alive until freeDevice() (the scope's
  // own reference is dropped when it ends).
  CUcontext ctx = nullptr;
  (void)d->cuDevicePrimaryCtxRetain(&ctx, dev);
  return a;
}

Status freeDevice(const DeviceAllocation& a) {
  if (a.ptr == nullptr) return Status::InvalidArgument("free: null device allocation");
  TENT_ASSIGN_OR_RETURN(ScopedContext scope, ScopedContext::enter(a.device));
  TENT_ASSIGN_OR_RETURN(const CudaDriver* d, driver());
  const auto va = reinterpret_cast<CUdeviceptr>(a.ptr);
  CUresult rc = CUDA_SUCCESS;
  if (a.vmm) {
    rc = d->cuMemUnmap(va, a.mapped);
    const CUresult rc2 = d->cuMemAddressFree(va, a.mapped);
    if (rc == CUDA_SUCCESS) rc = rc2;
  } else {
    rc = d->cuMemFree(va);
  }
  TENT_ASSIGN_OR_RETURN(CUdevice dev, deviceHandle(*d, a.device));
  (void)d->cuDevicePrimaryCtxRelease(dev);  // the allocation's reference
  if (rc != CUDA_SUCCESS) return failed(*d, "freeing device memory at " + hexAddr(va), rc);
  return Status::OK();
}

}  // namespace tent::cuda
