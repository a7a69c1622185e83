// Soft receive queues, control side: the shared area of a QP slot and attaching a QP's
// receive queue to its CQ. The datapath is soft_recv_datapath.cc.
#include <new>
#include <string>

#include "fabric/soft/soft_internal.h"

namespace tent::fabric::soft {

Result<DeviceState::RqArea> rqAreaFor(DeviceState& d, uint32_t slot) {
  {
    std::lock_guard<std::mutex> g(d.ctrl_mutex);
    if (d.rq_areas.empty()) d.rq_areas.resize(kMaxQps);
    if (d.rq_areas[slot].base != nullptr) return d.rq_areas[slot];
  }
  // The slot is ours (createQp took it): nobody else fills this entry meanwhile.
  auto mem = d.core->allocateShm(kRqAreaBytes, d.info.numa_node);
  if (!mem.ok()) return mem.status().withContext("soft " + d.info.name + ": receive queue");
  auto* base = static_cast<uint8_t*>(*mem);
  MrSnapshot entry;
  entry.addr = reinterpret_cast<uintptr_t>(base);
  entry.length = kRqAreaBytes;
  entry.access = kAccessLocalWrite | kAccessRemoteWrite;
  {
    std::lock_guard<std::mutex> g(d.core->mem_mutex);
    uintptr_t shm_base = 0;
    if (const ShmAllocation* a =
            d.core->findAllocationLocked(entry.addr, kRqAreaBytes, &shm_base)) {
      entry.shm_id = a->id;
      entry.shm_offset = entry.addr - shm_base;
      entry.shm_length = a->length;
    }
  }
  std::lock_guard<std::mutex> g(d.ctrl_mutex);
  if (d.free_mrs.empty()) {
    (void)d.core->freeShm(base, kRqAreaBytes);
    return Status::ResourceExhausted("soft: device " + d.info.name +
                                     " has no memory region left for a receive queue");
  }
  const uint32_t mr_slot = d.free_mrs.back();
  d.free_mrs.pop_back();
  uint16_t gen = ++d.mr_generation[mr_slot];
  if (gen == 0) gen = d.mr_generation[mr_slot] = 1;
  entry.key = uint32_t{gen} << kMrSlotBits | mr_slot;
  writeMr(d.view.mrs[mr_slot], entry);
  // The segment is zero-filled: construct the atomics in place.
  auto* h = new (base) RqHeader();
  (void)h;
  auto* slots = reinterpret_cast<RqSlot*>(base + sizeof(RqHeader));
  for (uint32_t i = 0; i < kMaxRecvWr; ++i) new (&slots[i].state) std::atomic<uint64_t>(0);
  d.rq_areas[slot] = DeviceState::RqArea{base, entry.key, mr_slot};
  return d.rq_areas[slot];
}

void releaseRqAreas(DeviceState& d) noexcept {
  for (DeviceState::RqArea& a : d.rq_areas) {
    if (a.base == nullptr) continue;
    clearMr(d.view.mrs[a.mr_slot]);
    (void)d.core->freeShm(a.base, kRqAreaBytes);
    a = DeviceState::RqArea{};
  }
}

void SoftQp::attachRecv(DeviceState::RqArea area, uint32_t max_recv_wr) {
  (void)max_recv_wr;  // set by the constructor
  rq_ = reinterpret_cast<RqHeader*>(area.base);
  rq_slots_ = reinterpret_cast<RqSlot*>(area.base + sizeof(RqHeader));
  // A new QP in the slot starts from an empty queue. Slots a sender of the slot's older
  // QP still names carry that QP's number: its CAS fails on them.
  rq_->posted.store(0, std::memory_order_relaxed);
  rq_->consumed.store(0, std::memory_order_relaxed);
  for (uint32_t i = 0; i < kMaxRecvWr; ++i) {
    rq_slots_[i].state.store(rqWord(qp_num_, RqState::kFree), std::memory_order_relaxed);
  }
  dev_->view.qps[slot_index_].rq_key.store(area.key, std::memory_order_release);
  SpinGuard g(dev_->lock);
  rq_prev_ = nullptr;
  rq_next_ = recv_cq_->recv_qps;
  if (rq_next_ != nullptr) rq_next_->rq_prev_ = this;
  recv_cq_->recv_qps = this;
  recv_cq_->recv_count.fetch_add(1, std::memory_order_release);
}

void SoftQp::detachRecvLocked() noexcept {
  if (rq_ == nullptr) return;
  dev_->view.qps[slot_index_].rq_key.store(0, std::memory_order_release);
  if (rq_prev_ != nullptr) rq_prev_->rq_next_ = rq_next_;
  if (rq_next_ != nullptr) rq_next_->rq_prev_ = rq_prev_;
  if (recv_cq_->recv_qps == this) recv_cq_->recv_qps = rq_next_;
  rq_prev_ = rq_next_ = nullptr;
  recv_cq_->recv_count.fetch_sub(1, std::memory_order_release);
}

}  // namespace tent::fabric::soft
