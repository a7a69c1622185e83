// Typed rte_ring wrappers: work queues of pointers, by default multi-producer /
// single-consumer. A ring publishes what it carries: whatever a producer wrote
// before enqueuing a pointer is visible to the consumer that dequeues it (also to
// ThreadSanitizer, which the wrappers tell), so no other synchronisation is needed
// to hand an object over.
// The ring memory is allocated by us and initialised with rte_ring_init, so rings
// work with or without EAL (manual mode, unit tests).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "lcore/typed_ring.h"
#include "tent/status.h"

struct rte_ring;

namespace tent::lcore {

// How the threads of one side of a ring (producers or consumers) synchronise.
enum class RingSync : uint8_t {
  // DPDK's relaxed tail sync (RTS): several threads, and one preempted in the middle
  // of its operation does not make the others spin until it runs again. The default
  // for multi-thread sides: tent's producers are application threads, often more
  // than there are cores (docs/lcore.md has the measurements).
  kRts = 0,
  // DPDK's default multi-thread mode: cheaper per operation, but a thread preempted
  // mid-operation stalls every later one on that side. Only for threads that are
  // never preempted (pinned lcores that own their cores).
  kClassic,
  // Exactly one thread on that side (single producer / single consumer): fastest.
  kSingle,
};

struct RingOptions {
  RingSync producers = RingSync::kRts;
  RingSync consumers = RingSync::kSingle;
};

class RawRing {
 public:
  // `capacity` is rounded up to a power of two (usable slots = that minus one).
  // RTS producers; a single consumer, or RTS consumers.
  static Result<std::unique_ptr<RawRing>> create(const std::string& name, uint32_t capacity,
                                                 bool single_consumer = true);
  static Result<std::unique_ptr<RawRing>> create(const std::string& name, uint32_t capacity,
                                                 const RingOptions& options);
  ~RawRing();
  RawRing(const RawRing&) = delete;
  RawRing& operator=(const RawRing&) = delete;

  bool enqueue(void* obj) noexcept;
  // All or nothing; returns the number enqueued (0 or n).
  unsigned enqueueBulk(void* const* objs, unsigned n) noexcept;
  unsigned enqueueBurst(void* const* objs, unsigned n) noexcept;
  // Consumer side: only the ring's one consumer thread may call (_sc: single consumer;
  // an lcore's input ring, or the control loop's request ring).
  unsigned dequeueBurst_sc(void** objs, unsigned n) noexcept;
  unsigned count() const noexcept;
  unsigned capacity() const noexcept;
  const RingOptions& options() const noexcept { return options_; }

 private:
  RawRing() = default;
  rte_ring* ring_ = nullptr;
  void* mem_ = nullptr;
  RingOptions options_;
};

// Pointers to T (lcore/typed_ring.h).
template <typename T>
using Ring = TypedRing<RawRing, T>;

}  // namespace tent::lcore
