// Loading libcuda.so.1 and filling the driver table (cuda_driver.h).
#include "cuda/cuda_driver.h"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <map>
#include <mutex>

namespace tent::cuda {

namespace {

static_assert(sizeof(void*) == sizeof(CUresult(*)(unsigned)),
              "the table is filled through void*, as dlsym and cuGetProcAddress return it");

// cuGetProcAddress, as the driver exports it: _v2 (CUDA 12.0+) reports why a symbol
// is missing, the first version (11.3+) does not.
using GetProcV2 = CUresult (*)(const char*, void**, int, unsigned long long, int*);
using GetProcV1 = CUresult (*)(const char*, void**, int, unsigned long long);

struct Entry {
  const char* name;  // the base name cuGetProcAddress resolves to the versioned one
  size_t offset;     // of the member in CudaDriver (every member is a function pointer)
  bool required;
};

#define TENT_CUDA_ENTRY(fn, required)       \
  Entry {                                   \
#fn, offsetof(CudaDriver, fn), required \
  }

const Entry* entries(size_t* count) {
  static const Entry kEntries[] = {
      TENT_CUDA_ENTRY(cuInit, true),
      TENT_CUDA_ENTRY(cuDriverGetVersion, true),
      TENT_CUDA_ENTRY(cuGetErrorName, true),
      TENT_CUDA_ENTRY(cuGetErrorString, true),
      TENT_CUDA_ENTRY(cuDeviceGetCount, true),
      TENT_CUDA_ENTRY(cuDeviceGet, true),
      TENT_CUDA_ENTRY(cuDeviceGetAttribute, true),
      TENT_CUDA_ENTRY(cuDeviceGetPCIBusId, true),
      TENT_CUDA_ENTRY(cuDevicePrimaryCtxRetain, true),
      TENT_CUDA_ENTRY(cuDevicePrimaryCtxRelease, true),
      TENT_CUDA_ENTRY(cuCtxSetCurrent, true),
      TENT_CUDA_ENTRY(cuCtxGetCurrent, true),
      TENT_CUDA_ENTRY(cuPointerGetAttributes, true),
      TENT_CUDA_ENTRY(cuMemGetAddressRange, true),
      TENT_CUDA_ENTRY(cuMemAlloc, true),
      TENT_CUDA_ENTRY(cuMemFree, true),
      TENT_CUDA_ENTRY(cuMemHostAlloc, false),
      TENT_CUDA_ENTRY(cuMemFreeHost, false),
      TENT_CUDA_ENTRY(cuMemGetAllocationGranularity, false),
      TENT_CUDA_ENTRY(cuMemCreate, false),
      TENT_CUDA_ENTRY(cuMemRelease, false),
      TENT_CUDA_ENTRY(cuMemAddressReserve, false),
      TENT_CUDA_ENTRY(cuMemAddressFree, false),
      TENT_CUDA_ENTRY(cuMemMap, false),
      TENT_CUDA_ENTRY(cuMemUnmap, false),
      TENT_CUDA_ENTRY(cuMemSetAccess, false),
      TENT_CUDA_ENTRY(cuMemRetainAllocationHandle, false),
      TENT_CUDA_ENTRY(cuMemExportToShareableHandle, false),
      TENT_CUDA_ENTRY(cuMemImportFromShareableHandle, false),
      TENT_CUDA_ENTRY(cuMemGetHandleForAddressRange, false),
      TENT_CUDA_ENTRY(cuIpcGetMemHandle, true),
      TENT_CUDA_ENTRY(cuIpcOpenMemHandle, true),
      TENT_CUDA_ENTRY(cuIpcCloseMemHandle, true),
      TENT_CUDA_ENTRY(cuDeviceGetUuid, true),
      TENT_CUDA_ENTRY(cuStreamCreate, true),
      TENT_CUDA_ENTRY(cuStreamDestroy, true),
      TENT_CUDA_ENTRY(cuStreamSynchronize, true),
      TENT_CUDA_ENTRY(cuMemcpyAsync, true),
      TENT_CUDA_ENTRY(cuMemcpy, true),
      TENT_CUDA_ENTRY(cuMemsetD8, true),
      TENT_CUDA_ENTRY(cuLaunchHostFunc, true),
      TENT_CUDA_ENTRY(cuEventCreate, true),
      TENT_CUDA_ENTRY(cuEventDestroy, true),
      TENT_CUDA_ENTRY(cuEventRecord, true),
      TENT_CUDA_ENTRY(cuEventSynchronize, true),
      TENT_CUDA_ENTRY(cuEventElapsedTime, true),
  };
  *count = sizeof(kEntries) / sizeof(kEntries[0]);
  return kEntries;
}

#undef TENT_CUDA_ENTRY

// Resolves every entry through cuGetProcAddress at min(driver, kApiVersion): the
// driver hands out the version of each function that matches that ABI.
Status resolveEntries(void* lib, const std::string& library, CudaDriver* out) {
  auto v2 = reinterpret_cast<GetProcV2>(dlsym(lib, "cuGetProcAddress_v2"));
  auto v1 = reinterpret_cast<GetProcV1>(dlsym(lib, "cuGetProcAddress"));
  auto version_fn = reinterpret_cast<CUresult (*)(int*)>(dlsym(lib, "cuDriverGetVersion"));
  if ((v2 == nullptr && v1 == nullptr) || version_fn == nullptr)
    return Status::FailedPrecondition(library +
                                      " has no cuGetProcAddress: the NVIDIA driver is older "
                                      "than CUDA 11.3; install a newer driver");
  int driver_version = 0;
  if (version_fn(&driver_version) != CUDA_SUCCESS || driver_version <= 0)
    return Status::FailedPrecondition(library + ": cuDriverGetVersion failed");
  const int ask = std::min(driver_version, kApiVersion);
  size_t n = 0;
  const Entry* list = entries(&n);
  std::string missing;
  for (size_t i = 0; i < n; ++i) {
    void* fn = nullptr;
    int why = 0;
    const CUresult rc =
        v2 != nullptr ? v2(list[i].name, &fn, ask, 0, &why) : v1(list[i].name, &fn, ask, 0);
    if (rc != CUDA_SUCCESS) fn = nullptr;
    std::memcpy(reinterpret_cast<char*>(out) + list[i].offset, &fn, sizeof(fn));
    if (fn == nullptr && list[i].required)
      missing += std::string(missing.empty() ? "" : ", ") + list[i].name;
  }
  if (!missing.empty())
    return Status::FailedPrecondition(library + " (driver version " +
                                      std::to_string(driver_version) +
                                      ") lacks entry points tent needs: " + missing);
  return Status::OK();
}

std::atomic<const CudaDriver*> g_override{nullptr};

struct Loaded {
  std::mutex mu;
  std::string library_override;                            // under mu
  std::map<std::string, Result<const CudaDriver*>> cache;  // by library name, under mu
};

Loaded& loaded() {
  static Loaded* l = new Loaded();  // never destroyed: the driver outlives static teardown
  return *l;
}

}  // namespace

Result<std::unique_ptr<CudaDriver>> loadDriver(const std::string& library) {
  void* lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    return Status::NotFound("the CUDA driver is not available: dlopen " + library +
                            " failed: " + (why ? why : "unknown error") +
                            " (no NVIDIA driver on this machine, or not in the loader path)");
  }
  auto table = std::make_unique<CudaDriver>();
  Status s = resolveEntries(lib, library, table.get());
  if (!s.ok()) {
    dlclose(lib);
    return s;
  }
  return table;
}

