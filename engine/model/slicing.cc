#include "model/slicing.h"

namespace tent::rdma {

namespace {
bool tailMerges(uint64_t tail, uint64_t block_size, uint64_t max_slice) noexcept {
  return tail * 2 < block_size && block_size + tail <= max_slice;
}
}  // namespace

uint64_t sliceCount(uint64_t length, uint64_t block_size, uint64_t max_slice) noexcept {
  if (length == 0) return 0;
  if (max_slice == 0) max_slice = UINT64_MAX;
  if (block_size == 0 || block_size > max_slice) block_size = max_slice;
  if (length <= block_size) return 1;
  uint64_t full = length / block_size;
  uint64_t tail = length % block_size;
  return (tail == 0 || tailMerges(tail, block_size, max_slice)) ? full : full + 1;
}

void sliceRange(uint64_t length, uint64_t block_size, uint64_t index, uint64_t* offset,
                uint64_t* slice_length, uint64_t max_slice) noexcept {
  if (max_slice == 0) max_slice = UINT64_MAX;
  if (block_size == 0 || block_size > max_slice) block_size = max_slice;
  uint64_t count = sliceCount(length, block_size, max_slice);
  if (count <= 1) {
    *offset = 0;
    *slice_length = length;
    return;
  }
  *offset = index * block_size;
  *slice_length = (index + 1 == count) ? length - *offset : block_size;
}

void evenSplit(uint64_t length, uint32_t parts, uint32_t index, uint64_t* offset,
               uint64_t* piece) noexcept {
  if (parts == 0) parts = 1;
  uint64_t base = length / parts;
  uint64_t extra = length % parts;  // the first `extra` pieces take one more byte
  *offset = index * base + (index < extra ? index : extra);
  *piece = base + (index < extra ? 1 : 0);
}

size_t localCandidates(const topology::RailMap& rails, topology::LocationId location,
                       uint64_t device_mask, uint64_t paused_mask, uint32_t* out,
                       size_t max) noexcept {
  size_t n = rails.preferred(location, device_mask & ~paused_mask, out, max);
  if (n == 0 && paused_mask != 0) n = rails.preferred(location, device_mask, out, max);
  return n;
}

int choosePeerDevice(std::span<const int> same_name, uint32_t local,
                     std::span<const uint16_t> region_rank0, uint32_t peer_device_count,
                     uint64_t rr) noexcept {
  if (local < same_name.size() && same_name[local] >= 0) return same_name[local];
  if (!region_rank0.empty()) return region_rank0[rr % region_rank0.size()];
  if (peer_device_count == 0) return -1;
  return static_cast<int>(rr % peer_device_count);
}

}  // namespace tent::rdma
