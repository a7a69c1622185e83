// Soft NIC datapath, device memory: a WR whose local SGEs or remote region are GPU
// memory moves its bytes with the CUDA driver's memcpy on its QP's lane (soft_gpu.h).
// No allocation; the driver calls are the NIC's DMA engine here.
#include <sys/uio.h>

#include "fabric/soft/soft_gpu.h"
#include "fabric/soft/soft_internal.h"

namespace tent::fabric::soft {

void GpuLane::onDone(void* lane) noexcept {
  static_cast<GpuLane*>(lane)->done_.fetch_add(1, std::memory_order_release);
}

uint64_t GpuLane::copy(WrOpcode op, const iovec* iov, uint32_t n, uint8_t* remote,
                       bool* ok) noexcept {
  // A caller's thread may post (the direct path): its current context is put back.
  cuda::CUcontext previous = nullptr;
  (void)d_->cuCtxGetCurrent(&previous);
  if (previous != ctx_) (void)d_->cuCtxSetCurrent(ctx_);
  *ok = true;
  for (uint32_t i = 0; i < n && *ok; ++i) {
    const auto local = reinterpret_cast<cuda::CUdeviceptr>(iov[i].iov_base);
    const auto far = reinterpret_cast<cuda::CUdeviceptr>(remote);
    *ok = iov[i].iov_len == 0 || d_->cuMemcpyAsync(op == WrOpcode::kRdmaWrite ? far : local,
                                                   op == WrOpcode::kRdmaWrite ? local : far,
                                                   iov[i].iov_len, stream_) == cuda::CUDA_SUCCESS;
    remote += iov[i].iov_len;
  }
  uint64_t seq = 0;
  if (d_->cuLaunchHostFunc(stream_, &GpuLane::onDone, this) == cuda::CUDA_SUCCESS) {
    seq = ++issued_;
  } else {
    synchronize();  // no count will come: wait here for the copies already queued
    *ok = false;
  }
  if (previous != ctx_) (void)d_->cuCtxSetCurrent(previous);
  return seq;
}

WcStatus SoftQp::copyGpu(const SendWr& wr, const iovec* iov, const MrSnapshot& mr, int local_device,
                         WrSlot& s) noexcept {
  uint8_t* remote = nullptr;  // the remote range, as this process reaches it
  int device = local_device;  // the GPU whose lane runs the copy
  if (peer_->sameProcess()) {
    remote = reinterpret_cast<uint8_t*>(wr.remote_addr);
    if (device < 0) device = mr.gpu_device;
  } else if (mr.gpu_share == kGpuLegacyIpc || mr.gpu_share == kGpuVmmFd) {
    const GpuImport* imp = peer_->gpuImport(remote_, wr.rkey, mr);
    if (imp == nullptr) return WcStatus::kRemoteOperation;
    remote = imp->local_base + (wr.remote_addr - imp->owner_base);
    if (device < 0) device = imp->device;
  } else if (mr.gpu_share == kGpuNone && mr.shm_id != 0) {
    uint8_t* base = peer_->segmentBase(mr.shm_id, mr.shm_length);
    if (base == nullptr) return WcStatus::kRemoteOperation;
    remote = base + mr.shm_offset + (wr.remote_addr - mr.addr);
  } else {
    // Device memory its owner cannot share, or a peer's private host memory, which
    // process_vm_* cannot move to or from device memory.
    return WcStatus::kRemoteOperation;
  }
  // The QP's first WR on device memory makes its lane (once, like a NIC's first use
  // of a translation); it lives until the QP is destroyed.
  if (!gpu_lane_) gpu_lane_.reset(GpuLane::create(*dev_->core, device));
  if (!gpu_lane_) return WcStatus::kGeneral;
  bool ok = false;
  s.gpu_seq = gpu_lane_->copy(wr.opcode, iov, wr.num_sge, remote, &ok);
  return ok ? WcStatus::kSuccess : WcStatus::kGeneral;
}

}  // namespace tent::fabric::soft