Result<const CudaDriver*> driver() {
  if (const CudaDriver* o = g_override.load(std::memory_order_acquire)) return o;
  Loaded& l = loaded();
  std::lock_guard<std::mutex> lock(l.mu);
  const std::string library =
      l.library_override.empty() ? std::string(kDriverLibrary) : l.library_override;
  auto it = l.cache.find(library);
  if (it == l.cache.end()) {
    auto table = loadDriver(library);
    Result<const CudaDriver*> answer =
        table.ok() ? Result<const CudaDriver*>(table->release()) : table.status();
    it = l.cache.emplace(library, std::move(answer)).first;
  }
  return it->second;
}

const CudaDriver* driverIfLoaded() noexcept {
  if (const CudaDriver* o = g_override.load(std::memory_order_acquire)) return o;
  std::string library;
  {
    Loaded& l = loaded();
    std::lock_guard<std::mutex> lock(l.mu);
    library = l.library_override.empty() ? std::string(kDriverLibrary) : l.library_override;
  }
  void* present = dlopen(library.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (present == nullptr) return nullptr;
  dlclose(present);  // drops the reference RTLD_NOLOAD took; the application keeps its own
  auto d = driver();
  return d.ok() ? *d : nullptr;
}

void setDriverOverride(const CudaDriver* table) noexcept {
  g_override.store(table, std::memory_order_release);
}

void setDriverLibraryOverride(const std::string& library) {
  Loaded& l = loaded();
  std::lock_guard<std::mutex> lock(l.mu);
  l.library_override = library;
}

std::string errorText(const CudaDriver& d, CUresult rc) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (d.cuGetErrorName == nullptr || d.cuGetErrorName(rc, &name) != CUDA_SUCCESS) name = nullptr;
  if (d.cuGetErrorString == nullptr || d.cuGetErrorString(rc, &text) != CUDA_SUCCESS)
    text = nullptr;
  std::string out = name ? name : "CUDA error";
  out += " (" + std::to_string(rc) + ")";
  if (text) out += std::string(": ") + text;
  return out;
}

}  // namespace tent::cuda
