// Lcore placement checks against the rail map (control path).
#include "topology/placement.h"

#include <algorithm>
#include <cstdio>

namespace tent::topology {
namespace {

std::string numaText(int node) {
  return node >= 0 ? std::to_string(node) : "unknown";
}

std::string lcoreText(size_t lcore, int cpu, int cpu_numa) {
  return "lcore " + std::to_string(lcore) + " (cpu " + std::to_string(cpu) + ", NUMA " +
         numaText(cpu_numa) + ")";
}

// Index of the device called `name`, or -1.
int findDevice(const RailMap& rails, const std::string& name) {
  for (uint32_t i = 0; i < rails.deviceCount(); ++i)
    if (rails.device(i).name == name) return static_cast<int>(i);
  return -1;
}

void checkOneDevice(size_t lcore, int cpu, int cpu_numa, const std::string& name,
                    const RailMap& rails, std::vector<PlacementWarning>* out) {
  PlacementWarning w{lcore, cpu, name, cpu_numa, -1, {}};
  int index = findDevice(rails, name);
  if (index < 0) {
    w.message = lcoreText(lcore, cpu, cpu_numa) + " runs rail:" + name + ", which names no device";
    out->push_back(std::move(w));
    return;
  }
  w.device_numa = rails.device(static_cast<uint32_t>(index)).numa_node;
  if (w.device_numa < 0 || w.device_numa == cpu_numa) return;
  w.message = lcoreText(lcore, cpu, cpu_numa) + " runs rail:" + name + " but " + name +
              " is on NUMA " + std::to_string(w.device_numa) + "; CPUs near it: " +
              formatCpuList(rails.cpusNearDevice(static_cast<uint32_t>(index)));
  out->push_back(std::move(w));
}

// rail:* serves every device: warn once, naming the devices on other NUMA nodes.
void checkEveryDevice(size_t lcore, int cpu, int cpu_numa, const RailMap& rails,
                      std::vector<PlacementWarning>* out) {
  std::string far;
  for (uint32_t i = 0; i < rails.deviceCount(); ++i) {
    int node = rails.device(i).numa_node;
    if (node < 0 || node == cpu_numa) continue;
    far +=
        (far.empty() ? "" : ", ") + rails.device(i).name + " (NUMA " + std::to_string(node) + ")";
  }
  if (far.empty()) return;
  PlacementWarning w{lcore, cpu, "*", cpu_numa, -1, {}};
  w.message = lcoreText(lcore, cpu, cpu_numa) + " runs rail:* but some devices are on other " +
              "NUMA nodes: " + far + "; consider one rail lcore per NUMA node";
  out->push_back(std::move(w));
}

}  // namespace

std::vector<PlacementWarning> checkRailLcorePlacement(const std::vector<config::LcoreSpec>& lcores,
                                                      const RailMap& rails,
                                                      const Topology& topology) {
  std::vector<PlacementWarning> out;
  for (size_t l = 0; l < lcores.size(); ++l) {
    const auto& spec = lcores[l];
    if (spec.cpu < 0) continue;
    const int cpu_numa = topology.numaOfCpu(spec.cpu);
    bool has_rail = false;
    for (const auto& poller : spec.pollers) {
      if (poller.kind != config::PollerKind::kRail) continue;
      has_rail = true;
      if (cpu_numa < 0) break;  // reported once below
      if (poller.device == "*") {
        checkEveryDevice(l, spec.cpu, cpu_numa, rails, &out);
      } else {
        checkOneDevice(l, spec.cpu, cpu_numa, poller.device, rails, &out);
      }
    }
    if (has_rail && cpu_numa < 0) {
      out.push_back({l, spec.cpu, "", -1, -1,
                     lcoreText(l, spec.cpu, -1) + " runs rail pollers on a CPU the topology (" +
                         topology.source() + ") does not have"});
    }
  }
  return out;
}

std::string formatCpuList(std::vector<int> cpus) {
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  std::string text;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!text.empty()) text += ",";
    text += std::to_string(cpus[i]);
    if (j > i) text += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return text;
}

}  // namespace tent::topology
