// Rail map lookups on the datapath: no allocation, no locks, no logging above debug.
#include <algorithm>

#include "topology/rail_map.h"

namespace tent::topology {
namespace {

bool allowedByMask(uint32_t index, uint64_t device_mask) noexcept {
  return index >= 64 || ((device_mask >> index) & 1u) != 0;
}

// Bytes of [a, a_end) that fall in [b, b_end).
uint64_t overlap(uint64_t a, uint64_t a_end, uint64_t b, uint64_t b_end) noexcept {
  uint64_t lo = std::max(a, b), hi = std::min(a_end, b_end);
  return hi > lo ? hi - lo : 0;
}

const BufferLayout* bufferContaining(std::span<const BufferLayout> buffers, uint64_t addr,
                                     uint64_t end) noexcept {
  for (const auto& b : buffers) {
    if (b.length == 0 || b.addr + b.length < b.addr) continue;  // empty or malformed
    if (addr >= b.addr && end <= b.addr + b.length) return &b;
  }
  return nullptr;
}

}  // namespace

size_t RailMap::preferred(LocationId id, uint64_t device_mask, uint32_t* out,
                          size_t max) const noexcept {
  if (ranked_.empty() || out == nullptr || max == 0) return 0;
  if (id >= ranked_.size()) id = kAnyLocation;
  for (const auto& rank : ranked_[id].rank) {
    size_t n = 0;
    for (uint32_t index : rank) {
      if (!allowedByMask(index, device_mask)) continue;
      out[n++] = index;
      if (n == max) break;
    }
    if (n > 0) return n;
  }
  return 0;
}

bool bufferLocationForRange(std::span<const BufferLayout> buffers, uint64_t addr, uint64_t length,
                            LocationId* out) noexcept {
  if (length == 0 || out == nullptr || addr + length < addr) return false;
  const uint64_t end = addr + length;
  const BufferLayout* buffer = bufferContaining(buffers, addr, end);
  if (buffer == nullptr) return false;

  // Regions are sorted by address: skip those that end before the range starts.
  const auto& regions = buffer->regions;
  auto it = std::partition_point(regions.begin(), regions.end(), [addr](const BufferRegion& r) {
    return r.addr + r.length <= addr;
  });
  uint64_t best = 0;
  for (; it != regions.end() && it->addr < end; ++it) {
    uint64_t bytes = overlap(addr, end, it->addr, it->addr + it->length);
    if (bytes > best) {  // strictly larger: on a tie the lower address stays
      best = bytes;
      *out = it->location;
    }
  }
  return best > 0;
}

}  // namespace tent::topology
