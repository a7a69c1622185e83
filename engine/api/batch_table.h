// BatchTable: the engine's batches, indexed by id without a lock, recycled from
// pools. A BatchId is (generation << 32 | slot + 1): find() is two loads and a
// compare, so submit and status never take a lock or touch a hash map. Freed
// batches keep their task array and go back on a lock-free free list per capacity
// class, so allocate/free of small batches (tebench allocates one per transfer)
// do not allocate memory once warm. A batch freed while slices still reference
// its tasks waits on a retiring list until they drain; its id is invalid at once.
//
// Slots are never returned while the table lives (their memory stays valid for a
// caller that races a freeBatch with its own status poll: that caller sees
// NotFound or, at worst, the recycled batch's tasks, never freed memory).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "model/rdma_task.h"
#include "tent/status.h"
#include "tent/transfer_engine.h"

namespace tent {

struct BatchSlot {
  std::atomic<uint32_t> generation{0};  // odd while allocated; the id's high half
  uint32_t index = 0;
  size_t capacity = 0;       // what the caller asked for
  size_t task_capacity = 0;  // what `tasks` holds (>= capacity)
  std::unique_ptr<rdma::RdmaTask[]> tasks;
  std::atomic<size_t> count{0};        // tasks submitted so far
  std::atomic<uint32_t> free_next{0};  // free / retiring list link
  // A notification bound to the batch (submitTransfer with one; engine_impl_notify*.cc).
  // notify_state is read on every status call (one relaxed load). Whoever moves it to
  // kNotifyClaimed (a compare-exchange) owns notify_target and notify_message until it
  // stores kNotifyPending again or kNotifySettled: no lock, and no two posts of one
  // notification.
  enum : uint8_t { kNoNotify = 0, kNotifyPending, kNotifyClaimed, kNotifySettled };
  std::atomic<uint8_t> notify_state{kNoNotify};
  SegmentId notify_target = 0;
  std::string notify_message;

  // Some task still has slices in flight (they reference it).
  bool busy() const noexcept;
};

class BatchTable {
 public:
  // Batches up to `pooled_tasks` tasks keep their task array when freed.
  explicit BatchTable(size_t pooled_tasks = kDefaultPooledTasks);
  ~BatchTable();
  BatchTable(const BatchTable&) = delete;
  BatchTable& operator=(const BatchTable&) = delete;

  Result<BatchId> allocate(size_t capacity);
  // NotFound for an id that is not live. A busy batch is kept until it drains;
  // `on_busy(context, slot)` (when given) runs once for it, before it retires.
  using OnBusy = void (*)(void* context, BatchSlot& slot);
  Status free(BatchId id, OnBusy on_busy = nullptr, void* context = nullptr);
  // The live batch `id`, or nullptr. Lock-free, allocation-free.
  BatchSlot* find(BatchId id) const noexcept {
    const uint64_t slot = (id & 0xffffffffu);
    if (slot == 0 || slot > size_.load(std::memory_order_acquire)) return nullptr;
    BatchSlot* s = slotAt(static_cast<uint32_t>(slot - 1));
    const uint32_t gen = static_cast<uint32_t>(id >> 32);
    if ((gen & 1u) == 0 || s->generation.load(std::memory_order_acquire) != gen) return nullptr;
    return s;
  }
  // Allocated and not freed; retiring ones (freed, slices in flight) apart.
  size_t liveBatches() const noexcept { return live_.load(std::memory_order_relaxed); }
  size_t retiringBatches() const noexcept { return retiring_.load(std::memory_order_relaxed); }
  // Batches whose slices drained are recycled; called by allocate() and free().
  void reapRetired() noexcept;

  static constexpr size_t kDefaultPooledTasks = 1024;
  static constexpr uint32_t kChunkSlots = 1024;
  static constexpr uint32_t kMaxChunks = 4096;  // 4M batches alive at once

 private:
  static constexpr uint32_t kNil = 0xffffffffu;
  // Free lists: one per power-of-two task capacity up to pooled_tasks, and one of
  // slots without a task array.
  static constexpr size_t kClasses = 32;

  BatchSlot* slotAt(uint32_t index) const noexcept {
    return &chunks_[index / kChunkSlots].load(std::memory_order_acquire)[index % kChunkSlots];
  }
  size_t classOf(size_t task_capacity) const noexcept;
  uint32_t pop(std::atomic<uint64_t>& head) noexcept;
  void push(std::atomic<uint64_t>& head, uint32_t index) noexcept;
  Result<uint32_t> takeSlot(size_t capacity);
  Status grow();
  void recycle(BatchSlot& s) noexcept;

  const size_t pooled_tasks_;
  std::array<std::atomic<BatchSlot*>, kMaxChunks> chunks_{};
  std::atomic<uint32_t> size_{0};                           // slots that exist
  std::array<std::atomic<uint64_t>, kClasses + 1> free_{};  // [kClasses]: no task array
  std::atomic<uint64_t> retiring_head_;
  std::atomic<size_t> live_{0};
  std::atomic<size_t> retiring_{0};
  std::mutex grow_mu_;  // only when every free list is empty
};

}  // namespace tent
