#include "model/segments.h"

#include <algorithm>
#include <chrono>

namespace tent::rdma {

const LocalBuffer* LocalBufferTable::find(uint64_t addr, uint64_t length) const noexcept {
  auto it = std::upper_bound(
      buffers.begin(), buffers.end(), addr,
      [](uint64_t a, const std::shared_ptr<LocalBuffer>& b) { return a < b->addr; });
  if (it == buffers.begin()) return nullptr;
  const LocalBuffer& b = **(it - 1);
  uint64_t off = addr - b.addr;
  if (off >= b.length || length > b.length - off) return nullptr;
  return &b;
}

std::shared_ptr<const PeerSegment> makePeerSegment(SegmentId id, bool loopback,
                                                   metadata::SegmentDescriptor descriptor,
                                                   const std::vector<std::string>& local_devices,
                                                   uint64_t now_ns) {
  auto seg = std::make_shared<PeerSegment>();
  seg->id = id;
  seg->name = descriptor.name;
  seg->loopback = loopback;
  seg->descriptor = std::move(descriptor);
  seg->fetched_ns = now_ns;
  for (const auto& name : local_devices)
    seg->same_name.push_back(seg->descriptor.deviceIndex(name));
  return seg;
}

static_assert(static_cast<uint8_t>(MemoryAccess::kRemoteRead) == metadata::kBufferRemoteRead &&
                  static_cast<uint8_t>(MemoryAccess::kRemoteWrite) == metadata::kBufferRemoteWrite,
              "descriptor access bits are MemoryAccess values");

std::vector<SegmentBufferInfo> segmentBufferInfos(const metadata::SegmentDescriptor& d) {
  std::vector<SegmentBufferInfo> out;
  out.reserve(d.buffers.size());
  for (const auto& b : d.buffers) {
    SegmentBufferInfo info;
    info.addr = b.addr;
    info.length = b.length;
    info.location = b.regions.empty() ? "*" : b.regions.front().location;
    info.name = b.name;
    info.seq = b.seq;
    if (b.access != 0) info.access = static_cast<MemoryAccess>(b.access);
    out.push_back(std::move(info));
  }
  // A v1/v2 descriptor numbers nothing (seq 0): the stable sort keeps address order.
  std::stable_sort(
      out.begin(), out.end(),
      [](const SegmentBufferInfo& x, const SegmentBufferInfo& y) { return x.seq < y.seq; });
  return out;
}

const metadata::RegionDescriptor& regionAt(const metadata::BufferDescriptor& buffer,
                                           uint64_t addr) noexcept {
  for (const auto& r : buffer.regions)
    if (addr >= r.addr && addr - r.addr < r.length) return r;
  return buffer.regions.back();
}

uint64_t steadyNowNs() noexcept {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

}  // namespace tent::rdma
