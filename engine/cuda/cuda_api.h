// The few CUDA driver API entry points tent uses, as one table of function
// pointers: the same shape as the verbs ops table (engine/fabric/verbs/verbs_ops.h).
// Production fills it at run time from libcuda.so.1 (cuda_driver.cc); tests fill it
// with a fake (tests/cuda/fake_cuda.h). There is no build dependency on CUDA: the
// types and enum values below are declared here, with the values and signatures of
// the public driver API header (cuda.h, CUDA 12.0 ABI, which later drivers keep
// serving through cuGetProcAddress).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tent::cuda {

// ---- types ----------------------------------------------------------------------
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUmemGenericAllocationHandle = unsigned long long;
struct CUctx_st;
struct CUstream_st;
struct CUevent_st;
using CUcontext = CUctx_st*;
using CUstream = CUstream_st*;
using CUevent = CUevent_st*;
using CUhostFn = void (*)(void* user_data);

inline constexpr size_t kIpcHandleSize = 64;  // CU_IPC_HANDLE_SIZE
struct CUipcMemHandle {
  char reserved[kIpcHandleSize];
};
struct CUuuid {
  char bytes[16];
};

struct CUmemLocation {
  int type;  // CUmemLocationType
  int id;
};
struct CUmemAllocationProp {
  int type;                  // CUmemAllocationType
  int requestedHandleTypes;  // CUmemAllocationHandleType
  CUmemLocation location;
  void* win32HandleMetaData;
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags;
};
struct CUmemAccessDesc {
  CUmemLocation location;
  int flags;  // CUmemAccess_flags
};

// ---- enum values ---------------------------------------------------------------------
inline constexpr CUresult CUDA_SUCCESS = 0;
inline constexpr CUresult CUDA_ERROR_INVALID_VALUE = 1;
inline constexpr CUresult CUDA_ERROR_OUT_OF_MEMORY = 2;
inline constexpr CUresult CUDA_ERROR_NOT_INITIALIZED = 3;
inline constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;
inline constexpr CUresult CUDA_ERROR_INVALID_DEVICE = 101;
inline constexpr CUresult CUDA_ERROR_INVALID_CONTEXT = 201;
inline constexpr CUresult CUDA_ERROR_INVALID_HANDLE = 400;
inline constexpr CUresult CUDA_ERROR_NOT_FOUND = 500;
inline constexpr CUresult CUDA_ERROR_NOT_READY = 600;
inline constexpr CUresult CUDA_ERROR_NOT_SUPPORTED = 801;

// CUpointer_attribute
inline constexpr int CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2;
inline constexpr int CU_POINTER_ATTRIBUTE_IS_MANAGED = 8;
inline constexpr int CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9;
inline constexpr int CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE = 10;
inline constexpr int CU_POINTER_ATTRIBUTE_RANGE_START_ADDR = 11;
inline constexpr int CU_POINTER_ATTRIBUTE_RANGE_SIZE = 12;
inline constexpr int CU_POINTER_ATTRIBUTE_MAPPED = 13;
inline constexpr int CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES = 14;

// CUmemorytype
inline constexpr unsigned CU_MEMORYTYPE_HOST = 1;
inline constexpr unsigned CU_MEMORYTYPE_DEVICE = 2;
inline constexpr unsigned CU_MEMORYTYPE_UNIFIED = 4;

// CUdevice_attribute
inline constexpr int CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 102;
inline constexpr int CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED = 103;
inline constexpr int CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED = 110;
inline constexpr int CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED = 116;
inline constexpr int CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = 124;

// Virtual memory management
inline constexpr int CU_MEM_ALLOCATION_TYPE_PINNED = 1;
inline constexpr int CU_MEM_LOCATION_TYPE_DEVICE = 1;
inline constexpr int CU_MEM_HANDLE_TYPE_NONE = 0;
inline constexpr int CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 1;
inline constexpr int CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0;
inline constexpr int CU_MEM_ALLOC_GRANULARITY_RECOMMENDED = 1;
inline constexpr int CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3;
inline constexpr int CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD = 1;

inline constexpr unsigned CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 1;
inline constexpr unsigned CU_STREAM_NON_BLOCKING = 1;
inline constexpr unsigned CU_EVENT_DEFAULT = 0;
inline constexpr unsigned CU_MEMHOSTALLOC_PORTABLE = 1;  // pinned for every context

// The ABI the table's signatures follow, asked of cuGetProcAddress (CUDA 12.0).
inline constexpr int kApiVersion = 12000;

