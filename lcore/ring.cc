// RawRing set-up and tear-down. The ring lives in memory we allocate and is
// initialised with rte_ring_init, so it needs no EAL (and no hugepages).
#include <rte_ring.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

#include "lcore/ring.h"

namespace tent::lcore {

namespace {

// rte_ring_init needs a power of two; RTE_RING_SZ_MASK is the largest it accepts.
Result<uint32_t> ringSlots(const std::string& name, uint32_t capacity) {
  if (capacity == 0) return Status::InvalidArgument("ring '" + name + "': capacity must be > 0");
  if (capacity > RTE_RING_SZ_MASK) {
    return Status::InvalidArgument("ring '" + name + "': capacity " + std::to_string(capacity) +
                                   " exceeds the rte_ring limit " +
                                   std::to_string(RTE_RING_SZ_MASK));
  }
  // Two slots at least, so one is usable.
  return static_cast<uint32_t>(rte_align32pow2(capacity < 2 ? 2 : capacity));
}

unsigned syncFlags(const RingOptions& options) {
  unsigned flags = 0;
  switch (options.producers) {
    case RingSync::kRts:
      flags |= RING_F_MP_RTS_ENQ;
      break;
    case RingSync::kClassic:
      break;
    case RingSync::kSingle:
      flags |= RING_F_SP_ENQ;
      break;
  }
  switch (options.consumers) {
    case RingSync::kRts:
      flags |= RING_F_MC_RTS_DEQ;
      break;
    case RingSync::kClassic:
      break;
    case RingSync::kSingle:
      flags |= RING_F_SC_DEQ;
      break;
  }
  return flags;
}

}  // namespace

Result<std::unique_ptr<RawRing>> RawRing::create(const std::string& name, uint32_t capacity,
                                                 bool single_consumer) {
  RingOptions options;
  options.consumers = single_consumer ? RingSync::kSingle : RingSync::kRts;
  return create(name, capacity, options);
}

Result<std::unique_ptr<RawRing>> RawRing::create(const std::string& name, uint32_t capacity,
                                                 const RingOptions& options) {
  if (name.empty() || name.size() >= RTE_RING_NAMESIZE) {
    return Status::InvalidArgument("ring name '" + name + "' must have 1 to " +
                                   std::to_string(RTE_RING_NAMESIZE - 1) + " characters");
  }
  TENT_ASSIGN_OR_RETURN(const uint32_t slots, ringSlots(name, capacity));
  const ssize_t bytes = rte_ring_get_memsize(slots);
  if (bytes < 0) {
    return Status::InvalidArgument("ring '" + name + "': rte_ring_get_memsize(" +
                                   std::to_string(slots) + ") failed");
  }
  void* mem = nullptr;
  if (posix_memalign(&mem, RTE_CACHE_LINE_SIZE, static_cast<size_t>(bytes)) != 0) {
    return Status::ResourceExhausted("ring '" + name + "': cannot allocate " +
                                     std::to_string(bytes) + " bytes");
  }
  auto* ring = static_cast<rte_ring*>(mem);
  const int rc = rte_ring_init(ring, name.c_str(), slots, syncFlags(options));
  if (rc != 0) {
    free(mem);
    return Status::Internal("ring '" + name + "': rte_ring_init failed: " + strerror(-rc));
  }
  std::unique_ptr<RawRing> out(new (std::nothrow) RawRing());
  if (!out) {
    free(mem);
    return Status::ResourceExhausted("ring '" + name + "': out of memory");
  }
  out->ring_ = ring;
  out->mem_ = mem;
  out->options_ = options;
  return out;
}

RawRing::~RawRing() {
  free(mem_);
}

}  // namespace tent::lcore
