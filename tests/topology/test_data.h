// Paths of the topology test data and of the tent-topo executable, set by meson.
#pragma once

#include <string>

#include "topology/rail_map.h"
#include "topology/topology.h"

namespace tent::topology::testing {

inline std::string dataFile(const std::string& name) {
  return std::string(TENT_TOPOLOGY_TEST_DATA) + "/" + name;
}

// The RDMA devices of a topology as rail devices (what the fabric would report).
inline std::vector<RailDevice> railDevicesOf(const Topology& topo) {
  std::vector<RailDevice> devices;
  for (const auto& nic : topo.rdmaDevices())
    devices.push_back({nic.name, nic.numa_node, nic.pci, nic.pcie_path});
  return devices;
}

inline std::vector<std::string> namesOf(const RailMap& map, const std::vector<uint32_t>& indices) {
  std::vector<std::string> names;
  for (uint32_t i : indices) names.push_back(map.device(i).name);
  return names;
}

}  // namespace tent::topology::testing