// ---- the table --------------------------------------------------------------------------
// Every member has the signature of the driver function of the same name. Members
// marked optional may be null (an older driver): the callers say what is missing.
struct CudaDriver {
  CUresult (*cuInit)(unsigned flags);
  CUresult (*cuDriverGetVersion)(int* version);
  CUresult (*cuGetErrorName)(CUresult error, const char** name);
  CUresult (*cuGetErrorString)(CUresult error, const char** text);

  CUresult (*cuDeviceGetCount)(int* count);
  CUresult (*cuDeviceGet)(CUdevice* device, int ordinal);
  CUresult (*cuDeviceGetAttribute)(int* value, int attribute, CUdevice device);
  CUresult (*cuDeviceGetPCIBusId)(char* bus_id, int length, CUdevice device);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext* context, CUdevice device);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice device);
  CUresult (*cuCtxSetCurrent)(CUcontext context);
  CUresult (*cuCtxGetCurrent)(CUcontext* context);

  CUresult (*cuPointerGetAttributes)(unsigned count, int* attributes, void** data, CUdeviceptr ptr);
  CUresult (*cuMemGetAddressRange)(CUdeviceptr* base, size_t* size, CUdeviceptr ptr);
  CUresult (*cuMemAlloc)(CUdeviceptr* ptr, size_t size);
  CUresult (*cuMemFree)(CUdeviceptr ptr);
  // Page-locked host memory (optional in the table: the tcp provider's staging buffers
  // say so when it is missing).
  CUresult (*cuMemHostAlloc)(void** ptr, size_t bytes, unsigned flags);
  CUresult (*cuMemFreeHost)(void* ptr);

  // Virtual memory management (optional).
  CUresult (*cuMemGetAllocationGranularity)(size_t* granularity, const CUmemAllocationProp* prop,
                                            int option);
  CUresult (*cuMemCreate)(CUmemGenericAllocationHandle* handle, size_t size,
                          const CUmemAllocationProp* prop, unsigned long long flags);
  CUresult (*cuMemRelease)(CUmemGenericAllocationHandle handle);
  CUresult (*cuMemAddressReserve)(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                  unsigned long long flags);
  CUresult (*cuMemAddressFree)(CUdeviceptr ptr, size_t size);
  CUresult (*cuMemMap)(CUdeviceptr ptr, size_t size, size_t offset,
                       CUmemGenericAllocationHandle handle, unsigned long long flags);
  CUresult (*cuMemUnmap)(CUdeviceptr ptr, size_t size);
  CUresult (*cuMemSetAccess)(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc,
                             size_t count);
  CUresult (*cuMemRetainAllocationHandle)(CUmemGenericAllocationHandle* handle, void* addr);
  CUresult (*cuMemExportToShareableHandle)(void* shareable, CUmemGenericAllocationHandle handle,
                                           int handle_type, unsigned long long flags);
  CUresult (*cuMemImportFromShareableHandle)(CUmemGenericAllocationHandle* handle, void* shareable,
                                             int handle_type);
  // dma-buf export of a device range (optional: CUDA 11.7).
  CUresult (*cuMemGetHandleForAddressRange)(void* handle, CUdeviceptr ptr, size_t size,
                                            int handle_type, unsigned long long flags);

  // Legacy IPC (cuMemAlloc memory).
  CUresult (*cuIpcGetMemHandle)(CUipcMemHandle* handle, CUdeviceptr ptr);
  CUresult (*cuIpcOpenMemHandle)(CUdeviceptr* ptr, CUipcMemHandle handle, unsigned flags);
  CUresult (*cuIpcCloseMemHandle)(CUdeviceptr ptr);
  CUresult (*cuDeviceGetUuid)(CUuuid* uuid, CUdevice device);

  // Copies and their completion.
  CUresult (*cuStreamCreate)(CUstream* stream, unsigned flags);
  CUresult (*cuStreamDestroy)(CUstream stream);
  CUresult (*cuStreamSynchronize)(CUstream stream);
  CUresult (*cuMemcpyAsync)(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream);
  CUresult (*cuMemcpy)(CUdeviceptr dst, CUdeviceptr src, size_t bytes);
  CUresult (*cuMemsetD8)(CUdeviceptr dst, unsigned char value, size_t count);
  CUresult (*cuLaunchHostFunc)(CUstream stream, CUhostFn fn, void* user_data);
  CUresult (*cuEventCreate)(CUevent* event, unsigned flags);
  CUresult (*cuEventDestroy)(CUevent event);
  CUresult (*cuEventRecord)(CUevent event, CUstream stream);
  CUresult (*cuEventSynchronize)(CUevent event);
  CUresult (*cuEventElapsedTime)(float* ms, CUevent start, CUevent end);
};

}  // namespace tent::cuda
