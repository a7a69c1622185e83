// RdmaEndPoint: the RC connection from one local context to one device of a peer
// segment.
//
// Active endpoints (we post on them) own
//   - `data_qps` data QPs for the background poller that owns the endpoint (bulk
//     slices of this peer device are carried by that one poller: its own QPs on its
//     own data CQ, so no QP has two posters and no CQ two pollers),
//   - one rail QP for the context's rail poller (latency-sensitive slices that fell
//     back from the direct path, served ahead of bulk), on that poller's data CQ,
//   - one shallow direct QP on the context's direct CQ (when both sides have one).
// Passive endpoints (a peer bootstrapped to us) own the matching target-side QPs;
// nothing is ever posted on them, so each reserves one send WR of the passive CQ.
//
// Lifetime (docs/engine.md, "Endpoint lifecycle"): handshaking -> ready ->
// destroying (reset, eviction, peer gone: QPs to ERR) -> drained -> freed. The
// control plane frees an endpoint once its WRs have drained and an EBR grace period
// has passed, so the datapath may hold a raw pointer within a ReadSection, and a
// slice may hold one while its WR is outstanding.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "config/config.h"
#include "fabric/fabric.h"
#include "notify/notify_link.h"
#include "tent/status.h"
#include "tent/transfer_engine.h"
#include "wire/bootstrap.h"
#include "wire/bootstrap_notify.h"

namespace tent::rdma {

class RdmaContext;

enum class EndpointState : uint8_t { kHandshaking = 0, kReady, kDestroying };
std::string_view toString(EndpointState s) noexcept;

struct EndpointQpShape {
  uint32_t owner_poller = 0;  // posting index of the background poller owning the data QPs
  uint32_t rail_poller = 0;   // posting index of the context's rail poller
  uint32_t data_qps = 1;
  uint32_t qp_depth = 128;
  uint32_t direct_depth = 0;  // 0: no direct QP
};

// How an endpoint's QPs mark their packets: config qos per QP class. The initiator's
// values hold on both ends (docs/fabric.md, "Traffic classes").
struct EndpointTraffic {
  fabric::QpTraffic data;     // data QPs and the rail QP
  fabric::QpTraffic direct;   // the direct QP
  fabric::QpTraffic control;  // control/notify QPs (sent to the peer; tent's own come later)
  bool operator==(const EndpointTraffic&) const = default;
};
EndpointTraffic trafficOf(const config::QosConfig& qos) noexcept;

class RdmaEndPoint {
 public:
  RdmaEndPoint(RdmaContext& context, SegmentId segment, uint32_t peer_device, uint64_t generation);
  ~RdmaEndPoint();  // destroys the QPs: their CQ reservations return
  RdmaEndPoint(const RdmaEndPoint&) = delete;
  RdmaEndPoint& operator=(const RdmaEndPoint&) = delete;

  // ---- control path ----
  Status createActiveQps(const EndpointQpShape& shape);
  // Passive side: `data_qps` QPs (and a direct QP when asked), depth 1, on the passive CQ.
  // With `notify_from` non-empty (the peer offered notifications and the context has
  // them on) also a passive notify link whose messages name that sender segment.
  Status createPassiveQps(uint32_t data_qps, bool direct, const std::string& notify_from = "");
  // Our notify offer for the bootstrap (not capable without a notify link).
  metadata::NotifyExtension notifyOffer() const;
  // Wires the notify link to the peer's offer (a peer without one: unsupported) and,
  // on the passive side, attaches it to the context's inbox. Call after connect(): the
  // notify QP takes the class connect() settled for control traffic (qos.control).
  Status connectNotify(const metadata::NotifyExtension& remote, const fabric::PortIdentity& port);
  // The active side's notify link (nullptr without one); shared so a sender may keep
  // using it outside an EBR read section while the endpoint retires.
  std::shared_ptr<notify::NotifyLink> notifyLink() const noexcept { return notify_; }
  // Our half of the bootstrap: QP numbers (data QPs, then the rail QP),
  // direct_qp_num (0 without a direct QP), and the link terms (kLink: our port's link
  // layer, GID type and MTU; kQos: our traffic settings; kPsn: our QPs' random initial
  // PSNs), which an older peer does not read.
  void fillBootstrap(metadata::BootstrapMessage* msg) const;
  // Wires every data QP to the peer's; the direct QP only when both sides advertise
  // one (otherwise ours is dropped and direct requests to this peer fall back). Refuses
  // a peer port of another link layer or GID type; both sides take the smaller MTU; a
  // passive endpoint marks its packets with the initiator's traffic settings (0 when
  // the initiator sends none); PSNs are the exchanged ones, 0 both ways toward a peer
  // that sent none.
  Status connect(const metadata::BootstrapMessage& remote);
  // Before connect(), on an active endpoint: what its QPs (and their passive twins)
  // mark their packets with.
  void setTraffic(const EndpointTraffic& traffic) noexcept { traffic_ = traffic; }
  const EndpointTraffic& traffic() const noexcept { return traffic_; }
  bool markReady() noexcept;  // handshaking -> ready
  // Any live state -> destroying; true for the one caller that did it.
  bool beginReset() noexcept;
  // Moves every QP to ERR: outstanding WRs flush, new posts fail.
  void quiesce();
  // No WR of ours is outstanding any more (data, rail and direct).
  bool drained() const noexcept;
  uint32_t qpCount() const noexcept;
  // SIEVE: was it used since the last look? Clears the mark.
  bool takeVisited() noexcept { return visited_.exchange(false, std::memory_order_relaxed); }
  bool proven() const noexcept { return proven_.load(std::memory_order_relaxed); }
  const EndpointQpShape& shape() const noexcept { return shape_; }

