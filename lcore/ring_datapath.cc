// RawRing enqueue/dequeue: thin, noexcept wrappers over the inline rte_ring calls.
#include <rte_ring.h>

#include "lcore/ring.h"

namespace tent::lcore {

bool RawRing::enqueue(void* obj) noexcept {
  return rte_ring_enqueue(ring_, obj) == 0;
}

unsigned RawRing::enqueueBulk(void* const* objs, unsigned n) noexcept {
  return rte_ring_enqueue_bulk(ring_, objs, n, nullptr);
}

unsigned RawRing::enqueueBurst(void* const* objs, unsigned n) noexcept {
  return rte_ring_enqueue_burst(ring_, objs, n, nullptr);
}

unsigned RawRing::dequeueBurst_sc(void** objs, unsigned n) noexcept {
  return rte_ring_dequeue_burst(ring_, objs, n, nullptr);
}

unsigned RawRing::count() const noexcept {
  return rte_ring_count(ring_);
}

unsigned RawRing::capacity() const noexcept {
  return rte_ring_get_capacity(ring_);
}

}  // namespace tent::lcore
