// BatchTable: slot growth, the free and retiring lists, recycling.
#include "api/batch_table.h"

#include <bit>
#include <new>
#include <string>

namespace tent {

bool BatchSlot::busy() const noexcept {
  const size_t n = count.load(std::memory_order_acquire);
  for (size_t i = 0; i < n && i < task_capacity; ++i)
    if (tasks[i].referenced()) return true;
  return false;
}

BatchTable::BatchTable(size_t pooled_tasks) : pooled_tasks_(pooled_tasks) {
  for (auto& head : free_) head.store(kNil, std::memory_order_relaxed);
  retiring_head_.store(kNil, std::memory_order_relaxed);
}

BatchTable::~BatchTable() {
  for (auto& chunk : chunks_) delete[] chunk.load(std::memory_order_relaxed);
}

size_t BatchTable::classOf(size_t task_capacity) const noexcept {
  return static_cast<size_t>(std::countr_zero(task_capacity));  // a power of two
}

// Tagged Treiber stacks over slot indices: head = tag << 32 | index; the tag,
// bumped on every change, keeps a stale CAS from succeeding (ABA).
uint32_t BatchTable::pop(std::atomic<uint64_t>& head) noexcept {
  uint64_t h = head.load(std::memory_order_acquire);
  for (;;) {
    const auto index = static_cast<uint32_t>(h);
    if (index == kNil) return kNil;
    const uint32_t next = slotAt(index)->free_next.load(std::memory_order_relaxed);
    const uint64_t want = (((h >> 32) + 1) << 32) | next;
    if (head.compare_exchange_weak(h, want, std::memory_order_acq_rel, std::memory_order_acquire)) {
      return index;
    }
  }
}

void BatchTable::push(std::atomic<uint64_t>& head, uint32_t index) noexcept {
  uint64_t h = head.load(std::memory_order_relaxed);
  for (;;) {
    slotAt(index)->free_next.store(static_cast<uint32_t>(h), std::memory_order_relaxed);
    const uint64_t want = (((h >> 32) + 1) << 32) | index;
    if (head.compare_exchange_weak(h, want, std::memory_order_release, std::memory_order_relaxed)) {
      return;
    }
  }
}

Status BatchTable::grow() {
  std::lock_guard<std::mutex> lock(grow_mu_);
  if (static_cast<uint32_t>(free_[kClasses].load(std::memory_order_acquire)) != kNil) {
    return Status::OK();  // another thread grew the table meanwhile
  }
  const uint32_t size = size_.load(std::memory_order_relaxed);
  const uint32_t chunk = size / kChunkSlots;
  if (chunk >= kMaxChunks) {
    return Status::ResourceExhausted("more than " + std::to_string(size) +
                                     " batches allocated and not freed");
  }
  auto* slots = new (std::nothrow) BatchSlot[kChunkSlots];
  if (slots == nullptr) return Status::ResourceExhausted("out of memory for batch slots");
  for (uint32_t i = 0; i < kChunkSlots; ++i) slots[i].index = size + i;
  chunks_[chunk].store(slots, std::memory_order_release);
  size_.store(size + kChunkSlots, std::memory_order_release);
  for (uint32_t i = kChunkSlots; i-- > 0;) push(free_[kClasses], size + i);
  return Status::OK();
}

Result<uint32_t> BatchTable::takeSlot(size_t capacity) {
  const bool pooled = capacity <= pooled_tasks_;
  const size_t want = pooled ? std::bit_ceil(capacity) : capacity;
  if (pooled) {
    const uint32_t index = pop(free_[classOf(want)]);
    if (index != kNil) return index;  // its task array fits
  }
  uint32_t index = pop(free_[kClasses]);
  while (index == kNil) {
    TENT_RETURN_IF_ERROR(grow());
    index = pop(free_[kClasses]);
  }
  BatchSlot& s = *slotAt(index);
  s.tasks.reset(new (std::nothrow) rdma::RdmaTask[want]);
  if (!s.tasks) {
    push(free_[kClasses], index);
    return Status::ResourceExhausted("out of memory for a batch of " + std::to_string(capacity) +
                                     " tasks");
  }
  s.task_capacity = want;
  return index;
}

Result<BatchId> BatchTable::allocate(size_t capacity) {
  reapRetired();
  auto index = takeSlot(capacity);
  if (!index.ok()) return index.status();
  BatchSlot& s = *slotAt(*index);
  s.capacity = capacity;
  s.count.store(0, std::memory_order_relaxed);
  s.notify_state.store(BatchSlot::kNoNotify, std::memory_order_relaxed);
  const uint32_t gen = s.generation.load(std::memory_order_relaxed) + 1;  // odd: live
  s.generation.store(gen, std::memory_order_release);
  live_.fetch_add(1, std::memory_order_relaxed);
  return (static_cast<uint64_t>(gen) << 32) | (static_cast<uint64_t>(*index) + 1);
}

Status BatchTable::free(BatchId id, OnBusy on_busy, void* context) {
  BatchSlot* s = find(id);
  auto gen = static_cast<uint32_t>(id >> 32);
  // The generation moves to even first: the id is dead for every other caller, and
  // of two concurrent frees only one gets here.
  if (s == nullptr ||
      !s->generation.compare_exchange_strong(gen, gen + 1, std::memory_order_acq_rel)) {
    return Status::NotFound("batch " + std::to_string(id) + " is unknown");
  }
  live_.fetch_sub(1, std::memory_order_relaxed);
  if (s->busy()) {  // slices in flight still reference its tasks
    if (on_busy != nullptr) on_busy(context, *s);
    retiring_.fetch_add(1, std::memory_order_relaxed);
    push(retiring_head_, s->index);
  } else {
    recycle(*s);
  }
  reapRetired();
  return Status::OK();
}

void BatchTable::reapRetired() noexcept {
  uint64_t h = retiring_head_.load(std::memory_order_acquire);
  do {
    if (static_cast<uint32_t>(h) == kNil) return;
  } while (!retiring_head_.compare_exchange_weak(
      h, (((h >> 32) + 1) << 32) | kNil, std::memory_order_acq_rel, std::memory_order_acquire));
  // The detached list is ours alone: walk it, recycle what drained, put back the rest.
  for (uint32_t index = static_cast<uint32_t>(h); index != kNil;) {
    BatchSlot& s = *slotAt(index);
    const uint32_t next = s.free_next.load(std::memory_order_relaxed);
    if (s.busy()) {
      push(retiring_head_, index);
    } else {
      retiring_.fetch_sub(1, std::memory_order_relaxed);
      recycle(s);
    }
    index = next;
  }
}

// Drops what the finished tasks still hold (the peer's segment record, the local
// buffer table), so a pooled batch keeps nothing of a closed segment alive.
void BatchTable::recycle(BatchSlot& s) noexcept {
  const size_t n = s.count.load(std::memory_order_acquire);
  for (size_t i = 0; i < n && i < s.task_capacity; ++i) {
    rdma::RdmaTask& t = s.tasks[i];
    t.peer.reset();
    t.local_table.reset();
    t.local_buffer = nullptr;
    t.direct_admission = rdma::RdmaTask::kAdmissionUnset;  // the next use resolves again
    t.state.store(static_cast<uint8_t>(TransferState::INITIAL), std::memory_order_relaxed);
  }
  s.count.store(0, std::memory_order_relaxed);
  if (s.task_capacity > pooled_tasks_) {
    s.tasks.reset();
    s.task_capacity = 0;
    push(free_[kClasses], s.index);
  } else {
    push(free_[classOf(s.task_capacity)], s.index);
  }
}

}  // namespace tent
