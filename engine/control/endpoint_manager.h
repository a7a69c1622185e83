// Active endpoints on the control plane: connect, publish, retire, drain, free.
//
//   idle --lookup--> connect: admit (caps; evict an idle endpoint, SIEVE), create
//   QPs, BOOTSTRAP over the segment's session --reply--> wired, ready, published in
//   its slot. Any failure frees what was made and backs the slot off (exponential,
//   jitter): lookups fail at once until the retry time.
//   ready --reset/evict/peer gone--> unpublished, QPs to ERR, RELEASE sent, draining
//   --grace passed since the unpublish (no poster can still be inside a post on it)
//   and no WR outstanding--> retired at an EBR epoch --grace passed--> deleted (QPs
//   destroyed, CQ reservations and peer mappings returned).
// Loop thread only; never sleeps: draining and freeing are polled by a timer.
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/rdma_endpoint.h"
#include "model/segment_table.h"
#include "net/client.h"

namespace tent::control {

class ControlPlane;

class EndpointManager {
 public:
  explicit EndpointManager(ControlPlane& plane);
  ~EndpointManager();  // frees every endpoint (the engine is closing)

  // A datapath request for `slot`: connect it, or retire its endpoint after a reset.
  void handle(rdma::EndpointSlot* slot);
  // The record's segment is gone or replaced: retire every endpoint of it.
  void retireAll(rdma::SegmentRecord& record);
  // Frees drained endpoints whose grace period passed; retries waiting connects.
  void step();
  // One line per endpoint not yet freed (segment, device pair, state, its slot's view
  // of it): what a test prints when endpoints do not return to their baseline.
  std::string describe();
  bool busy() const noexcept {
    return !draining_.empty() || !retired_.empty() || !waiting_.empty();
  }
  // Reclaim passes run (step()): a test waits for the control plane to have looked
  // at its draining endpoints. Any thread.
  uint64_t steps() const noexcept { return steps_.load(std::memory_order_acquire); }

 private:
  struct Ticket {
    SegmentId segment;
    uint32_t context, peer_device;
    rdma::RdmaEndPoint* ep;
  };
  void connect(rdma::EndpointSlot& slot);
  bool admit(rdma::EndpointSlot& slot);
  bool room(uint32_t context, uint32_t owner) const;
  rdma::RdmaEndPoint* sieveVictim(uint32_t context, uint32_t owner);
  void onReply(const Ticket& t, Result<ClientSession::Reply> reply);
  void publish(rdma::EndpointSlot& slot, rdma::RdmaEndPoint* ep);
  void retire(rdma::EndpointSlot& slot, rdma::RdmaEndPoint* ep, bool evicted);
  void backoff(rdma::EndpointSlot& slot, const Status& why);
  void track(rdma::RdmaEndPoint* ep, uint32_t owner);
  void countQps(rdma::RdmaEndPoint* ep);  // after its QPs were created or dropped
  void free(rdma::RdmaEndPoint* ep);
  rdma::EndpointSlot* slotOf(const rdma::RdmaEndPoint& ep) noexcept;

  ControlPlane& plane_;
  uint32_t per_poller_cap_;
  struct Tracked {
    uint32_t owner = 0;    // its background poller: the per-poller count it is in
    bool retired = false;  // counted in endpoints_retired (else endpoints_live)
    uint32_t qps = 0;      // counted in the context's QP count
  };
  std::unordered_map<rdma::RdmaEndPoint*, Tracked> all_;  // every endpoint not yet freed
  // Ready endpoints per (context, owner poller), in SIEVE order, with the hand.
  struct Sieve {
    std::list<rdma::RdmaEndPoint*> list;
    std::list<rdma::RdmaEndPoint*>::iterator hand;
    bool hand_valid = false;
  };
  std::vector<std::unordered_map<uint32_t, Sieve>> sieve_;
  std::unordered_map<rdma::RdmaEndPoint*, std::list<rdma::RdmaEndPoint*>::iterator> in_sieve_;
  std::vector<std::unordered_map<uint32_t, uint32_t>> per_owner_;  // existing endpoints
  std::vector<std::unordered_map<uint32_t, uint32_t>> retiring_;   // of those, being freed
  std::vector<uint32_t> per_context_;
  struct Draining {
    rdma::RdmaEndPoint* ep;
    uint64_t since_ns;
    // EBR epoch of the unpublish: until it is quiescent a poster that found the
    // endpoint in its slot may still be inside postSend(), its WR not yet counted as
    // outstanding, so drained() is not yet the truth.
    uint64_t unpublished_epoch;
    bool warned;
  };
  std::vector<Draining> draining_;
  std::vector<std::pair<rdma::RdmaEndPoint*, uint64_t>> retired_;  // (endpoint, epoch)
  std::vector<rdma::EndpointSlot*> waiting_;  // admitted once an evicted endpoint is freed
  std::mt19937_64 rng_;
  std::atomic<uint64_t> steps_{0};
};

}  // namespace tent::control
