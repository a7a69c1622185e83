// RdmaContext: one per fabric device. Owns the device's completion queues: one
// data CQ per posting poller (so no CQ is polled by two threads), the direct CQ
// (polled by callers and the context's rail poller) and a passive CQ for QPs a
// peer connected to us (one-sided targets: it never sees a completion).
// Also the direct lane owner and the device's health (error streak, pause).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "fabric/fabric.h"
#include "notify/notify_link.h"
#include "tent/status.h"

namespace tent::notify {
class Inbox;
}

namespace tent::rdma {

struct RdmaTask;
struct RdmaSlice;

// What endpoints of a context need for their notify QPs (notify.enabled).
struct NotifySetup {
  notify::Limits limits;
  notify::Inbox* inbox = nullptr;  // where passive links deliver
};
class RdmaEndPoint;

class RdmaContext {
 public:
  static constexpr uint32_t kMaxLaneDepth = 64;  // = the range of direct.qp_depth (a test)

  RdmaContext(uint32_t index, fabric::Device& device) : index_(index), device_(device) {}
  RdmaContext(const RdmaContext&) = delete;
  RdmaContext& operator=(const RdmaContext&) = delete;

  // What CQs the context needs: a data CQ per posting poller that posts on it (0 = none:
  // that poller never posts here), the direct CQ, the passive CQ, the direct lane depth.
  struct CqPlan {
    std::vector<uint32_t> data_cq_depth;
    uint32_t direct_cq_depth = 0;
    uint32_t passive_cq_depth = 0;
    uint32_t lane_depth = 1;
  };
  // Control path: creates the CQs of the plan.
  Status init(const CqPlan& plan);

  uint32_t index() const noexcept { return index_; }
  fabric::Device& device() noexcept { return device_; }
  const std::string& name() const noexcept { return device_.info().name; }
  fabric::CompletionQueue* dataCq(uint32_t poller) const noexcept {
    return data_cqs_[poller].get();
  }
  fabric::CompletionQueue* directCq() const noexcept { return direct_cq_.get(); }
  fabric::CompletionQueue* passiveCq() const noexcept { return passive_cq_.get(); }
  // Notifications: nullptr when notify.enabled is false (no notify QPs at all).
  const NotifySetup* notify() const noexcept { return notify_.inbox ? &notify_ : nullptr; }
  void setNotify(const NotifySetup& setup) { notify_ = setup; }
  uint32_t postingPollers() const noexcept { return static_cast<uint32_t>(data_cqs_.size()); }

  // Direct lane: at most `lane_depth` latency-sensitive tasks at a time per context
  // (direct.qp_depth; 1 = the RFC's single owner).
  bool tryAcquireDirectLane(const RdmaTask* task) noexcept { return acquireLaneSlot(task) >= 0; }
  // The lane slot acquired, or -1 when every slot is busy.
  int acquireLaneSlot(const RdmaTask* task) noexcept;
  // Releases only a lane slot `task` owns, and its timeout slot;
  // returns whether it did.
  bool releaseDirectLane(const RdmaTask* task) noexcept;
  // What a lane slot carries while its WR is posted, for the software timeout:
  // the post time (0 = idle) and the endpoint to reset when it expires.
  void notePosted(int slot, uint64_t post_ns, RdmaEndPoint* ep, RdmaSlice* slice) noexcept;
  // Endpoints whose direct WR has been posted longer than `limit_ns` (at most one per slot).
  size_t expiredLanes(uint64_t now, uint64_t limit_ns, RdmaEndPoint** out,
                      size_t max) const noexcept;
  uint32_t laneDepth() const noexcept { return lane_depth_; }
  uint32_t lanesInUse() const noexcept;
  // The task holding a lane slot here no longer has a caller that will poll for it
  // (canceled, failing, its batch freed, or its WR expired): the rail poller reaps
  // this context's direct CQ even with direct.poll_by_rail false. Any thread.
  void markAbandoned(const RdmaTask* task) noexcept;
  // Does a held lane need the rail poller: abandoned, or posted longer than `limit_ns`?
  bool needsReaper(uint64_t now, uint64_t limit_ns) const noexcept;

  // Device health: `threshold` consecutive errors pause the device for `pause_ns`.
  void recordSliceError(uint32_t threshold, uint64_t pause_ns, uint64_t now_ns) noexcept;
  // Written only when there is a streak to end: every submitter reads this line
  // (paused()), and a store per slice would take it from all of them.
  void recordSliceSuccess() noexcept {
    if (error_streak_.load(std::memory_order_relaxed) != 0)
      error_streak_.store(0, std::memory_order_relaxed);
  }
  bool paused(uint64_t now_ns) const noexcept {
    return paused_until_ns_.load(std::memory_order_relaxed) > now_ns;
  }
  uint64_t pauses() const noexcept { return pauses_.load(std::memory_order_relaxed); }

  // Device events (written by the control plane, read by the datapath). Down: the
  // port has no link, no new slice or direct WR goes here (unlike paused(), even when
  // no other device is left). Dead: the device reported a fatal error; down for good,
  // and no completion comes any more, so the pollers fail what is posted here.
  void setPortDown(bool down) noexcept { port_down_.store(down, std::memory_order_release); }
  void markDead() noexcept { dead_.store(true, std::memory_order_release); }
  bool dead() const noexcept { return dead_.load(std::memory_order_acquire); }
  bool down() const noexcept {
    return port_down_.load(std::memory_order_acquire) || dead_.load(std::memory_order_acquire);
  }
  // Dead device: takes over the lane slot `slot` from the WR posted on it, which will
  // never complete. Returns the slice posted there (its task's lane released) or
  // nullptr when the slot is idle, not yet posted, or its completion took it first.
  RdmaSlice* claimDeadLane(uint32_t slot) noexcept;
  // Does the direct WR of `task` still hold its lane here? Its completion (or a failed
  // post) handles the slice only if this returns true: then the lane is released.
  bool releaseLaneForCompletion(const RdmaTask* task) noexcept { return releaseDirectLane(task); }

 private:
  uint32_t index_;
  fabric::Device& device_;
  std::vector<std::unique_ptr<fabric::CompletionQueue>> data_cqs_;
  std::unique_ptr<fabric::CompletionQueue> direct_cq_;
  std::unique_ptr<fabric::CompletionQueue> passive_cq_;
  NotifySetup notify_;
  uint32_t lane_depth_ = 1;
  alignas(64) std::atomic<const RdmaTask*> direct_lane_owner_[kMaxLaneDepth] = {};
  std::atomic<uint64_t> lane_post_ns_[kMaxLaneDepth] = {};
  std::atomic<RdmaEndPoint*> lane_endpoint_[kMaxLaneDepth] = {};
  std::atomic<RdmaSlice*> lane_slice_[kMaxLaneDepth] = {};
  std::atomic<bool> lane_abandoned_[kMaxLaneDepth] = {};
  alignas(64) std::atomic<uint32_t> error_streak_{0};
  std::atomic<uint64_t> paused_until_ns_{0};
  std::atomic<uint64_t> pauses_{0};
  std::atomic<bool> port_down_{false};
  std::atomic<bool> dead_{false};
};

}  // namespace tent::rdma
