// Registering GPU memory on a verbs device: dma-buf first (the CUDA driver exports
// the range as a dma-buf, ibv_reg_dmabuf_mr registers it; the only way on systems
// without nvidia-peermem, such as Grace/GB200), ibv_reg_mr through nvidia-peermem as
// the fallback, and one error naming both reasons when neither works.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "cuda/cuda_driver.h"
#include "cuda/cuda_memory.h"
#include "fabric/verbs/verbs_objects.h"
#include "tent/log.h"

namespace tent::fabric::verbs {

namespace {

std::string errnoText(int rc) {
  return std::string(std::strerror(rc)) + " (errno " + std::to_string(rc) + ")";
}

std::string gpuName(int device) {
  return "cuda:" + std::to_string(device);
}

}  // namespace

ibv_mr* VerbsDevice::registerDmabuf(void* addr, size_t length, int ibv_access, int device,
                                    std::string* why) {
  if (ops_.reg_dmabuf_mr == nullptr) {
    *why = "libibverbs has no ibv_reg_dmabuf_mr (rdma-core older than v34)";
    return nullptr;
  }
  auto d = cuda::driver();
  if (!d.ok() || (*d)->cuMemGetHandleForAddressRange == nullptr) {
    *why = "the CUDA driver has no cuMemGetHandleForAddressRange (needs CUDA 11.7)";
    return nullptr;
  }
  auto supported = cuda::attribute(device, cuda::CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED);
  if (!supported.ok() || *supported == 0) {
    *why = gpuName(device) +
           " does not support dma-buf (needs Linux 5.12+ and an NVIDIA driver "
           "with dma-buf support, e.g. the open kernel modules)";
    return nullptr;
  }
  auto scope = cuda::ScopedContext::enter(device);
  if (!scope.ok()) {
    *why = scope.status().message();
    return nullptr;
  }
  // The driver exports whole host pages; the MR starts `offset` bytes into them.
  const auto page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uint64_t>(addr);
  const uint64_t first = begin & ~(page - 1);
  const uint64_t end = (begin + length + page - 1) & ~(page - 1);
  int fd = -1;
  const cuda::CUresult rc = (*d)->cuMemGetHandleForAddressRange(
      &fd, first, end - first, cuda::CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
  if (rc != cuda::CUDA_SUCCESS || fd < 0) {
    *why = "cuMemGetHandleForAddressRange: " + cuda::errorText(**d, rc);
    return nullptr;
  }
  ibv_mr* mr = ops_.reg_dmabuf_mr(pd_, begin - first, length, begin, fd, ibv_access);
  const int err = errno;
  close(fd);  // the MR holds its own reference to the dma-buf
  if (mr == nullptr) *why = "ibv_reg_dmabuf_mr: " + errnoText(err);
  return mr;
}

Result<std::unique_ptr<MemoryRegion>> VerbsDevice::registerGpuMemory(void* addr, size_t length,
                                                                     uint32_t access,
                                                                     const cuda::PointerInfo& gpu) {
  if (addr == nullptr || length == 0)
    return Status::InvalidArgument("verbs " + info_.name + ": registerGpuMemory of an empty range");
  if (gpu.kind != cuda::MemoryKind::kDevice)
    return Status::InvalidArgument("verbs " + info_.name +
                                   ": registerGpuMemory of memory that is not device memory");
  const std::string where = "verbs " + info_.name + ": " + gpuName(gpu.device) + " memory";
  auto gdr = cuda::attribute(gpu.device, cuda::CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED);
  if (!gdr.ok()) return gdr.status().withContext(where);
  if (*gdr == 0)
    return Status::FailedPrecondition(where +
                                      ": the GPU does not support GPUDirect RDMA "
                                      "(CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED is 0); "
                                      "no NIC can reach its memory");
  const int ibv_access = toIbvAccess(access);
  std::string dmabuf_why;
  if (ibv_mr* mr = registerDmabuf(addr, length, ibv_access, gpu.device, &dmabuf_why)) {
    TENT_DEBUG(kFabric, "%s: %zu bytes registered through dma-buf", where.c_str(), length);
    return std::unique_ptr<MemoryRegion>(new VerbsMr(ops_, mr, access));
  }
  // nvidia-peermem lets the kernel pin device memory behind a plain ibv_reg_mr.
  ibv_mr* mr = ops_.reg_mr(pd_, addr, length, ibv_access);
  if (mr != nullptr) {
    TENT_INFO(kFabric, "%s: registered through nvidia-peermem (dma-buf: %s)", where.c_str(),
              dmabuf_why.c_str());
    return std::unique_ptr<MemoryRegion>(new VerbsMr(ops_, mr, access));
  }
  const int err = errno;
  return Status::IoError(where + ": cannot register " + std::to_string(length) +
                         " bytes: dma-buf: " + dmabuf_why + "; ibv_reg_mr (nvidia-peermem): " +
                         errnoText(err) + " (load the nvidia-peermem module, or use dma-buf)");
}

}  // namespace tent::fabric::verbs
