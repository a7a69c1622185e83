// What the datapath asks of the control plane - connect this slot, retire that
// endpoint - without waiting: a lock-free MPSC ring of slots and an eventfd that
// wakes the control loop (one write per slot newly queued; a slot already queued is
// not queued twice).
#pragma once

#include <memory>

#include "model/segment_table.h"
#include "lcore/ring.h"
#include "tent/status.h"

namespace tent::rdma {

class ControlRequests {
 public:
  ControlRequests() = default;
  ~ControlRequests();
  ControlRequests(const ControlRequests&) = delete;
  ControlRequests& operator=(const ControlRequests&) = delete;
  Status init(uint32_t capacity);

  // ---- datapath (inside an ebr::ReadSection: `slot` stays valid) ----
  void queue(EndpointSlot* slot) noexcept;

  // ---- control plane ----
  int wakeFd() const noexcept { return wake_fd_; }
  void drainWake() noexcept;
  EndpointSlot* next() noexcept;

 private:
  std::unique_ptr<lcore::Ring<EndpointSlot>> ring_;
  int wake_fd_ = -1;
};

}  // namespace tent::rdma
