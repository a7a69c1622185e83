// Where endpoints live. One slot per (local context, segment, peer device), created
// on the control path when a segment opens, so the datapath never inserts. A slot
// points at its current endpoint; the datapath asks for a connect or a reset by
// queueing the slot for the control thread (lock-free ring + eventfd), never
// blocking. Endpoints are owned here until the engine closes.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include <tbb/concurrent_hash_map.h>

#include "engine/rdma/rdma_endpoint.h"
#include "lcore/ring.h"
#include "tent/transfer_engine.h"

namespace tent::rdma {

struct EndpointSlot {
  uint32_t context = 0;
  SegmentId segment = 0;
  uint32_t peer_device = 0;
  std::atomic<RdmaEndPoint*> current{nullptr};
  std::atomic<bool> queued{false};        // waiting in the control ring
  std::atomic<uint64_t> failed_at_ns{0};  // last failed connect (0: none)
  uint64_t next_generation = 1;           // control thread only
};

enum class EndpointLookup : uint8_t { kReady = 0, kConnecting, kFailed, kUnknown };

class EndpointStore {
 public:
  static uint64_t key(uint32_t context, SegmentId segment, uint32_t peer_device) noexcept {
    return (segment << 16) | (uint64_t{context & 0xff} << 8) | (peer_device & 0xff);
  }

  Status init(uint32_t queue_capacity);
  ~EndpointStore();

  // ---- datapath ----
  // kReady with *out set; kConnecting after queueing a connect; kFailed when the last
  // connect failed after `since_ns` (requests older than the failure give up);
  // kUnknown when the segment has no such slot.
  EndpointLookup lookup(uint32_t context, SegmentId segment, uint32_t peer_device,
                        uint64_t since_ns, RdmaEndPoint** out) noexcept;
  // Retires `ep` (completion error): the first caller queues it for destruction,
  // and the next lookup connects a new generation.
  void requestReset(RdmaEndPoint* ep) noexcept;

  // ---- control path ----
  void ensureSlot(uint32_t context, SegmentId segment, uint32_t peer_device);
  EndpointSlot* findSlot(uint32_t context, SegmentId segment, uint32_t peer_device) noexcept;
  std::vector<EndpointSlot*> slotsOf(SegmentId segment);
  std::vector<EndpointSlot*> allSlots();
  // Takes ownership; the endpoint lives until the store dies.
  RdmaEndPoint* adopt(std::unique_ptr<RdmaEndPoint> ep);
  // Control thread: next queued slot, or nullptr.
  EndpointSlot* nextQueued() noexcept;
  // Wakes the control thread (also used to stop it).
  void wake() noexcept;
  int wakeFd() const noexcept { return wake_fd_; }
  void queue(EndpointSlot* slot) noexcept;

 private:
  using Map = tbb::concurrent_hash_map<uint64_t, EndpointSlot*>;
  Map slots_;
  std::unique_ptr<lcore::Ring<EndpointSlot>> queue_;
  int wake_fd_ = -1;
  std::mutex owned_mu_;  // control path only
  std::vector<std::unique_ptr<EndpointSlot>> owned_slots_;
  std::vector<std::unique_ptr<RdmaEndPoint>> owned_endpoints_;
};

}  // namespace tent::rdma
