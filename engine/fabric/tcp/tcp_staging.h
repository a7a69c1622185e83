// GPU memory on the tcp provider (private to engine/fabric/tcp): a socket cannot read
// or write device memory, so its bytes pass through page-locked host buffers.
//
//   send stream (poster or service thread)  device -> staging buffer (driver copy,
//       synchronous on the GPU's stream of the pool), then sendmsg from the buffer;
//   service thread, receiving                recvmsg into its own buffer, then
//       staging -> device before the WR (or the WRITE's ack) completes.
//
// The pool is per device, made by the first registration of GPU memory and freed with
// the device: `buffers` send buffers shared by every send stream of the device, plus
// one receive buffer that only the service thread uses. A send buffer is held for one
// gather-and-sendmsg (tcp_tx_datapath.cc), never across a full socket or a wait (so
// buffers always come back), and the receive side never waits for a send buffer (a
// wait there could close a cycle with the peer's own streams). A send stream that
// finds every buffer taken marks its QP and counts itself a waiter; whoever gives a
// buffer back while the count is not zero wakes the service thread, which kicks the
// marked QPs again (per-QP order is the stream's own). A stream that holds a buffer
// goes on sending until its socket is full or it has nothing left, so a waiting QP gets
// its turn at the latest then (tcp_internal.h lists every waiter and its waker).
// Host memory never comes here.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include "cuda/cuda_api.h"
#include "tent/status.h"

namespace tent::fabric::tcp {

inline constexpr uint32_t kMaxStagingBuffers = 1024;
inline constexpr uint64_t kMinStagingBufferBytes = 4096;
inline constexpr uint64_t kMaxStagingBufferBytes = uint64_t{1} << 30;
// CUDA ordinals (in this process) whose memory a tcp device can register.
inline constexpr int kMaxStagingGpus = 64;

class StagingPool {
 public:
  // Control path. create() allocates every buffer at once (cuMemHostAlloc, portable)
  // in `gpu`'s primary context; addGpu() readies a GPU's copy stream (once per GPU).
  static Result<std::unique_ptr<StagingPool>> create(uint32_t buffers, uint64_t buffer_bytes,
                                                     int gpu);
  Status addGpu(int gpu);
  ~StagingPool();  // frees the buffers, destroys the streams, releases the contexts
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  uint32_t buffers() const noexcept { return count_; }
  uint64_t bufferBytes() const noexcept { return bytes_; }

  // Datapath (tcp_staging_datapath.cc).
  // A send buffer's index, or -1 when every one is in use.
  int acquire() noexcept;
  // Gives it back; true when a send stream waits for one (the caller wakes the
  // service thread).
  bool release(int index) noexcept;
  uint8_t* buffer(int index) const noexcept { return base_[index]; }
  uint8_t* receiveBuffer() const noexcept { return base_[count_]; }
  // A send stream found no buffer: counts it a waiter. true when one is free by now
  // (then the caller tries again instead of waiting).
  bool wait() noexcept;
  // The service thread: true when someone waited since the last call.
  bool takeWaiters() noexcept { return waiters_.exchange(0, std::memory_order_seq_cst) != 0; }
  // Copies between device memory of `gpu` and a staging buffer, synchronously on the
  // GPU's stream of the pool, with its primary context current (the caller's is put
  // back). false: the driver refused or failed the copy.
  bool copy(int gpu, void* dst, const void* src, uint64_t bytes) noexcept;

 private:
  StagingPool() = default;
  struct Lane {
    cuda::CUcontext ctx = nullptr;
    std::atomic<cuda::CUstream> stream{nullptr};  // published after ctx
  };

  const cuda::CudaDriver* d_ = nullptr;
  uint32_t count_ = 0;
  uint64_t bytes_ = 0;
  int alloc_gpu_ = -1;                // the context the buffers were allocated in
  std::unique_ptr<uint8_t*[]> base_;  // count_ send buffers, then the receive buffer
  static constexpr uint32_t kWords = kMaxStagingBuffers / 64;
  std::atomic<uint64_t> free_[kWords] = {};  // bit set: the send buffer is free
  std::atomic<uint32_t> waiters_{0};
  std::mutex mu_;  // addGpu
  Lane lanes_[kMaxStagingGpus];
};

}  // namespace tent::fabric::tcp
