// The tcp provider's memory-region table: one per device, read lock-free by posters
// (local checks), by the service thread as responder (remote checks) and around every
// socket call that reads or writes registered memory (pins).
//
// key = generation << 16 | slot (never 0). An entry's fields are rewritten only while
// its key is 0 and nobody pins it, so:
//   - lookup(): a seqlock-style read (key, fields, key again), for checks;
//   - pin(): counts a user in, then re-reads the key; the region cannot be
//     deregistered (remove() waits for the count to drain) until unpin(). Pins last one
//     non-blocking socket call, so remove() waits microseconds at most. That is a NIC's
//     "deregistration waits for DMA in flight": after ~MemoryRegion returns no socket
//     call touches the region, and no peer's access to it succeeds.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "fabric/rc_rules.h"
#include "tent/status.h"

namespace tent::fabric::tcp {

inline constexpr uint32_t kMrSlotBits = 16;
inline constexpr uint32_t kMaxMrs = 1u << kMrSlotBits;

class MrTable {
 public:
  explicit MrTable(uint32_t capacity);
  MrTable(const MrTable&) = delete;
  MrTable& operator=(const MrTable&) = delete;

  // Control path. add() returns the key; remove() returns once no pin holds the region.
  // `gpu`: the CUDA ordinal of device memory (staged, tcp_staging.h), -1 for host memory.
  Result<uint32_t> add(uint64_t addr, uint64_t length, uint32_t access, int gpu = -1);
  void remove(uint32_t key);
  uint32_t capacity() const noexcept { return capacity_; }
  uint32_t live() const;

  // Datapath.
  bool lookup(uint32_t key, rc::Region* out) const noexcept {
    const Entry* e = entry(key);
    if (e == nullptr || e->key.load(std::memory_order_acquire) != key) return false;
    rc::Region r{e->addr.load(std::memory_order_relaxed), e->length.load(std::memory_order_relaxed),
                 e->access.load(std::memory_order_relaxed)};
    std::atomic_thread_fence(std::memory_order_acquire);
    if (e->key.load(std::memory_order_relaxed) != key) return false;
    *out = r;
    return true;
  }
  bool pin(uint32_t key, rc::Region* out) noexcept {
    Entry* e = entry(key);
    if (e == nullptr) return false;
    e->pins.fetch_add(1, std::memory_order_seq_cst);
    if (e->key.load(std::memory_order_seq_cst) != key) {
      e->pins.fetch_sub(1, std::memory_order_release);
      return false;
    }
    if (out != nullptr) {
      *out = rc::Region{e->addr.load(std::memory_order_relaxed),
                        e->length.load(std::memory_order_relaxed),
                        e->access.load(std::memory_order_relaxed)};
    }
    return true;
  }
  void unpin(uint32_t key) noexcept {
    entries_[key & (kMaxMrs - 1)].pins.fetch_sub(1, std::memory_order_release);
  }
  // The GPU of a region the caller holds a pin on (-1: host memory).
  int gpuOfPinned(uint32_t key) const noexcept {
    return entries_[key & (kMaxMrs - 1)].gpu.load(std::memory_order_relaxed);
  }

 private:
  struct Entry {
    std::atomic<uint32_t> key{0};
    std::atomic<uint32_t> pins{0};
    std::atomic<uint64_t> addr{0};
    std::atomic<uint64_t> length{0};
    std::atomic<uint32_t> access{0};
    std::atomic<int> gpu{-1};
  };
  const Entry* entry(uint32_t key) const noexcept {
    const uint32_t slot = key & (kMaxMrs - 1);
    return key != 0 && slot < capacity_ ? &entries_[slot] : nullptr;
  }
  Entry* entry(uint32_t key) noexcept {
    const uint32_t slot = key & (kMaxMrs - 1);
    return key != 0 && slot < capacity_ ? &entries_[slot] : nullptr;
  }

  const uint32_t capacity_;
  std::unique_ptr<Entry[]> entries_;
  mutable std::mutex mu_;
  std::vector<uint16_t> generation_;
  std::deque<uint32_t> free_;  // first in, first out: a stale key waits long to be matched
};

// The pins one socket call holds (distinct keys; consecutive SGEs usually share one).
class PinSet {
 public:
  static constexpr int kMax = 32;
  explicit PinSet(MrTable& table) noexcept : table_(table) {}
  ~PinSet() { release(); }
  PinSet(const PinSet&) = delete;
  PinSet& operator=(const PinSet&) = delete;

  // false: the key is not (or no longer) registered, or the set is full.
  bool add(uint32_t key) noexcept {
    for (int i = 0; i < n_; ++i) {
      if (keys_[i] == key) return true;
    }
    if (n_ == kMax || !table_.pin(key, nullptr)) return false;
    keys_[n_++] = key;
    return true;
  }
  bool full() const noexcept { return n_ == kMax; }
  void release() noexcept {
    for (int i = 0; i < n_; ++i) table_.unpin(keys_[i]);
    n_ = 0;
  }

 private:
  MrTable& table_;
  uint32_t keys_[kMax] = {};
  int n_ = 0;
};

}  // namespace tent::fabric::tcp
