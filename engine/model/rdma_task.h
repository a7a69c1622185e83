// RdmaTask (one request) and RdmaSlice (one WR's worth of it), and the
// preallocated slice pool. updateSliceStatus() is the one place that accounts
// bytes and finishes a task: exactly once, the first error wins, and only when
// the task's last slice is accounted (terminal means drained: no WR of the task
// can touch the caller's memory any more).
#pragma once

#include <atomic>
#include <cassert>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "fabric/fabric.h"
#include "model/buffer_use.h"
#include "model/slicing.h"
#include "tent/transfer_engine.h"
#include "topology/rail_map.h"

namespace tent::rdma {

class RdmaEndPoint;
struct LocalBuffer;
struct LocalBufferTable;
struct PeerSegment;
struct SegmentRecord;

enum class SliceResult : uint8_t { kSuccess = 0, kFailed, kTimeout, kCanceled };

struct RdmaTask;

// Where a slice is in its life, and so who owns it. Modelled on SPDK's
// spdk_nvmf_rdma_request_state: every transition is written at one place, and debug
// builds assert that it comes from a state it may come from (RdmaSlice::moveTo).
//
//   kFree -> kAllocated -> kQueued -> kPending -> kStaged -> kPosted -> kDone -> kFree
//   a task's own slice:    ... -> kDone -> kAllocated when its task is submitted again
//   direct path:           kAllocated -> kPostedDirect -> kDone (or -> kQueued: retry)
enum class SliceState : uint8_t {
  // In the pool's free list; no other field means anything.
  kFree = 0,
  // Taken from the pool by a submitter (the worker path's submit, a direct plan, a
  // direct piece's fallback) and being initialised; owned by that thread alone.
  kAllocated,
  // On a poller's MPSC input ring: owned by the ring until that poller drains it.
  kQueued,
  // On its poller's pending list: waiting for an endpoint, QP or CQ room, or a
  // retry on another device pair after its WR failed.
  kPending,
  // In a WR chain of the poller's current pass: posted at the end of the pass (or
  // back to kPending when the QP has no room).
  kStaged,
  // Its WR is on a worker QP and on the poller's in-flight list; only its completion
  // (or flush) moves it on.
  kPosted,
  // Its WR is on a direct lane; whoever polls the context's direct CQ completes it.
  kPostedDirect,
  // Posted, past workers.slice_timeout_ms: its task fails with TIMEOUT; the WR's
  // completion or flush accounts it, never retries it.
  kTimedOut,
  // Accounted (updateSliceStatus): its task no longer counts it. Returned to the
  // pool by whoever accounted it (a poller batches its pass's releases); a task's own
  // slice stays with its task.
  kDone,
};
std::string_view toString(SliceState s) noexcept;

// One slice: a contiguous piece of a task carried by one WR.
struct RdmaSlice {
  RdmaTask* task = nullptr;
  uint64_t source_addr = 0;
  uint64_t target_addr = 0;
  uint64_t length = 0;  // at most the provider's max message size (one WR)
  fabric::WrOpcode opcode = fabric::WrOpcode::kRdmaWrite;
  SliceState state = SliceState::kFree;  // moved only by moveTo()
  uint16_t local_device = 0;
  uint16_t peer_device = 0;
  uint16_t retries = 0;
  uint16_t rr_hint = 0;  // slice index within its task: spreads devices round-robin
  SegmentId segment = 0;
  // What a poller needs from the request to post and account the slice, copied here
  // so it reads only the slice: the task's request and routing lines were written by
  // the submitting core and would each be a cache-line transfer on the lcore. The keys
  // are those of (local_device, peer_device), set wherever the pair is chosen.
  uint32_t lkey = 0;
  uint32_t rkey = 0;
  uint64_t deadline_ns = 0;  // the request's (0 = none)
  IntentType intent = IntentType::UNSPEC;
  RdmaEndPoint* endpoint = nullptr;  // where the WR was posted
  uint32_t qp_index = 0;
  uint64_t enqueue_ns = 0;
  uint64_t post_ns = 0;
  // Intrusive links (pending / in-flight lists of the poller that owns the slice).
  RdmaSlice* next = nullptr;
  RdmaSlice* prev = nullptr;
  std::atomic<uint32_t> free_next{0};  // pool free list
  // The slice a one-slice task carries inside itself (RdmaTask::inline_slice): never
  // in the pool, never released to it. Its last touch is its accounting.
  bool task_owned = false;

