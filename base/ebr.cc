#include "base/ebr.h"

#include <atomic>
#include <cstddef>

namespace tent::ebr {

namespace {

constexpr size_t kSlots = 1024;

struct alignas(64) Slot {
  std::atomic<bool> claimed{false};
  std::atomic<uint64_t> entered{0};  // 0: outside a section
};

std::atomic<uint64_t> g_epoch{1};
Slot g_slots[kSlots];
std::atomic<size_t> g_high_water{0};  // slots below have been claimed at least once
// Readers that found every slot taken count here; writers wait for it to drain.
std::atomic<uint64_t> g_overflow{0};

struct ThreadSlot {
  Slot* slot = nullptr;
  bool overflow = false;
  uint32_t depth = 0;
  ~ThreadSlot() {
    if (slot) {
      slot->entered.store(0, std::memory_order_release);
      slot->claimed.store(false, std::memory_order_release);
    }
  }
  Slot* claim() noexcept {
    for (size_t i = 0; i < kSlots; ++i) {
      bool expected = false;
      if (g_slots[i].claimed.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) {
        size_t hw = g_high_water.load(std::memory_order_relaxed);
        while (hw < i + 1 &&
               !g_high_water.compare_exchange_weak(hw, i + 1, std::memory_order_acq_rel)) {
        }
        return &g_slots[i];
      }
    }
    return nullptr;
  }
};

thread_local ThreadSlot t_slot;

}  // namespace

ReadSection::ReadSection() noexcept {
  ThreadSlot& t = t_slot;
  if (t.depth++ != 0) return;
  if (!t.slot && !t.overflow) {
    t.slot = t.claim();
    t.overflow = t.slot == nullptr;
  }
  if (t.slot) {
    t.slot->entered.store(g_epoch.load(std::memory_order_relaxed), std::memory_order_relaxed);
  } else {
    g_overflow.fetch_add(1, std::memory_order_relaxed);
  }
  // The announcement is ordered before every pointer this reader loads afterwards.
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

ReadSection::~ReadSection() {
  ThreadSlot& t = t_slot;
  if (--t.depth != 0) return;
  if (t.slot) {
    t.slot->entered.store(0, std::memory_order_release);
  } else {
    g_overflow.fetch_sub(1, std::memory_order_release);
  }
}

uint64_t retire() noexcept {
  // seq_cst: ordered after the caller's unlink and before quiescentSince()'s scan.
  return g_epoch.fetch_add(1, std::memory_order_seq_cst) + 1;
}

bool quiescentSince(uint64_t epoch) noexcept {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (g_overflow.load(std::memory_order_acquire) != 0) return false;
  const size_t n = g_high_water.load(std::memory_order_acquire);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t e = g_slots[i].entered.load(std::memory_order_acquire);
    if (e != 0 && e < epoch) return false;
  }
  return true;
}

unsigned activeReaders() noexcept {
  unsigned n = static_cast<unsigned>(g_overflow.load(std::memory_order_relaxed));
  const size_t hw = g_high_water.load(std::memory_order_acquire);
  for (size_t i = 0; i < hw; ++i)
    n += g_slots[i].entered.load(std::memory_order_relaxed) != 0 ? 1u : 0u;
  return n;
}

}  // namespace tent::ebr
