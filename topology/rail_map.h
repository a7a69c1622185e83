// The rail map: for each memory location, the RDMA devices ranked by distance.
//   rank 0: nearest (GPU: devices under the same PCIe switch; CPU memory: same NUMA node)
//   rank 1: same NUMA node, not rank 0
//   rank 2: the rest
// Lookups by LocationId allocate nothing: the datapath uses them.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tent/status.h"
#include "topology/topology.h"

namespace tent::topology {

// A device the fabric exposes, placed on the machine (index = position in the list).
struct RailDevice {
  std::string name;
  int numa_node = -1;
  std::string pci;                     // may be empty (soft devices listed in YAML)
  std::vector<std::string> pcie_path;  // may be empty
};

using LocationId = uint32_t;
inline constexpr LocationId kAnyLocation = 0;  // "*"

struct RankedDevices {
  // Device indices, stable order (PCI address, then index).
  std::array<std::vector<uint32_t>, 3> rank;
  int first_rank = -1;  // first non-empty rank, -1 when no device at all
};

class RailMap {
 public:
  // Locations: "*", "cpu:N" for every NUMA node, "cuda:N" for every GPU.
  // A device whose `pci` matches a topology RDMA device takes that device's NUMA node
  // and PCIe path; a NUMA node named only by a device also gets its "cpu:N".
  static RailMap build(const std::vector<RailDevice>& devices, const Topology& topology);

  size_t deviceCount() const noexcept { return devices_.size(); }
  const RailDevice& device(uint32_t index) const { return devices_[index]; }

  // "cpu:1" -> its id; unknown locations map to kAnyLocation. Control path.
  LocationId locationId(std::string_view location) const;
  const std::string& locationName(LocationId id) const { return names_[id]; }
  size_t locationCount() const noexcept { return names_.size(); }

  const RankedDevices& ranked(LocationId id) const noexcept { return ranked_[id]; }
  // The best non-empty rank after applying `device_mask` (bit i = device i; bits past 63
  // are always allowed), written to `out`; returns the count. No allocation.
  size_t preferred(LocationId id, uint64_t device_mask, uint32_t* out, size_t max) const noexcept;

  // For lcore placement: CPUs on the device's NUMA node (empty when unknown).
  std::vector<int> cpusNearDevice(uint32_t index) const;

  // The location of the topology GPU at PCI address `pci` ("cuda:K"), or "" when the
  // topology has no such GPU. CUDA's own device numbers need not be the topology's.
  std::string gpuLocationForPci(std::string_view pci) const;
  // True when device `index` and the memory at `id` are on different NUMA nodes, both
  // known: a NIC there reaches that memory across the inter-socket link.
  bool acrossSockets(LocationId id, uint32_t index) const;

 private:
  std::vector<RailDevice> devices_;
  // A default-constructed map has the one location "*" with no device.
  std::vector<std::string> names_{"*"};
  std::vector<RankedDevices> ranked_ = std::vector<RankedDevices>(1);
  std::vector<std::vector<int>> device_cpus_;
  std::vector<int> location_numa_ = std::vector<int>(1, -1);  // per location, -1 unknown
  std::vector<std::string> gpu_pcis_;                         // cuda:K = gpu_pcis_[K]
};

// A registered buffer and the locations of its parts (a buffer may span NUMA nodes).
struct BufferRegion {
  uint64_t addr = 0;
  uint64_t length = 0;
  LocationId location = kAnyLocation;
};
struct BufferLayout {
  uint64_t addr = 0;
  uint64_t length = 0;
  std::vector<BufferRegion> regions;  // cover [addr, addr+length), sorted by addr
};

// The location of [addr, addr+length): the region with the largest overlap wins
// (ties: the lower address). Returns false when the range is not inside one buffer.
// No allocation; used by both the direct and the worker path.
bool bufferLocationForRange(std::span<const BufferLayout> buffers, uint64_t addr, uint64_t length,
                            LocationId* out) noexcept;

}  // namespace tent::topology
