// The tcp provider's memory-region table: registration and deregistration.
#include "fabric/tcp/tcp_mr.h"

#include <sched.h>

#include <string>

namespace tent::fabric::tcp {

MrTable::MrTable(uint32_t capacity)
    : capacity_(capacity), entries_(std::make_unique<Entry[]>(capacity)) {
  generation_.assign(capacity, 0);
  for (uint32_t i = 0; i < capacity; ++i) free_.push_back(i);
}

Result<uint32_t> MrTable::add(uint64_t addr, uint64_t length, uint32_t access, int gpu) {
  std::lock_guard<std::mutex> g(mu_);
  if (free_.empty()) {
    return Status::ResourceExhausted("all " + std::to_string(capacity_) +
                                     " memory regions of the device are in use");
  }
  const uint32_t slot = free_.front();
  free_.pop_front();
  uint16_t gen = ++generation_[slot];
  if (gen == 0) gen = generation_[slot] = 1;  // key 0 means "free"
  const uint32_t key = uint32_t{gen} << kMrSlotBits | slot;
  Entry& e = entries_[slot];
  // The key is 0 here: readers that still hold the old key fail their re-check.
  std::atomic_thread_fence(std::memory_order_release);
  e.addr.store(addr, std::memory_order_relaxed);
  e.length.store(length, std::memory_order_relaxed);
  e.access.store(access, std::memory_order_relaxed);
  e.gpu.store(gpu, std::memory_order_relaxed);
  e.key.store(key, std::memory_order_release);
  return key;
}

void MrTable::remove(uint32_t key) {
  Entry& e = entries_[key & (kMaxMrs - 1)];
  e.key.store(0, std::memory_order_seq_cst);
  // A pin taken before the store above lasts one non-blocking socket call.
  while (e.pins.load(std::memory_order_seq_cst) != 0) sched_yield();
  std::lock_guard<std::mutex> g(mu_);
  free_.push_back(key & (kMaxMrs - 1));
}

uint32_t MrTable::live() const {
  std::lock_guard<std::mutex> g(mu_);
  return capacity_ - static_cast<uint32_t>(free_.size());
}

}  // namespace tent::fabric::tcp
