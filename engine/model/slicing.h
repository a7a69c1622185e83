// Pure routing logic shared by the worker and direct paths: how a request is cut
// into slices and which device pair carries each slice. No allocation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "topology/rail_map.h"

namespace tent::rdma {

inline constexpr size_t kMaxDevices = 64;

// Number of slices for `length` bytes cut in `block_size` pieces, where a short tail
// (less than half a block) merges into the previous slice instead of becoming its own
// when the merged slice still fits `max_slice` (one WR: the max message size). Every
// slice is at most max(block_size, ...) only if block_size <= max_slice, which the
// engine checks at start-up. block_size 0: one slice (if it fits `max_slice`).
uint64_t sliceCount(uint64_t length, uint64_t block_size, uint64_t max_slice = UINT64_MAX) noexcept;
// Offset and length of slice `index` of that plan.
void sliceRange(uint64_t length, uint64_t block_size, uint64_t index, uint64_t* offset,
                uint64_t* slice_length, uint64_t max_slice = UINT64_MAX) noexcept;
// Splits `length` into `parts` near-equal contiguous pieces (direct multi-rail).
void evenSplit(uint64_t length, uint32_t parts, uint32_t index, uint64_t* offset,
               uint64_t* piece) noexcept;

// Local candidates for a location: the rail map's best rank after `device_mask`,
// minus paused devices (unless that leaves none). Returns the count written to `out`.
size_t localCandidates(const topology::RailMap& rails, topology::LocationId location,
                       uint64_t device_mask, uint64_t paused_mask, uint32_t* out,
                       size_t max) noexcept;

// The peer device for a slice on local device `local`: the peer device of the same
// name when the target buffer has an rkey for it (`same_name[local]` >= 0), otherwise
// round-robin by `rr` over the target region's rank-0 devices (all peer devices when
// that list is empty). Returns -1 when the peer has no device.
int choosePeerDevice(std::span<const int> same_name, uint32_t local,
                     std::span<const uint16_t> region_rank0, uint32_t peer_device_count,
                     uint64_t rr) noexcept;

}  // namespace tent::rdma
