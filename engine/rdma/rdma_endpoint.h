// RdmaEndPoint: the RC connection from one local context to one device of a peer
// segment. Active endpoints (we post on them) own per-posting-poller data QPs bound
// to that poller's CQ plus a shallow direct QP on the context's direct CQ. Passive
// endpoints (a peer bootstrapped to us) own the matching target-side QPs.
//
// States: handshaking -> ready -> destroying -> destroyed. A reset (completion
// error) moves a ready endpoint to destroying exactly once; the control thread then
// moves every QP to ERR, waits for outstanding WRs to drain and marks it destroyed.
// Endpoint objects live until the engine closes, so the datapath may hold raw
// pointers to retired endpoints (their QPs reject posts once in ERR).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/fabric/fabric.h"
#include "engine/metadata/bootstrap.h"
#include "tent/status.h"
#include "tent/transfer_engine.h"

namespace tent::rdma {

class RdmaContext;

enum class EndpointState : uint8_t { kHandshaking = 0, kReady, kDestroying, kDestroyed };
std::string_view toString(EndpointState s) noexcept;

struct EndpointQpShape {
  uint32_t posting_pollers = 1;
  uint32_t qps_per_poller = 1;
  uint32_t qp_depth = 128;
  uint32_t direct_depth = 0;  // 0: no direct QP
};

class RdmaEndPoint {
 public:
  RdmaEndPoint(RdmaContext& context, SegmentId segment, uint32_t peer_device, uint64_t generation);
  ~RdmaEndPoint();
  RdmaEndPoint(const RdmaEndPoint&) = delete;
  RdmaEndPoint& operator=(const RdmaEndPoint&) = delete;

  // ---- control path (control thread) ----
  // Active side: data QPs per posting poller on that poller's CQ, direct QP on the direct CQ.
  Status createActiveQps(const EndpointQpShape& shape);
  // Passive side: `data_qps` QPs (and a direct QP when direct_depth > 0) on the passive CQ.
  Status createPassiveQps(uint32_t data_qps, uint32_t qp_depth, uint32_t direct_depth);
  // Our half of the bootstrap: QP numbers and direct_qp_num (0 without a direct QP).
  void fillBootstrap(metadata::BootstrapMessage* msg) const;
  // Wires every data QP to the peer's; the direct QP only when both sides advertise
  // one (otherwise ours is dropped and direct requests to this peer fall back).
  Status connect(const metadata::BootstrapMessage& remote);
  bool markReady() noexcept;  // handshaking -> ready
  // Any live state -> destroying; true for the one caller that did it.
  bool beginReset() noexcept;
  // destroying -> destroyed: QPs to ERR, then waits up to `timeout_ms` for outstanding
  // data WRs and the direct depth to drain. Timeout when they did not (still destroyed).
  Status destroy(uint32_t timeout_ms);

  // ---- datapath ----
  EndpointState state() const noexcept { return state_.load(std::memory_order_acquire); }
  bool ready() const noexcept { return state() == EndpointState::kReady; }
  RdmaContext& context() const noexcept { return context_; }
  SegmentId segment() const noexcept { return segment_; }
  uint32_t peerDevice() const noexcept { return peer_device_; }
  uint64_t generation() const noexcept { return generation_; }
  uint32_t qpsPerPoller() const noexcept { return qps_per_poller_; }
  fabric::QueuePair* dataQp(uint32_t poller, uint32_t i) const noexcept {
    return data_qps_[poller * qps_per_poller_ + i].get();
  }
  fabric::QueuePair* directQp() const noexcept {
    return direct_wired_ ? direct_qp_.get() : nullptr;
  }
  // Direct WR quota (depth of the direct QP).
  bool tryTakeDirectQuota() noexcept;
  void returnDirectQuota() noexcept { direct_wr_depth_.fetch_sub(1, std::memory_order_acq_rel); }
  uint32_t directDepth() const noexcept { return direct_wr_depth_.load(std::memory_order_acquire); }

  // Passive bookkeeping: the bootstrap this endpoint answered (duplicate detection).
  metadata::BootstrapMessage remote;
  uint64_t peer_instance = 0;

 private:
  uint32_t outstandingDataWrs() const noexcept;

  RdmaContext& context_;
  SegmentId segment_;
  uint32_t peer_device_;
  uint64_t generation_;
  std::atomic<EndpointState> state_{EndpointState::kHandshaking};
  uint32_t qps_per_poller_ = 0;
  std::vector<std::unique_ptr<fabric::QueuePair>> data_qps_;
  std::unique_ptr<fabric::QueuePair> direct_qp_;
  uint32_t direct_max_depth_ = 0;
  bool direct_wired_ = false;
  std::atomic<uint32_t> direct_wr_depth_{0};
};

}  // namespace tent::rdma
