// The tcp provider's staging pool on the datapath (tcp_staging.h): taking and giving
// back send buffers (a lock-free bitmap) and the driver copies. No allocation, no lock;
// the driver calls are the copies themselves.
#include <bit>

#include "fabric/tcp/tcp_staging.h"

namespace tent::fabric::tcp {

int StagingPool::acquire() noexcept {
  const uint32_t words = (count_ + 63) / 64;
  for (uint32_t w = 0; w < words; ++w) {
    uint64_t bits = free_[w].load(std::memory_order_acquire);
    while (bits != 0) {
      const uint64_t bit = bits & (~bits + 1);  // the lowest free one
      if (free_[w].compare_exchange_weak(bits, bits & ~bit, std::memory_order_acq_rel)) {
        return static_cast<int>(w * 64 + static_cast<uint32_t>(std::countr_zero(bit)));
      }
    }
  }
  return -1;
}

bool StagingPool::release(int index) noexcept {
  const auto i = static_cast<uint32_t>(index);
  free_[i / 64].fetch_or(uint64_t{1} << (i % 64), std::memory_order_seq_cst);
  return waiters_.load(std::memory_order_seq_cst) != 0;
}

bool StagingPool::wait() noexcept {
  waiters_.fetch_add(1, std::memory_order_seq_cst);
  // A buffer given back before the count above was seen by nobody: look once more.
  const uint32_t words = (count_ + 63) / 64;
  for (uint32_t w = 0; w < words; ++w) {
    if (free_[w].load(std::memory_order_seq_cst) != 0) return true;
  }
  return false;
}

bool StagingPool::copy(int gpu, void* dst, const void* src, uint64_t bytes) noexcept {
  if (gpu < 0 || gpu >= kMaxStagingGpus) return false;
  Lane& lane = lanes_[gpu];
  const cuda::CUstream stream = lane.stream.load(std::memory_order_acquire);
  if (stream == nullptr) return false;
  // A caller's thread may post (the direct path): its current context is put back.
  cuda::CUcontext previous = nullptr;
  (void)d_->cuCtxGetCurrent(&previous);
  if (previous != lane.ctx) (void)d_->cuCtxSetCurrent(lane.ctx);
  bool ok = d_->cuMemcpyAsync(reinterpret_cast<cuda::CUdeviceptr>(dst),
                              reinterpret_cast<cuda::CUdeviceptr>(src), bytes,
                              stream) == cuda::CUDA_SUCCESS;
  // Synchronise even after a refused copy: one queued before it may still run.
  ok = d_->cuStreamSynchronize(stream) == cuda::CUDA_SUCCESS && ok;
  if (previous != lane.ctx) (void)d_->cuCtxSetCurrent(previous);
  return ok;
}

}  // namespace tent::fabric::tcp
