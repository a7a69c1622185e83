// Local registered buffers and the cached descriptors of peer segments.
// Both are immutable snapshots behind shared_ptr: the control path publishes a
// new snapshot, tasks keep the one they were routed with until their last slice.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fabric/fabric.h"
#include "model/buffer_use.h"
#include "wire/segment_descriptor.h"
#include "tent/transfer_engine.h"
#include "topology/rail_map.h"
#include "wire/segment_descriptor.h"

namespace tent::rdma {

struct LocalBuffer {
  uint64_t addr = 0;
  uint64_t length = 0;
  // The address the caller registered: GPU memory made of several physical
  // allocations is one buffer per allocation, all unregistered together.
  uint64_t group = 0;
  bool engine_allocated = false;
  // What the descriptor tells peers: the name given at registration, the remote
  // access (metadata::kBufferRemoteRead/Write bits) and the registration order
  // (1 = first buffer registered in this engine; the chunks of one registration
  // take consecutive numbers in address order).
  std::string name;
  uint8_t remote_access = 0;
  uint64_t seq = 0;
  int gpu_device = -1;  // CUDA ordinal of device memory; -1 for host memory
  // Devices holding an MR of it (bit i = device i): a NIC that cannot reach the GPU
  // has none, and its lkey and rkey are 0.
  uint64_t device_mask = ~0ull;
  std::vector<std::unique_ptr<fabric::MemoryRegion>> mrs;  // per device index
  std::vector<uint32_t> lkeys;                             // per device index
  std::vector<uint32_t> rkeys;                             // per device index
  topology::BufferLayout layout;
  std::vector<std::string> region_locations;  // names, parallel to layout.regions
  // Tasks using it and its retirement (buffer_use.h); tasks reach the buffer through
  // const snapshots, so it is mutable.
  mutable BufferUse use;
};

struct LocalBufferTable {
  std::vector<std::shared_ptr<LocalBuffer>> buffers;  // sorted by addr
  std::vector<topology::BufferLayout> layouts;        // parallel to buffers
  uint64_t version = 0;                               // bumps with every change
  // The buffer holding [addr, addr+length) or nullptr. No allocation.
  const LocalBuffer* find(uint64_t addr, uint64_t length) const noexcept;
};

struct PeerSegment {
  SegmentId id = 0;
  std::string name;
  bool loopback = false;  // LOCAL_SEGMENT_ID: our own descriptor
  metadata::SegmentDescriptor descriptor;
  // Local device index -> peer device of the same name, or -1.
  std::vector<int> same_name;
  uint64_t fetched_ns = 0;
};

// Builds a PeerSegment from a descriptor against our device names.
std::shared_ptr<const PeerSegment> makePeerSegment(SegmentId id, bool loopback,
                                                   metadata::SegmentDescriptor descriptor,
                                                   const std::vector<std::string>& local_devices,
                                                   uint64_t now_ns);

// The descriptor's buffers as the API lists them: in registration order, or in
// address order for a v1/v2 descriptor (no order, name or access travels in it).
std::vector<SegmentBufferInfo> segmentBufferInfos(const metadata::SegmentDescriptor& d);

// Region of `buffer` containing `addr` (the buffer must contain it).
const metadata::RegionDescriptor& regionAt(const metadata::BufferDescriptor& buffer,
                                           uint64_t addr) noexcept;

// std::chrono::steady_clock in ns: the clock of a request's deadline_ns, so only
// deadline checks read it. Every other engine timestamp is clock::engineNowNs().
uint64_t steadyNowNs() noexcept;

}  // namespace tent::rdma
