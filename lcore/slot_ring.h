// SlotRing: the work queue an lcore's poller drains, many producers (application
// threads) and one consumer (the lcore), carrying non-null pointers.
//
// Why not rte_ring here: a hand-over through an rte_ring costs the producer a read of
// the consumer's tail (a line the consumer writes on every dequeue) and two
// compare-and-swaps on the producers' head/tail line (which the consumer reads on
// every pass), then the consumer a read of that line and of the slot: three or four
// cache-line transfers between the two cores for one pointer. Here a slot says itself
// whether it is full (non-null), so the consumer polls only the slot it will take
// next, and a producer checks for room against a copy of the consumer's position that
// producers refresh once per lap: one hand-over is the slot line's transfer and
// little else (docs/lcore.md has the measurements).
//
// Producers: claim positions with a compare-and-swap on their own line (the consumer
// never reads it), then store each claimed slot (release). A producer preempted
// between its claim and its store holds back the consumer at that slot (later slots
// wait behind it, as behind an RTS ring's tail) but never makes another producer
// spin: each claims past it. Consumer: takes slots in order while they are non-null,
// clears each, and publishes its position (release) once per burst; whatever a
// producer wrote before its store is visible to the consumer after its load.
//
// Capacity: a power of two, every slot usable.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "lcore/typed_ring.h"
#include "tent/status.h"

namespace tent::lcore {

class RawSlotRing {
 public:
  // `capacity` is rounded up to a power of two (2 at least); every slot is usable.
  static Result<std::unique_ptr<RawSlotRing>> create(const std::string& name, uint32_t capacity);
  ~RawSlotRing();
  RawSlotRing(const RawSlotRing&) = delete;
  RawSlotRing& operator=(const RawSlotRing&) = delete;

  // Any thread. `obj` must not be null (an empty slot is null). False when full.
  bool enqueue(void* obj) noexcept;
  // Any thread: as many of `objs` (none null) as fit, in order; returns how many.
  unsigned enqueueBurst(void* const* objs, unsigned n) noexcept;
  // Any thread: all of `objs` or none; returns n or 0.
  unsigned enqueueBulk(void* const* objs, unsigned n) noexcept;
  // Only the ring's one consumer thread: up to `n` objects in enqueue order.
  unsigned dequeueBurst_sc(void** objs, unsigned n) noexcept;
  // Claimed and not yet dequeued (a snapshot; includes claims not yet stored).
  unsigned count() const noexcept;
  // Every position ever claimed (only grows): an enqueue counts here before it
  // stores its slots, so a consumer deciding whether to sleep sees work in transit.
  uint64_t claimed() const noexcept { return head_.load(std::memory_order_acquire); }
  unsigned capacity() const noexcept { return mask_ + 1; }

 private:
  explicit RawSlotRing(uint32_t slots);
  // Claims up to `n` free positions (exactly `n` or none when `all`) from *start on
  // for the caller to store; returns how many.
  unsigned claim(unsigned n, bool all, uint64_t* start) noexcept;
  void store(uint64_t start, void* const* objs, unsigned n) noexcept;

  const uint32_t mask_;
  std::unique_ptr<std::atomic<void*>[]> slots_;
  // Producers' line: the next position to claim, and the consumer's position as a
  // producer last read it (never ahead of the real one, so room it shows is real).
  alignas(64) std::atomic<uint64_t> head_{0};
  std::atomic<uint64_t> tail_seen_{0};
  // Consumer's line: its next position (private) and the published copy producers
  // read when tail_seen_ says the ring is full.
  alignas(64) uint64_t next_ = 0;
  std::atomic<uint64_t> tail_{0};
};

// Pointers to T (lcore/typed_ring.h).
template <typename T>
using SlotRing = TypedRing<RawSlotRing, T>;

}  // namespace tent::lcore
