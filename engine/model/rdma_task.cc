#include "model/rdma_task.h"

#include <cassert>

namespace tent::rdma {

void RdmaTask::reset(const Request& req, uint32_t slices) noexcept {
  request = req;
  transferred_bytes.store(0, std::memory_order_relaxed);
  slice_count = slices;
  slices_left.store(slices, std::memory_order_relaxed);
  refs.store(slices, std::memory_order_relaxed);
  cancel_requested.store(false, std::memory_order_relaxed);
  error.store(0, std::memory_order_relaxed);
  direct.store(false, std::memory_order_relaxed);
  direct_contexts.store(0, std::memory_order_relaxed);
  state.store(static_cast<uint8_t>(TransferState::PENDING), std::memory_order_release);
}

void RdmaTask::endUnstarted(TransferState s) noexcept {
  reset(request, 0);
  releaseSource();
  state.store(static_cast<uint8_t>(s), std::memory_order_release);
}

void RdmaSlice::init(RdmaTask& owner, uint64_t offset, uint64_t bytes, uint16_t hint,
                     uint64_t now) noexcept {
  assert(state == SliceState::kAllocated);
  const Request& req = owner.request;
  task = &owner;
  source_addr = reinterpret_cast<uint64_t>(req.source) + offset;
  target_addr = req.target_offset + offset;
  length = bytes;
  opcode = req.opcode == OpCode::READ ? fabric::WrOpcode::kRdmaRead : fabric::WrOpcode::kRdmaWrite;
  segment = req.target_id;
  deadline_ns = req.deadline_ns;
  intent = req.intent_type;
  local_device = peer_device = 0;
  lkey = rkey = 0;
  retries = 0;
  rr_hint = hint;
  endpoint = nullptr;
  qp_index = 0;
  enqueue_ns = now;
  post_ns = 0;
  next = prev = nullptr;
}

std::string_view toString(SliceState s) noexcept {
  switch (s) {
    case SliceState::kFree:
      return "free";
    case SliceState::kAllocated:
      return "allocated";
    case SliceState::kQueued:
      return "queued";
    case SliceState::kPending:
      return "pending";
    case SliceState::kStaged:
      return "staged";
    case SliceState::kPosted:
      return "posted";
    case SliceState::kPostedDirect:
      return "posted-direct";
    case SliceState::kTimedOut:
      return "timed-out";
    case SliceState::kDone:
      return "done";
  }
  return "?";
}

void releaseSources(RdmaTask* tasks, size_t n) noexcept {
  for (size_t i = 0; i < n; ++i) tasks[i].releaseSource();
}

TransferState errorState(SliceResult r) noexcept {
  switch (r) {
    case SliceResult::kTimeout:
      return TransferState::TIMEOUT;
    case SliceResult::kCanceled:
      return TransferState::CANCELED;
    default:
      return TransferState::FAILED;
  }
}

bool updateSliceStatus(RdmaTask& task, uint64_t bytes, SliceResult result,
                       TransferState* published) noexcept {
  bool finished = false;
  if (result == SliceResult::kSuccess)
    task.transferred_bytes.fetch_add(bytes, std::memory_order_relaxed);
  else
    task.recordError(errorState(result));
  // acq_rel: the last slice sees every other slice's bytes and error before publishing.
  if (task.slices_left.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    uint8_t err = task.error.load(std::memory_order_acquire);
    // Its source buffer is being unregistered with cancellation: the task was canceled
    // (its posted WRs drained, as after cancelTransfer()).
    if (err == 0 && task.source_use && task.source_use->cancelRequested())
      err = static_cast<uint8_t>(TransferState::CANCELED);
    const TransferState to = err ? static_cast<TransferState>(err) : TransferState::COMPLETED;
    assert(to != TransferState::COMPLETED ||
           task.transferred_bytes.load(std::memory_order_relaxed) == task.request.length);
    // No WR of the task is left: its source buffer may go. Before the state, so a
    // caller that sees the task terminal can unregister the buffer at once.
    task.releaseSource();
    auto expected = static_cast<uint8_t>(TransferState::PENDING);
    // seq_cst: a sleeping waiter is found by the load that follows (lcore/waiter_bell.h).
    finished = task.state.compare_exchange_strong(expected, static_cast<uint8_t>(to),
                                                  std::memory_order_seq_cst);
    if (finished && published) *published = to;
  }
  // Last: after this the batch may be freed by another thread.
  task.refs.fetch_sub(1, std::memory_order_release);
  return finished;
}

SlicePool::SlicePool(uint32_t capacity) : slices_(capacity), head_(0) {
  for (uint32_t i = 0; i < capacity; ++i)
    slices_[i].free_next.store(i + 1 < capacity ? i + 1 : kNil, std::memory_order_relaxed);
  head_.store(capacity ? 0 : kNil, std::memory_order_relaxed);
}

RdmaSlice* SlicePool::allocate() noexcept {
  uint64_t head = head_.load(std::memory_order_acquire);
  for (;;) {
    uint32_t index = static_cast<uint32_t>(head);
    if (index == kNil) return nullptr;
    uint32_t next = slices_[index].free_next.load(std::memory_order_relaxed);
    uint64_t tagged = ((head >> 32) + 1) << 32 | next;  // the tag defeats ABA
    if (head_.compare_exchange_weak(head, tagged, std::memory_order_acq_rel)) {
      slices_[index].moveTo(SliceState::kAllocated, SliceState::kFree);
      return &slices_[index];
    }
  }
}

void SlicePool::release(RdmaSlice* slice) noexcept {
  releaseBurst(&slice, 1);
}

void SlicePool::releaseBurst(RdmaSlice* const* slices, uint32_t n) noexcept {
  if (n == 0) return;
  auto index = [&](const RdmaSlice* s) { return static_cast<uint32_t>(s - slices_.data()); };
  for (uint32_t i = 0; i < n; ++i) {
    RdmaSlice* s = slices[i];
    // Accounted, or allocated and never handed on (a direct plan that declined).
    s->moveTo(SliceState::kFree, SliceState::kDone, SliceState::kAllocated);
    s->task = nullptr;
    s->endpoint = nullptr;
    s->next = s->prev = nullptr;
    if (i + 1 < n) s->free_next.store(index(slices[i + 1]), std::memory_order_relaxed);
  }
  RdmaSlice* last = slices[n - 1];
  uint64_t head = head_.load(std::memory_order_relaxed);
  for (;;) {
    last->free_next.store(static_cast<uint32_t>(head), std::memory_order_relaxed);
    uint64_t tagged = ((head >> 32) + 1) << 32 | index(slices[0]);
    if (head_.compare_exchange_weak(head, tagged, std::memory_order_acq_rel)) break;
  }
}

uint32_t SlicePool::countIn(SliceState s) const noexcept {
  uint32_t n = 0;
  for (const RdmaSlice& slice : slices_) n += slice.in(s) ? 1 : 0;
  return n;
}

uint32_t SlicePool::available() const noexcept {
  uint32_t n = 0;
  // Bounded by the capacity: a walk that races a push or pop cannot loop.
  for (uint32_t i = static_cast<uint32_t>(head_.load(std::memory_order_acquire));
       i != kNil && n < capacity(); i = slices_[i].free_next.load(std::memory_order_relaxed))
    ++n;
  return n;
}

}  // namespace tent::rdma
