// The soft NIC's payload copy: what a NIC's DMA engine does, done by the posting CPU.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tent::fabric::soft {

// Copies n bytes from src to dst (memmove semantics: the ranges may overlap). From
// `stream_min` bytes on (0 = never) and when the ranges are disjoint, the stores are
// non-temporal, as DMA writes do not allocate lines in the posting CPU's caches: a
// bulk copy then skips the read-for-ownership of every destination line (on the
// reference VM, 64 KiB pieces of 4 MiB go at 6.5-15 GB/s instead of 5). Smaller
// copies keep cached stores: on hardware DDIO puts small messages in the LLC, and
// their reader usually comes at once. The stores are fenced before it returns, so
// a completion published afterwards is ordered after every byte.
void dmaCopy(void* dst, const void* src, size_t n, uint64_t stream_min) noexcept;

}  // namespace tent::fabric::soft
