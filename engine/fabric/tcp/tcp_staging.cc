// The tcp provider's staging pool (tcp_staging.h): allocation, the GPUs' copy streams,
// and release. Control path.
#include "fabric/tcp/tcp_staging.h"

#include <string>

#include "cuda/cuda_driver.h"
#include "cuda/cuda_memory.h"

namespace tent::fabric::tcp {

using namespace tent::cuda;  // the driver's own names read best unqualified here

namespace {

Status driverFailed(const CudaDriver& d, const std::string& what, CUresult rc) {
  return Status::IoError("tcp staging: " + what + ": " + errorText(d, rc));
}

}  // namespace

Result<std::unique_ptr<StagingPool>> StagingPool::create(uint32_t buffers, uint64_t buffer_bytes,
                                                         int gpu) {
  if (buffers == 0 || buffers > kMaxStagingBuffers || buffer_bytes < kMinStagingBufferBytes ||
      buffer_bytes > kMaxStagingBufferBytes) {
    return Status::InvalidArgument("tcp staging: " + std::to_string(buffers) + " buffers of " +
                                   std::to_string(buffer_bytes) + " bytes is out of range");
  }
  auto d = driver();
  if (!d.ok()) {
    return d.status().withContext(
        "tcp: GPU memory is staged through pinned host buffers, which need the CUDA driver");
  }
  if ((*d)->cuMemHostAlloc == nullptr || (*d)->cuMemFreeHost == nullptr) {
    return Status::FailedPrecondition(
        "tcp: the CUDA driver has no cuMemHostAlloc / cuMemFreeHost: no pinned staging "
        "buffers for GPU memory");
  }
  std::unique_ptr<StagingPool> pool(new StagingPool());
  pool->d_ = *d;
  pool->count_ = buffers;
  pool->bytes_ = buffer_bytes;
  pool->base_ = std::make_unique<uint8_t*[]>(buffers + 1);
  // The lane first: it holds the primary context the buffers live in until they are freed.
  TENT_RETURN_IF_ERROR(pool->addGpu(gpu));
  pool->alloc_gpu_ = gpu;
  TENT_ASSIGN_OR_RETURN(ScopedContext scope, ScopedContext::enter(gpu));
  for (uint32_t i = 0; i <= buffers; ++i) {
    void* p = nullptr;
    const CUresult rc = (*d)->cuMemHostAlloc(&p, buffer_bytes, CU_MEMHOSTALLOC_PORTABLE);
    if (rc != CUDA_SUCCESS) {
      return driverFailed(**d,
                          "cuMemHostAlloc of staging buffer " + std::to_string(i + 1) + " of " +
                              std::to_string(buffers + 1) + " (" + std::to_string(buffer_bytes) +
                              " bytes; fabric.tcp.gpu_staging_buffers / _buffer_bytes)",
                          rc);
    }
    pool->base_[i] = static_cast<uint8_t*>(p);
  }
  for (uint32_t i = 0; i < buffers; ++i) {
    pool->free_[i / 64].fetch_or(uint64_t{1} << (i % 64), std::memory_order_relaxed);
  }
  return pool;
}

Status StagingPool::addGpu(int gpu) {
  if (gpu < 0 || gpu >= kMaxStagingGpus) {
    return Status::InvalidArgument("tcp: GPU memory of cuda:" + std::to_string(gpu) + ": at most " +
                                   std::to_string(kMaxStagingGpus) +
                                   " GPUs per process are supported");
  }
  std::lock_guard<std::mutex> g(mu_);
  Lane& lane = lanes_[gpu];
  if (lane.stream.load(std::memory_order_acquire) != nullptr) return Status::OK();
  TENT_ASSIGN_OR_RETURN(ScopedContext scope, ScopedContext::enter(gpu));
  CUdevice dev = 0;
  CUresult rc = d_->cuDeviceGet(&dev, gpu);
  if (rc != CUDA_SUCCESS) return driverFailed(*d_, "cuDeviceGet", rc);
  CUcontext ctx = nullptr;
  rc = d_->cuDevicePrimaryCtxRetain(&ctx, dev);
  if (rc != CUDA_SUCCESS) return driverFailed(*d_, "cuDevicePrimaryCtxRetain", rc);
  CUstream stream = nullptr;
  rc = d_->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING);
  if (rc != CUDA_SUCCESS) {
    (void)d_->cuDevicePrimaryCtxRelease(dev);
    return driverFailed(*d_, "cuStreamCreate", rc);
  }
  lane.ctx = ctx;
  lane.stream.store(stream, std::memory_order_release);
  return Status::OK();
}

StagingPool::~StagingPool() {
  if (d_ == nullptr) return;
  if (alloc_gpu_ >= 0) {
    auto scope = ScopedContext::enter(alloc_gpu_);
    for (uint32_t i = 0; i <= count_; ++i) {
      if (base_[i] != nullptr) (void)d_->cuMemFreeHost(base_[i]);
    }
  }
  for (int gpu = 0; gpu < kMaxStagingGpus; ++gpu) {
    Lane& lane = lanes_[gpu];
    const CUstream stream = lane.stream.load(std::memory_order_acquire);
    if (stream == nullptr) continue;
    CUcontext previous = nullptr;
    (void)d_->cuCtxGetCurrent(&previous);
    (void)d_->cuCtxSetCurrent(lane.ctx);
    (void)d_->cuStreamDestroy(stream);
    (void)d_->cuCtxSetCurrent(previous);
    CUdevice dev = 0;
    if (d_->cuDeviceGet(&dev, gpu) == CUDA_SUCCESS) (void)d_->cuDevicePrimaryCtxRelease(dev);
  }
}

}  // namespace tent::fabric::tcp
