// RdmaTask (one request) and RdmaSlice (one WR's worth of it), and the
// preallocated slice pool. updateSliceStatus() is the one place that accounts
// bytes and finishes a task: exactly once, the first error wins, and only when
// the task's last slice is accounted (terminal means drained: no WR of the task
// can touch the caller's memory any more).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "fabric/fabric.h"
#include "model/buffer_use.h"
#include "tent/transfer_engine.h"
#include "topology/rail_map.h"

namespace tent::rdma {

class RdmaEndPoint;
struct LocalBuffer;
struct LocalBufferTable;
struct PeerSegment;

namespace metadata_fwd {}

enum class SliceResult : uint8_t { kSuccess = 0, kFailed, kTimeout, kCanceled };

struct RdmaTask {
  Request request;
  std::atomic<uint8_t> state{static_cast<uint8_t>(TransferState::INITIAL)};
  std::atomic<uint64_t> transferred_bytes{0};
  // Slices whose status is not accounted yet; the one that takes it to 0 completes the task.
  std::atomic<uint32_t> slices_left{0};
  // References held by slices, dropped as the very last touch of the task by
  // updateSliceStatus(): while non-zero the task (and its batch) must stay alive.
  std::atomic<uint32_t> refs{0};
  uint32_t slice_count = 0;
  std::atomic<bool> cancel_requested{false};
  // The first error (a TransferState value; 0 = none). Recorded at once, published
  // as the task's state only when its last slice is accounted.
  std::atomic<uint8_t> error{0};

  // Routing snapshot, immutable while slices run.
  std::shared_ptr<const LocalBufferTable> local_table;
  const LocalBuffer* local_buffer = nullptr;
  std::shared_ptr<const PeerSegment> peer;
  uint32_t target_buffer = 0;  // index into peer->descriptor.buffers
  topology::LocationId location = topology::kAnyLocation;
  uint64_t device_mask = ~0ull;
  bool latency_sensitive = false;  // tries the direct path first (direct.mode's rule)
  bool priority_lane = false;      // latency-sensitive, and its worker slices go to rail pollers
  // The pin this task holds on its source buffer (taken when the request is resolved,
  // dropped once, when the task ends): while it is held the buffer cannot be
  // unregistered. nullptr when it holds none.
  BufferUse* source_use = nullptr;

  // Direct path: the contexts whose lanes this task holds (bit = context index).
  std::atomic<bool> direct{false};
  std::atomic<uint64_t> direct_contexts{0};

  bool referenced() const noexcept { return refs.load(std::memory_order_acquire) != 0; }
  TransferState loadState() const noexcept {
    return static_cast<TransferState>(state.load(std::memory_order_acquire));
  }
  bool failing() const noexcept { return error.load(std::memory_order_acquire) != 0; }
  // The caller canceled the task, or an unregistration of its source buffer cancels
  // the tasks using it: start no new WR.
  bool cancelRequested() const noexcept {
    return cancel_requested.load(std::memory_order_acquire) ||
           (source_use && source_use->cancelRequested());
  }
  // Drops the task's pin on its source buffer (once; later calls do nothing). Called by
  // whatever ends the task, before its terminal state is published.
  void releaseSource() noexcept {
    if (source_use) source_use->unpin();
    source_use = nullptr;
  }
  // Records `s` as the task's error unless an earlier one is recorded; true when it was.
  bool recordError(TransferState s) noexcept {
    uint8_t none = 0;
    return error.compare_exchange_strong(none, static_cast<uint8_t>(s), std::memory_order_acq_rel);
  }
  // Control path: readies a task for a new request with `slices` slices (its source
  // pin, taken before, is kept).
  void reset(const Request& req, uint32_t slices) noexcept;
  // Ends a task that posts nothing (already past its deadline at submit) as `s`.
  void endUnstarted(TransferState s) noexcept;
};

// Drops the source pins of `n` resolved tasks that will not run (a later request of
// their submit call was refused).
void releaseSources(RdmaTask* tasks, size_t n) noexcept;

// One slice: a contiguous piece of a task carried by one WR.
struct RdmaSlice {
  RdmaTask* task = nullptr;
  uint64_t source_addr = 0;
  uint64_t target_addr = 0;
  uint64_t length = 0;  // at most the provider's max message size (one WR)
  fabric::WrOpcode opcode = fabric::WrOpcode::kRdmaWrite;
  uint16_t local_device = 0;
  uint16_t peer_device = 0;
  uint16_t retries = 0;
  uint16_t rr_hint = 0;  // slice index within its task: spreads devices round-robin
  bool direct = false;
  // Set when the slice's WR passed its software timeout: the task is failing with
  // TIMEOUT already; the WR's completion (or flush) accounts the slice, never retries.
  bool timed_out = false;
  SegmentId segment = 0;
  RdmaEndPoint* endpoint = nullptr;  // where the WR was posted
  uint32_t qp_index = 0;
  uint64_t enqueue_ns = 0;
  uint64_t post_ns = 0;
  // Intrusive links (pending / in-flight lists of the poller that owns the slice).
  RdmaSlice* next = nullptr;
  RdmaSlice* prev = nullptr;
  std::atomic<uint32_t> free_next{0};  // pool free list
};

// Accounts one finished slice. Success adds its bytes; an error is recorded (the
// first error wins). The last slice drops the task's source pin and publishes its
// terminal state: the recorded error, else COMPLETED (then transferred_bytes ==
// length, asserted in debug builds).
// Returns true when this call finished the task, and writes the published state to
// `*published` (when given). After it returns the task may be gone. Thread-safe,
// lock-free.
bool updateSliceStatus(RdmaTask& task, uint64_t bytes, SliceResult result,
                       TransferState* published = nullptr) noexcept;
// The terminal state a slice error records.
TransferState errorState(SliceResult r) noexcept;

// Fixed pool of slices with a lock-free (tagged Treiber stack) free list:
// allocation on the datapath is a CAS, never a malloc.
class SlicePool {
 public:
  explicit SlicePool(uint32_t capacity);
  SlicePool(const SlicePool&) = delete;
  SlicePool& operator=(const SlicePool&) = delete;

  RdmaSlice* allocate() noexcept;  // nullptr when exhausted
  void release(RdmaSlice* slice) noexcept;
  // Returns n slices with one CAS on the pool head (an lcore's finished slices of a pass).
  void releaseBurst(RdmaSlice* const* slices, uint32_t n) noexcept;
  uint32_t capacity() const noexcept { return static_cast<uint32_t>(slices_.size()); }
  // Free slices, counted along the free list: exact only at rest (nothing allocating
  // or releasing), for tests and leak checks. Not a counter on the hot path: one
  // fetch_add per allocate and per release, on a line every caller and lcore shares,
  // cost more than the CAS itself.
  uint32_t available() const noexcept;

 private:
  static constexpr uint32_t kNil = 0xffffffffu;
  std::vector<RdmaSlice> slices_;
  std::atomic<uint64_t> head_;  // tag << 32 | index
};

}  // namespace tent::rdma
