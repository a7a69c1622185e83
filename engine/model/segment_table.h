// The segment table: every open peer segment (LOCAL_SEGMENT_ID included) as a
// record the datapath reads without a lock, and in each record one endpoint slot
// per (local context, peer device).
//
// The control plane is the only writer. Records and descriptor views are replaced,
// never edited: a writer publishes the new one, unlinks the old, and frees it after
// an EBR grace period (engine/common/ebr.h). Datapath readers hold a raw pointer only
// inside an ebr::ReadSection. Segment ids are index | generation: a stale id never
// finds a record that reuses its index.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "model/segments.h"
#include "tent/status.h"
#include "tent/transfer_engine.h"

namespace tent::rdma {

class RdmaEndPoint;
struct SegmentRecord;

enum class SlotState : uint8_t {
  kIdle = 0,    // no endpoint: the next lookup asks for a connect
  kConnecting,  // the control plane is bootstrapping one
  kBackoff,     // the last connect failed: lookups fail at once until retry_at_ns
};

// What a lookup tells the caller.
enum class EndpointLookup : uint8_t {
  kReady = 0,   // *out is a ready endpoint
  kConnecting,  // wait (a connect is under way or was just asked for)
  kFailed,      // the peer is unreachable or backing off: fail now
  kUnknown,     // no such segment or peer device
};

struct EndpointSlot {
  std::atomic<RdmaEndPoint*> ready{nullptr};  // set only while its endpoint is ready
  std::atomic<uint8_t> state{static_cast<uint8_t>(SlotState::kIdle)};
  std::atomic<uint64_t> retry_at_ns{0};  // kBackoff: lookups fail until then
  std::atomic<bool> queued{false};       // waiting in the control plane's request ring
  SegmentRecord* record = nullptr;
  uint32_t context = 0;
  uint32_t peer_device = 0;
  uint32_t owner = 0;  // posting index of the background poller that carries its bulk slices

  // Control-plane thread only.
  uint32_t failures = 0;         // consecutive failed connects (backoff exponent)
  uint64_t next_generation = 1;  // of the next endpoint
  bool ever_ready = false;       // a later ready endpoint counts as a reconnect
  RdmaEndPoint* connecting = nullptr;

  SlotState slotState() const noexcept {
    return static_cast<SlotState>(state.load(std::memory_order_acquire));
  }
};

// An immutable descriptor snapshot; tasks keep `peer` alive while their slices run.
struct SegmentView {
  std::shared_ptr<const PeerSegment> peer;
};

struct SegmentRecord {
  SegmentId id = 0;
  std::atomic<const SegmentView*> view{nullptr};
  // false while the control session to the peer is down: requests fail at once.
  std::atomic<bool> up{false};
  std::atomic<uint64_t> retry_at_ns{0};  // when down: the next reconnect attempt
  // Up, but its session answered nothing within bootstrap.io_timeout_ms: an endpoint
  // being connected now waits for an answer that may take until peer_timeout_ms.
  std::atomic<bool> slow{false};
  uint32_t contexts = 0;
  uint32_t peer_devices = 0;
  std::unique_ptr<EndpointSlot[]> slots;

  SegmentRecord(SegmentId id, uint32_t contexts, uint32_t peer_devices);
  EndpointSlot* slot(uint32_t context, uint32_t peer_device) noexcept {
    return (context < contexts && peer_device < peer_devices)
               ? &slots[context * peer_devices + peer_device]
               : nullptr;
  }
  size_t slotCount() const noexcept { return size_t{contexts} * peer_devices; }
  // Inside a ReadSection: the current descriptor (a counted reference, lock-free).
  std::shared_ptr<const PeerSegment> peer() const noexcept;
};

class SegmentTable {
 public:
  explicit SegmentTable(uint32_t capacity);  // rounded up to a power of two
  ~SegmentTable();
  SegmentTable(const SegmentTable&) = delete;
  SegmentTable& operator=(const SegmentTable&) = delete;

  // ---- datapath, inside an ebr::ReadSection ----
  SegmentRecord* find(SegmentId id) const noexcept {
    SegmentRecord* r = table_[id & mask_].load(std::memory_order_acquire);
    return (r != nullptr && r->id == id) ? r : nullptr;
  }

  // ---- control plane ----
  // A fresh id (LOCAL_SEGMENT_ID is reserved for the local segment).
  Result<SegmentId> allocateId();
  void releaseId(SegmentId id);
  // Publishes `record` at its id's index; returns the record it replaced (to retire).
  SegmentRecord* publish(SegmentRecord* record) noexcept;
  SegmentRecord* unpublish(SegmentId id) noexcept;
  uint32_t capacity() const noexcept { return static_cast<uint32_t>(mask_ + 1); }

 private:
  uint64_t mask_;
  unsigned index_bits_;
  std::unique_ptr<std::atomic<SegmentRecord*>[]> table_;
  std::vector<uint64_t> generation_;
  std::vector<uint32_t> free_;
};

}  // namespace tent::rdma
