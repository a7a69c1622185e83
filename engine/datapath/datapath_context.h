// DatapathContext: what the submitter, the pollers and the direct path may use - the
// config, the contexts, the segment table and its endpoint lookups, the slice pool,
// placement (on the rail map) and routing, slice hand-off, and the control requests -
// and nothing of the control plane. Every method here is datapath: noexcept, no
// allocation, no lock, no blocking call.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "config/config.h"
#include "lcore/waiter_bell.h"
#include "model/control_requests.h"
#include "model/datapath_stats.h"
#include "model/rdma_task.h"
#include "model/segment_table.h"
#include "topology/rail_map.h"

namespace tent::rdma {

class RdmaContext;
class RdmaEndPoint;
class SlicePoller;

class DatapathContext {
 public:
  DatapathContext(const config::Config& config, const topology::RailMap& rails,
                  std::vector<RdmaContext*> contexts, SegmentTable& segments, SlicePool& slices,
                  ControlRequests& requests, uint64_t max_wr_bytes)
      : config_(config),
        rails_(rails),
        contexts_(std::move(contexts)),
        segments_(segments),
        slices_(slices),
        requests_(requests),
        max_wr_bytes_(max_wr_bytes),
        priority_lane_(config::priorityLaneOn(config)) {}

  // The one thing given after construction, once, before any lcore runs or any request
  // is submitted (control path). It cannot come earlier: the pollers are built on this
  // context (a poller hands a slice routed to another poller's endpoint on through
  // enqueue()), so they exist only after it.
  void setPollers(std::vector<SlicePoller*> by_index, std::vector<SlicePoller*> rail_of_context) {
    by_index_ = std::move(by_index);
    rail_of_context_ = std::move(rail_of_context);
  }

  const config::Config& config() const noexcept { return config_; }
  size_t contextCount() const noexcept { return contexts_.size(); }
  RdmaContext& context(size_t i) const noexcept { return *contexts_[i]; }
  SegmentTable& segments() const noexcept { return segments_; }
  SlicePool& slicePool() const noexcept { return slices_; }
  SlicePoller* railPoller(uint32_t context) const noexcept { return rail_of_context_[context]; }
  // The longest WR every device carries (the smallest max message size).
  uint64_t maxWrBytes() const noexcept { return max_wr_bytes_; }
  // workers.priority_lane, resolved: latency-sensitive worker slices go to rail pollers.
  bool priorityLane() const noexcept { return priority_lane_; }
  const CompletionCounters& completions() const noexcept { return completions_; }
  // Rung when a task reaches its terminal state, for callers that sleep in waitTransfer.
  lcore::WaiterBell& completionBell() const noexcept { return completion_bell_; }

  // ---- endpoints ----
  // kReady with *out set; kConnecting after asking for a connect; kFailed when the
  // peer is unreachable or backing off; kUnknown without such a segment/device.
  EndpointLookup lookup(uint32_t context, SegmentId segment, uint32_t peer_device, uint64_t now,
                        RdmaEndPoint** out) const noexcept;
  // The same, in a record the caller found already (the submitter's, once per request).
  EndpointLookup lookup(SegmentRecord& record, uint32_t context, uint32_t peer_device, uint64_t now,
                        RdmaEndPoint** out) const noexcept;
  // The segment's control session is up but answers nothing (SegmentRecord::slow).
  bool segmentSlow(SegmentId segment) const noexcept {
    SegmentRecord* rec = segments_.find(segment);
    return rec != nullptr && rec->slow.load(std::memory_order_acquire);
  }
  // Retires `ep` (completion error, post failure, timeout): the first caller queues it.
  void requestReset(RdmaEndPoint* ep) const noexcept;

  // ---- slices ----
  // The request's device placement (RdmaTask::placement), made once per request.
  void placeTask(RdmaTask& task, uint64_t now) const noexcept;
  // A first slice's device pair, from its task's placement; false when none.
  bool placeSlice(RdmaSlice& slice) const noexcept;
  // A retried slice's device pair, placed again (a device may have paused since);
  // false when none.
  bool routeSlice(RdmaSlice& slice, uint64_t now) const noexcept;
  // Devices whose port is down or that are dead (device events): never routed to.
  uint64_t downMask() const noexcept;
  uint64_t usableDevices(uint64_t device_mask) const noexcept { return device_mask & ~downMask(); }
  // The poller that carries the slice: its context's rail poller when the task takes
  // the priority lane, else the background poller owning its endpoint slot (in
  // `record` when the caller found it already, else looked up).
  SlicePoller* pollerFor(const RdmaTask& task, const RdmaSlice& slice,
                         SegmentRecord* record = nullptr) const noexcept;
  // Hands the slice to its poller; false when that poller's ring is full.
  bool enqueue(RdmaTask& task, RdmaSlice* slice, SegmentRecord* record = nullptr) const noexcept;
  // Accounts the slice's result (bytes per device and intent, a missed deadline when
  // it completes its task late) and frees it (a pool slice). Its WR, if any, has completed.
  void finishSlice(RdmaSlice* slice, SliceResult result) const noexcept;
  // finishSlice() without the release: true when the caller returns the slice to the
  // pool (an lcore batches its pass's finished slices into one SlicePool::releaseBurst);
  // false for a task's own slice, which the caller must not touch any more.
  bool accountSlice(RdmaSlice* slice, SliceResult result) const noexcept;
  // updateSliceStatus(), then the completion bell when that ended the task: the one way
  // the datapath accounts a result, so no task's end goes unrung (api/wait_nap.h relies
  // on it). Returns the state it published (PENDING: the task goes on). After it
  // returns the task may be gone.
  TransferState settleSlice(RdmaTask& task, uint64_t bytes, SliceResult result) const noexcept;

 private:
  const config::Config& config_;
  const topology::RailMap& rails_;
  std::vector<RdmaContext*> contexts_;
  SegmentTable& segments_;
  SlicePool& slices_;
  ControlRequests& requests_;
  std::vector<SlicePoller*> by_index_;
  std::vector<SlicePoller*> rail_of_context_;
  const uint64_t max_wr_bytes_;
  const bool priority_lane_;
  CompletionCounters completions_;
  mutable lcore::WaiterBell completion_bell_;

  // Devices paused after errors (bit = context index).
  uint64_t pausedMask(uint64_t now) const noexcept;
  // The peer device for slice `s` on local device `local`; false when none.
  bool choosePair(RdmaSlice& s, uint32_t local) const noexcept;
};

}  // namespace tent::rdma
