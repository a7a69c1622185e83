// Fan-in phase of lcore_ring_bench: N application threads (unpinned, typically more
// than there are cores) enqueue onto one ring that a poller on an lcore drains. It
// measures what tent's callers see when they hand work to an lcore, and shows why
// tent's rings never make producers wait for each other (compare --producer_sync=classic).
#pragma once

#include <cstdint>

#include "bench_ring.h"
#include "lcore/runtime.h"

namespace tent::bench {

struct FanInResult {
  bool finished = false;
  uint64_t errors = 0;
  double obj_per_s = 0;
  // Time of one successful enqueueBulk call, as the producer thread saw it.
  double enqueue_p50_ns = 0, enqueue_p99_ns = 0, enqueue_p999_ns = 0, enqueue_max_ns = 0;
};

// Runs the phase on `lcore` of `rt`: `producers` threads move `objects` objects in
// bulks of 8. Gives up after `limit_s` seconds (finished = false); the producer
// threads may then still be stuck, so the caller must end the process.
FanInResult runFanIn(lcore::Runtime& rt, size_t lcore, unsigned producers, uint64_t objects,
                     RingKind producer_kind, double tsc_hz, unsigned limit_s);

}  // namespace tent::bench
