#include "model/rdma_context.h"

namespace tent::rdma {

Status RdmaContext::init(const CqPlan& plan) {
  if (plan.lane_depth == 0 || plan.lane_depth > kMaxLaneDepth)
    return Status::InvalidArgument("direct lane depth must be in [1, " +
                                   std::to_string(kMaxLaneDepth) + "]");
  lane_depth_ = plan.lane_depth;
  for (uint32_t depth : plan.data_cq_depth) {
    if (depth == 0) {
      data_cqs_.push_back(nullptr);
      continue;
    }
    auto cq = device_.createCq(depth);
    if (!cq.ok()) return cq.status().withContext("data CQ on " + name());
    data_cqs_.push_back(std::move(cq).value());
  }
  auto direct = device_.createCq(plan.direct_cq_depth);
  if (!direct.ok()) return direct.status().withContext("direct CQ on " + name());
  direct_cq_ = std::move(direct).value();
  auto passive = device_.createCq(plan.passive_cq_depth);
  if (!passive.ok()) return passive.status().withContext("passive CQ on " + name());
  passive_cq_ = std::move(passive).value();
  return Status::OK();
}

int RdmaContext::acquireLaneSlot(const RdmaTask* task) noexcept {
  for (uint32_t i = 0; i < lane_depth_; ++i) {
    const RdmaTask* idle = nullptr;
    if (direct_lane_owner_[i].compare_exchange_strong(idle, task, std::memory_order_acq_rel)) {
      lane_abandoned_[i].store(false, std::memory_order_relaxed);
      return static_cast<int>(i);
    }
  }
  return -1;
}

void RdmaContext::notePosted(int slot, uint64_t post_ns, RdmaEndPoint* ep,
                             RdmaSlice* slice) noexcept {
  lane_endpoint_[slot].store(ep, std::memory_order_relaxed);
  lane_slice_[slot].store(slice, std::memory_order_relaxed);
  lane_post_ns_[slot].store(post_ns, std::memory_order_release);
}

size_t RdmaContext::expiredLanes(uint64_t now, uint64_t limit_ns, RdmaEndPoint** out,
                                 size_t max) const noexcept {
  size_t n = 0;
  for (uint32_t i = 0; i < lane_depth_ && n < max; ++i) {
    uint64_t posted = lane_post_ns_[i].load(std::memory_order_acquire);
    if (posted == 0 || now <= posted || now - posted <= limit_ns) continue;
    RdmaEndPoint* ep = lane_endpoint_[i].load(std::memory_order_relaxed);
    // Re-check: the slot may have completed and been reused while we read it.
    if (ep && lane_post_ns_[i].load(std::memory_order_acquire) == posted) out[n++] = ep;
  }
  return n;
}

bool RdmaContext::releaseDirectLane(const RdmaTask* task) noexcept {
  for (uint32_t i = 0; i < lane_depth_; ++i) {
    if (direct_lane_owner_[i].load(std::memory_order_acquire) != task) continue;
    // Cleared before the slot is free: a late mark lands on this (stale) owner or on a
    // successor, where it costs one needless CQ poll, never a missed one. Its timeout
    // slot goes with it (nothing of the lane is posted any more).
    lane_abandoned_[i].store(false, std::memory_order_relaxed);
    lane_post_ns_[i].store(0, std::memory_order_release);
    const RdmaTask* owner = task;
    if (direct_lane_owner_[i].compare_exchange_strong(owner, nullptr, std::memory_order_acq_rel))
      return true;
  }
  return false;
}

RdmaSlice* RdmaContext::claimDeadLane(uint32_t slot) noexcept {
  if (slot >= lane_depth_) return nullptr;
  const RdmaTask* owner = direct_lane_owner_[slot].load(std::memory_order_acquire);
  if (owner == nullptr || lane_post_ns_[slot].load(std::memory_order_acquire) == 0) return nullptr;
  RdmaSlice* slice = lane_slice_[slot].load(std::memory_order_relaxed);
  lane_abandoned_[slot].store(false, std::memory_order_relaxed);
  lane_post_ns_[slot].store(0, std::memory_order_release);
  // The same CAS a completion's release makes: exactly one of the two wins the slot.
  if (!direct_lane_owner_[slot].compare_exchange_strong(owner, nullptr, std::memory_order_acq_rel))
    return nullptr;
  return slice;
}

void RdmaContext::markAbandoned(const RdmaTask* task) noexcept {
  for (uint32_t i = 0; i < lane_depth_; ++i)
    if (direct_lane_owner_[i].load(std::memory_order_acquire) == task)
      lane_abandoned_[i].store(true, std::memory_order_release);
}

bool RdmaContext::needsReaper(uint64_t now, uint64_t limit_ns) const noexcept {
  for (uint32_t i = 0; i < lane_depth_; ++i) {
    if (direct_lane_owner_[i].load(std::memory_order_acquire) == nullptr) continue;
    if (lane_abandoned_[i].load(std::memory_order_acquire)) return true;
    uint64_t posted = lane_post_ns_[i].load(std::memory_order_acquire);
    if (posted != 0 && now > posted && now - posted > limit_ns) return true;
  }
  return false;
}

uint32_t RdmaContext::lanesInUse() const noexcept {
  uint32_t n = 0;
  for (uint32_t i = 0; i < lane_depth_; ++i)
    n += direct_lane_owner_[i].load(std::memory_order_relaxed) != nullptr;
  return n;
}

void RdmaContext::recordSliceError(uint32_t threshold, uint64_t pause_ns,
                                   uint64_t now_ns) noexcept {
  uint32_t streak = error_streak_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (threshold == 0 || streak < threshold) return;
  error_streak_.store(0, std::memory_order_relaxed);
  paused_until_ns_.store(now_ns + pause_ns, std::memory_order_relaxed);
  pauses_.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace tent::rdma
