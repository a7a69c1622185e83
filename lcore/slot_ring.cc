// RawSlotRing set-up: validate the capacity, allocate the slots (all null: empty).
#include <bit>
#include <new>

#include "lcore/slot_ring.h"

namespace tent::lcore {

namespace {
constexpr uint32_t kMaxSlots = 1u << 30;
}  // namespace

RawSlotRing::RawSlotRing(uint32_t slots) : mask_(slots - 1), slots_(new std::atomic<void*>[slots]) {
  for (uint32_t i = 0; i < slots; ++i) slots_[i].store(nullptr, std::memory_order_relaxed);
}

RawSlotRing::~RawSlotRing() = default;

Result<std::unique_ptr<RawSlotRing>> RawSlotRing::create(const std::string& name,
                                                         uint32_t capacity) {
  if (name.empty()) return Status::InvalidArgument("slot ring: a name is required");
  if (capacity == 0) return Status::InvalidArgument("ring '" + name + "': capacity must be > 0");
  if (capacity > kMaxSlots) {
    return Status::InvalidArgument("ring '" + name + "': capacity " + std::to_string(capacity) +
                                   " exceeds the limit " + std::to_string(kMaxSlots));
  }
  std::unique_ptr<RawSlotRing> ring(new (std::nothrow)
                                        RawSlotRing(std::bit_ceil(capacity < 2 ? 2 : capacity)));
  if (!ring) return Status::ResourceExhausted("ring '" + name + "': cannot allocate");
  return ring;
}

}  // namespace tent::lcore