  // The one initialisation of an allocated slice: bytes [offset, offset + length) of
  // `task`'s request, first attempt, not yet routed nor posted, stamped `now`.
  void init(RdmaTask& owner, uint64_t offset, uint64_t bytes, uint16_t hint, uint64_t now) noexcept;
  // Enters `to`. Debug builds assert that the slice is in one of `from`.
  template <class... From>
  void moveTo(SliceState to, From... from) noexcept {
    assert(((state == from) || ...));
    state = to;
  }
  bool in(SliceState s) const noexcept { return state == s; }
};

// Groups on cache lines of their own, because on the worker path two cores touch a
// task at once: the caller writes the request and the routing snapshot at submit and
// then polls the status line; the lcore reads the slice and the completion line,
// updates the completion line per slice and writes the status line once. Sharing a
// line between the caller's polls and the lcore's updates makes each update wait for
// the line to come back from the polling core (about 0.27 us per transfer of a line
// between two vCPUs of a VM): a 4 KiB transfer's completion took about 0.5 us of that.
struct RdmaTask {
  // ---- Written at submit, read while slices run.
  Request request;
  // Routing snapshot, immutable while slices run.
  std::shared_ptr<const LocalBufferTable> local_table;
  const LocalBuffer* local_buffer = nullptr;
  std::shared_ptr<const PeerSegment> peer;
  uint32_t target_buffer = 0;  // index into peer->descriptor.buffers
  topology::LocationId location = topology::kAnyLocation;
  uint64_t device_mask = ~0ull;
  bool latency_sensitive = false;  // direct.mode's rule (deadline or FOREGROUND_GET)
  bool priority_lane = false;      // latency-sensitive, and its worker slices go to rail pollers
  // The direct path's admission, decided once when the request is resolved: a
  // DirectDecline (datapath/direct_path.h); kAccepted = the direct path is tried.
  // Unset until then, and a task that skipped resolution takes the worker path.
  static constexpr uint8_t kAdmissionUnset = 0xff;
  uint8_t direct_admission = kAdmissionUnset;
  // The device placement, made once per request when it is routed: the local devices
  // that may carry it, best rail-map rank first (after device_mask; paused devices left
  // out unless that leaves none). The direct plan and every first slice pick from it;
  // a retry places its slice again.
  uint8_t placement_count = 0;
  uint8_t placement[kMaxDevices];
  // The target's segment record, found once when the request is resolved. Valid only
  // inside the submit call's read section (the submitter clears it before leaving);
  // pollers look the segment up again in their own.
  SegmentRecord* record = nullptr;
  // Direct path: the contexts whose lanes this task holds (bit = context index).
  std::atomic<uint64_t> direct_contexts{0};

  // ---- The completion line: what a poller reads before posting a slice and updates
  // when accounting one.
  alignas(64) std::atomic<uint64_t> transferred_bytes{0};
  // Slices whose status is not accounted yet; the one that takes it to 0 completes the task.
  std::atomic<uint32_t> slices_left{0};
  // References held by slices, dropped as the very last touch of the task by
  // updateSliceStatus(): while non-zero the task (and its batch) must stay alive.
  std::atomic<uint32_t> refs{0};
  // The first error (a TransferState value; 0 = none). Recorded at once, published
  // as the task's state only when its last slice is accounted.
  std::atomic<uint8_t> error{0};
  std::atomic<bool> cancel_requested{false};
  // The pin this task holds on its source buffer (taken when the request is resolved,
  // dropped once, when the task ends): while it is held the buffer cannot be
  // unregistered. nullptr when it holds none.
  BufferUse* source_use = nullptr;

  // ---- The status line: what a polling caller reads; written at submit and once at the end.
  alignas(64) std::atomic<uint8_t> state{static_cast<uint8_t>(TransferState::INITIAL)};
  std::atomic<bool> direct{false};  // posted on the direct path: its caller polls the CQ
  uint32_t slice_count = 0;

  // ---- The worker path's slice of a one-slice task. Taking a slice from the pool is a
  // CAS on a head the lcores also release to and a load from a slice another core
  // wrote last; a small transfer paid about 0.3 us for that on a VM.
  alignas(64) RdmaSlice inline_slice;

  RdmaTask() noexcept { inline_slice.task_owned = true; }
  RdmaTask(const RdmaTask&) = delete;
  RdmaTask& operator=(const RdmaTask&) = delete;
  // The task's own slice, allocated (its previous use, if any, was accounted).
  RdmaSlice* takeInlineSlice() noexcept {
    inline_slice.moveTo(SliceState::kAllocated, SliceState::kFree, SliceState::kDone);
    return &inline_slice;
  }

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
  // Slices in state `s`, counted over the whole pool: exact only at rest; for tests.
  uint32_t countIn(SliceState s) const noexcept;

 private:
  static constexpr uint32_t kNil = 0xffffffffu;
  std::vector<RdmaSlice> slices_;
  std::atomic<uint64_t> head_;  // tag << 32 | index
};

}  // namespace tent::rdma
