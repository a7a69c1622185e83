// What the datapath asks of the control plane - connect this slot, retire that
// endpoint, refetch that segment's descriptor - without waiting: a lock-free MPSC ring
// and an eventfd that wakes the control loop (one write per request newly queued; a
// slot already queued is not queued twice; refetches are rate limited).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "lcore/ring.h"
#include "model/segment_table.h"
#include "tent/status.h"

namespace tent::rdma {

// One request as the control plane takes it: a slot to connect or retire, or a
// segment whose descriptor to refetch.
struct ControlRequest {
  EndpointSlot* connect = nullptr;
  SegmentId refresh = 0;  // meaningful when connect == nullptr
};

class ControlRequests {
 public:
  ControlRequests() = default;
  ~ControlRequests();
  ControlRequests(const ControlRequests&) = delete;
  ControlRequests& operator=(const ControlRequests&) = delete;
  // `refresh_gap_ns`: at most one refetch is queued per gap (bootstrap.descriptor_refresh_ms).
  Status init(uint32_t capacity, uint64_t refresh_gap_ns);

  // ---- datapath (inside an ebr::ReadSection: `slot` stays valid) ----
  void queue(EndpointSlot* slot) noexcept;
  // The segment's descriptor may be stale (a request named a range it does not hold).
  // Carries the id, not the record: the record may be retired before the loop looks.
  void queueRefresh(SegmentId id) noexcept;

  // ---- control plane ----
  int wakeFd() const noexcept { return wake_fd_; }
  void drainWake() noexcept;
  bool next(ControlRequest* out) noexcept;
  uint64_t refreshesSkipped() const noexcept {
    return refreshes_skipped_.load(std::memory_order_relaxed);
  }

 private:
  bool push(void* item) noexcept;

  std::unique_ptr<lcore::RawRing> ring_;
  int wake_fd_ = -1;
  uint64_t refresh_gap_ns_ = 0;
  std::atomic<uint64_t> last_refresh_ns_{0};
  std::atomic<uint64_t> refreshes_skipped_{0};
};

}  // namespace tent::rdma