  // ---- datapath ----
  EndpointState state() const noexcept { return state_.load(std::memory_order_acquire); }
  bool ready() const noexcept { return state() == EndpointState::kReady; }
  RdmaContext& context() const noexcept { return context_; }
  SegmentId segment() const noexcept { return segment_; }
  uint32_t peerDevice() const noexcept { return peer_device_; }
  uint64_t generation() const noexcept { return generation_; }
  uint32_t owner() const noexcept { return shape_.owner_poller; }
  // The QPs the poller with `posting_index` may post on (empty: not its endpoint).
  std::span<fabric::QueuePair* const> qpsFor(uint32_t posting_index) const noexcept {
    if (posting_index == shape_.owner_poller) return data_raw_;
    if (posting_index == shape_.rail_poller && rail_raw_ != nullptr) return {&rail_raw_, 1};
    return {};
  }
  fabric::QueuePair* directQp() const noexcept {
    return direct_wired_ ? direct_qp_.get() : nullptr;
  }
  // A data or rail QP of this endpoint left RTS without a completion saying so (the tcp
  // provider's connection went while idle, as a NIC's QP on a fatal event): the
  // endpoint must be replaced before a slice posts there, as that post would fail and
  // use up one of the slice's retries. The direct QP is not looked at: a direct post
  // that fails falls back to the worker path without a retry (and resets the endpoint).
  // A few loads per lookup.
  bool qpInError() const noexcept {
    for (fabric::QueuePair* qp : data_raw_)
      if (qp->state() == fabric::QpState::kError) return true;
    return rail_raw_ != nullptr && rail_raw_->state() == fabric::QpState::kError;
  }
  // Marks a use (eviction keeps what is used). One load when already marked.
  void touch() noexcept {
    if (!visited_.load(std::memory_order_relaxed)) visited_.store(true, std::memory_order_relaxed);
  }
  // A WR completed with `status`: anything but retry-exceeded or a flush means the
  // responder answered, so the connection itself works (an endpoint retired before
  // that backs its slot off, as a failed connect does; one retired after does not).
  void noteCompletion(fabric::WcStatus status) noexcept {
    if (status == fabric::WcStatus::kRetryExceeded || status == fabric::WcStatus::kFlushed ||
        status == fabric::WcStatus::kGeneral)
      return;
    if (!proven_.load(std::memory_order_relaxed)) proven_.store(true, std::memory_order_relaxed);
  }
  // Direct WR quota (depth of the direct QP).
  bool tryTakeDirectQuota() noexcept;
  void returnDirectQuota() noexcept { direct_wr_depth_.fetch_sub(1, std::memory_order_acq_rel); }
  uint32_t directDepth() const noexcept { return direct_wr_depth_.load(std::memory_order_acquire); }
  // One poster at a time on the direct QP (the verbs contract): callers take it with
  // their lane and quota, all or nothing, and drop it right after posting.
  bool tryTakeDirectPoster() noexcept {
    return !direct_poster_.exchange(true, std::memory_order_acquire);
  }
  void releaseDirectPoster() noexcept { direct_poster_.store(false, std::memory_order_release); }

  // Passive bookkeeping: the bootstrap this endpoint answered (duplicate detection).
  metadata::BootstrapMessage remote;

 private:
  void drawPsns();  // one random initial PSN per QP

  RdmaContext& context_;
  SegmentId segment_;
  uint32_t peer_device_;
  uint64_t generation_;
  EndpointQpShape shape_;
  EndpointTraffic traffic_;
  bool passive_ = false;
  std::vector<uint32_t> psns_;  // our QPs' initial PSNs: data QPs, then the direct QP
  std::atomic<EndpointState> state_{EndpointState::kHandshaking};
  std::vector<std::unique_ptr<fabric::QueuePair>> data_qps_;  // data QPs, then the rail QP
  std::vector<fabric::QueuePair*> data_raw_;
  fabric::QueuePair* rail_raw_ = nullptr;
  std::unique_ptr<fabric::QueuePair> direct_qp_;
  uint32_t direct_max_depth_ = 0;
  bool direct_wired_ = false;
  std::shared_ptr<notify::NotifyLink> notify_;
  fabric::QpTraffic notify_traffic_;  // the initiator's qos.control, as connect() read it
  alignas(64) std::atomic<uint32_t> direct_wr_depth_{0};
  std::atomic<bool> direct_poster_{false};
  std::atomic<bool> visited_{true};
  std::atomic<bool> proven_{false};
};

}  // namespace tent::rdma
