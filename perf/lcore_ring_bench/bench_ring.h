// The ring lcore_ring_bench moves objects through: tent's rte_ring wrapper in one of
// its producer modes, or the slot ring the engine's pollers use. Every phase calls
// both through the same virtual calls, so the figures compare the rings, not the calls.
#pragma once

#include <memory>
#include <string>

#include "lcore/ring.h"
#include "lcore/slot_ring.h"

namespace tent::bench {

// The producer side of a ring; the consumer side is always single.
enum class RingKind { kRts, kClassic, kSingle, kSlot };

const char* ringKindName(RingKind kind);
bool parseRingKind(const std::string& text, RingKind* out);

class BenchRing {
 public:
  virtual ~BenchRing() = default;
  virtual bool enqueue(void* obj) noexcept = 0;
  virtual unsigned enqueueBulk(void* const* objs, unsigned n) noexcept = 0;
  virtual unsigned enqueueBurst(void* const* objs, unsigned n) noexcept = 0;
  virtual unsigned dequeueBurst_sc(void** objs, unsigned n) noexcept = 0;
};

Result<std::unique_ptr<BenchRing>> makeBenchRing(const std::string& name, uint32_t slots,
                                                 RingKind kind);

}  // namespace tent::bench
