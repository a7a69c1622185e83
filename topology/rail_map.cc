// Building the rail map (control path). Lookups used by the datapath live in
// rail_map_datapath.cc.
#include <algorithm>
#include <cctype>
#include <set>
#include <string>

#include "tent/log.h"
#include "topology/rail_map.h"

namespace tent::topology {
namespace {

std::string lowerCase(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// Host bridges are named "pci<domain>:<bus>"; every other path element is a PCI bridge.
bool isHostBridgeId(const std::string& id) {
  return id.rfind("pci", 0) == 0;
}

// Under the same PCIe switch: the two paths share a PCI bridge below the host bridge.
// Sharing only the host bridge (the root complex) does not count.
bool underSameSwitch(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  size_t common = 0;
  while (common < a.size() && common < b.size() && a[common] == b[common]) ++common;
  for (size_t i = 0; i < common; ++i)
    if (!isHostBridgeId(a[i])) return true;
  return false;
}

// Takes NUMA node and PCIe path from the topology NIC with the same PCI address.
void placeOnTopology(RailDevice* d, const Topology& topology) {
  if (d->pci.empty()) return;
  std::string pci = lowerCase(d->pci);
  for (const auto& nic : topology.rdmaDevices()) {
    if (nic.pci != pci) continue;
    d->numa_node = nic.numa_node;
    d->pcie_path = nic.pcie_path;
    return;
  }
  TENT_DEBUG(kTopology,
             "device %s (%s) is not in the topology; keeping its configured NUMA node %d",
             d->name.c_str(), d->pci.c_str(), d->numa_node);
}

// Device indices in the stable order: PCI address (devices without one last), then index.
std::vector<uint32_t> stableOrder(const std::vector<RailDevice>& devices) {
  std::vector<uint32_t> order(devices.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](uint32_t x, uint32_t y) {
    const std::string a = lowerCase(devices[x].pci), b = lowerCase(devices[y].pci);
    if (a.empty() != b.empty()) return !a.empty();
    return a < b;
  });
  return order;
}

// rank(i) in {0, 1, 2} for each device, in stable order.
template <typename RankOf>
RankedDevices rankDevices(const std::vector<uint32_t>& order, RankOf rank_of) {
  RankedDevices r;
  for (uint32_t i : order) r.rank[rank_of(i)].push_back(i);
  for (int k = 0; k < 3; ++k) {
    if (!r.rank[k].empty()) {
      r.first_rank = k;
      break;
    }
  }
  return r;
}

}  // namespace

RailMap RailMap::build(const std::vector<RailDevice>& devices, const Topology& topology) {
  RailMap map;
  map.devices_ = devices;
  for (auto& d : map.devices_) placeOnTopology(&d, topology);
  const std::vector<uint32_t> order = stableOrder(map.devices_);
  const auto& devs = map.devices_;

  map.names_.assign(1, "*");
  map.ranked_.assign(1, rankDevices(order, [](uint32_t) { return 0; }));
  map.location_numa_.assign(1, -1);

  // cpu:N for every NUMA node of the machine, and for nodes only a configured device names
  // (soft devices placed on a NUMA node this machine does not have).
  std::set<int> nodes;
  for (const auto& n : topology.numaNodes()) nodes.insert(n.id);
  for (const auto& d : devs)
    if (d.numa_node >= 0) nodes.insert(d.numa_node);
  for (int node : nodes) {
    map.names_.push_back("cpu:" + std::to_string(node));
    map.location_numa_.push_back(node);
    map.ranked_.push_back(
        rankDevices(order, [&](uint32_t i) { return devs[i].numa_node == node ? 0 : 2; }));
  }

  const auto& gpus = topology.gpus();
  for (size_t g = 0; g < gpus.size(); ++g) {
    map.names_.push_back("cuda:" + std::to_string(g));
    map.location_numa_.push_back(gpus[g].numa_node);
    map.gpu_pcis_.push_back(lowerCase(gpus[g].pci));
    map.ranked_.push_back(rankDevices(order, [&](uint32_t i) {
      if (underSameSwitch(gpus[g].pcie_path, devs[i].pcie_path)) return 0;
      bool same_numa = gpus[g].numa_node >= 0 && devs[i].numa_node == gpus[g].numa_node;
      return same_numa ? 1 : 2;
    }));
  }

  map.device_cpus_.clear();
  for (const auto& d : devs) map.device_cpus_.push_back(topology.cpusOfNuma(d.numa_node));
  return map;
}

LocationId RailMap::locationId(std::string_view location) const {
  for (size_t i = 0; i < names_.size(); ++i)
    if (names_[i] == location) return static_cast<LocationId>(i);
  return kAnyLocation;
}

std::vector<int> RailMap::cpusNearDevice(uint32_t index) const {
  return index < device_cpus_.size() ? device_cpus_[index] : std::vector<int>{};
}

std::string RailMap::gpuLocationForPci(std::string_view pci) const {
  const std::string want = lowerCase(std::string(pci));
  for (size_t k = 0; k < gpu_pcis_.size(); ++k)
    if (!want.empty() && gpu_pcis_[k] == want) return "cuda:" + std::to_string(k);
  return "";
}

bool RailMap::acrossSockets(LocationId id, uint32_t index) const {
  if (id >= location_numa_.size() || index >= devices_.size()) return false;
  const int memory = location_numa_[id], device = devices_[index].numa_node;
  return memory >= 0 && device >= 0 && memory != device;
}

}  // namespace tent::topology
