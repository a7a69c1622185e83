// RawRing enqueue/dequeue: thin, noexcept wrappers over the inline rte_ring calls.
#include <rte_ring.h>

#include "lcore/ring.h"

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#endif

namespace tent::lcore {

namespace {
// An rte_ring publishes its objects: what a producer wrote before enqueuing a pointer
// is visible to the consumer that dequeues it (DPDK's contract, kept by the ring's own
// barriers). ThreadSanitizer does not see inside DPDK, so the ring tells it: a release
// on the ring before each enqueue, an acquire after each dequeue that returned
// something. Nothing in other builds.
inline void publishing(const rte_ring* ring) noexcept {
#if defined(__SANITIZE_THREAD__)
  __tsan_release(const_cast<rte_ring*>(ring));
#else
  (void)ring;
#endif
}

inline void consumed(const rte_ring* ring, unsigned n) noexcept {
#if defined(__SANITIZE_THREAD__)
  if (n != 0) __tsan_acquire(const_cast<rte_ring*>(ring));
#else
  (void)ring;
  (void)n;
#endif
}
}  // namespace

bool RawRing::enqueue(void* obj) noexcept {
  publishing(ring_);
  return rte_ring_enqueue(ring_, obj) == 0;
}

unsigned RawRing::enqueueBulk(void* const* objs, unsigned n) noexcept {
  publishing(ring_);
  return rte_ring_enqueue_bulk(ring_, objs, n, nullptr);
}

unsigned RawRing::enqueueBurst(void* const* objs, unsigned n) noexcept {
  publishing(ring_);
  return rte_ring_enqueue_burst(ring_, objs, n, nullptr);
}

unsigned RawRing::dequeueBurst_sc(void** objs, unsigned n) noexcept {
  const unsigned got = rte_ring_dequeue_burst(ring_, objs, n, nullptr);
  consumed(ring_, got);
  return got;
}

unsigned RawRing::count() const noexcept {
  return rte_ring_count(ring_);
}

unsigned RawRing::capacity() const noexcept {
  return rte_ring_get_capacity(ring_);
}

}  // namespace tent::lcore
