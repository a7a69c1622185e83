// RawSlotRing enqueue/dequeue (lcore/slot_ring.h has the protocol and why).
#include "lcore/slot_ring.h"

#include <cassert>

namespace tent::lcore {

unsigned RawSlotRing::claim(unsigned n, bool all, uint64_t* start) noexcept {
  uint64_t head = head_.load(std::memory_order_relaxed);
  for (;;) {
    unsigned want = n;
    // Acquire: pairs with the release of whichever producer refreshed tail_seen_,
    // which read the consumer's release of tail_, so the slots the consumer cleared
    // before it are seen clear.
    uint64_t tail = tail_seen_.load(std::memory_order_acquire);
    if (head - tail + want > capacity()) {
      tail = tail_.load(std::memory_order_acquire);  // about once per lap, or when full
      tail_seen_.store(tail, std::memory_order_release);
      const uint64_t room = capacity() - (head - tail);
      if (room == 0 || (all && room < want)) return 0;
      if (room < want) want = static_cast<unsigned>(room);
    }
    if (head_.compare_exchange_weak(head, head + want, std::memory_order_relaxed,
                                    std::memory_order_relaxed)) {
      *start = head;
      return want;
    }
  }
}

bool RawSlotRing::enqueue(void* obj) noexcept {
  return enqueueBurst(&obj, 1) == 1;
}

void RawSlotRing::store(uint64_t start, void* const* objs, unsigned n) noexcept {
  // Release: what the producer wrote before is the consumer's once it loads the slot.
  for (unsigned i = 0; i < n; ++i) {
    assert(objs[i] != nullptr);  // a null slot reads as not yet stored: the ring would stall
    slots_[(start + i) & mask_].store(objs[i], std::memory_order_release);
  }
}

unsigned RawSlotRing::enqueueBurst(void* const* objs, unsigned n) noexcept {
  if (n == 0) return 0;
  uint64_t start = 0;
  const unsigned got = claim(n, /*all=*/false, &start);
  store(start, objs, got);
  return got;
}

unsigned RawSlotRing::enqueueBulk(void* const* objs, unsigned n) noexcept {
  if (n == 0 || n > capacity()) return 0;
  uint64_t start = 0;
  const unsigned got = claim(n, /*all=*/true, &start);
  store(start, objs, got);
  return got;
}

unsigned RawSlotRing::dequeueBurst_sc(void** objs, unsigned n) noexcept {
  unsigned got = 0;
  while (got < n) {
    std::atomic<void*>& slot = slots_[next_ & mask_];
    void* obj = slot.load(std::memory_order_acquire);
    if (obj == nullptr) break;  // empty, or claimed and not yet stored
    // Relaxed: producers store into this slot only after they read tail_ past it,
    // which the release below publishes after this clear.
    slot.store(nullptr, std::memory_order_relaxed);
    objs[got++] = obj;
    ++next_;
  }
  if (got != 0) tail_.store(next_, std::memory_order_release);
  return got;
}

unsigned RawSlotRing::count() const noexcept {
  const uint64_t tail = tail_.load(std::memory_order_acquire);
  const uint64_t head = head_.load(std::memory_order_acquire);
  return head > tail ? static_cast<unsigned>(head - tail) : 0;
}

}  // namespace tent::lcore
