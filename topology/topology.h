// Machine topology from hwloc (live, or an XML file with I/O objects kept).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tent/status.h"

namespace tent::config {
struct TopologyConfig;
}

namespace tent::topology {

struct NumaNode {
  int id = 0;
  std::vector<int> cpus;  // OS CPU indices
};

// A CPU core usable for an lcore: its hardware threads (OS CPU indices) and NUMA node.
struct CpuCore {
  int id = 0;          // hwloc's OS index of the core (or of the PU when there are no cores)
  int numa_node = -1;  // -1 when the core spans several NUMA nodes or none
  std::vector<int> cpus;
};

// A PCI-attached device: an RDMA NIC (OpenFabrics OS device) or a GPU.
struct PciDevice {
  std::string name;  // OS device name: "mlx5_0", "cuda0" / "nvidia0" ...
  std::string pci;   // "0000:3b:00.0"
  int numa_node = -1;
  // Ids of the PCIe bridges/switches above the device, root first. Two devices
  // under the same PCIe switch share a non-root-port prefix of this chain.
  // The host bridge is "pci<domain>:<root bus>" (as sysfs names it, e.g. "pci0000:3a");
  // a PCI-to-PCI bridge (root port, switch port) is its bus id ("0000:3b:00.0").
  // Devices that are not under PCI (e.g. rxe0) have an empty pci and path.
  std::vector<std::string> pcie_path;
};

class Topology {
 public:
  static Result<Topology> loadLive();
  static Result<Topology> loadXml(const std::string& path);
  // An XML document in memory; `source_name` stands in for a file name in messages.
  static Result<Topology> loadXmlBuffer(std::string_view xml, std::string source_name);
  // xml_file empty: live.
  static Result<Topology> load(const config::TopologyConfig& config);

  const std::vector<NumaNode>& numaNodes() const noexcept { return numa_; }
  const std::vector<PciDevice>& rdmaDevices() const noexcept { return nics_; }  // by PCI address
  // By PCI address; cuda:N = gpus()[N].
  const std::vector<PciDevice>& gpus() const noexcept { return gpus_; }
  const std::vector<CpuCore>& cores() const noexcept { return cores_; }  // by first CPU
  std::vector<int> cpusOfNuma(int numa_node) const;
  int numaOfCpu(int cpu) const;                                   // -1 when unknown
  const std::string& source() const noexcept { return source_; }  // "live" or the XML path

 private:
  std::vector<NumaNode> numa_;
  std::vector<CpuCore> cores_;
  std::vector<PciDevice> nics_;
  std::vector<PciDevice> gpus_;
  std::string source_;
  friend class TopologyBuilder;
};

}  // namespace tent::topology
