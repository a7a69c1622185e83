// Lcore placement help: where a rail lcore should sit, and warnings for a configured
// layout that pins rail lcores away from their NIC's NUMA node. Control path.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "config/config.h"
#include "topology/rail_map.h"
#include "topology/topology.h"

namespace tent::topology {

struct PlacementWarning {
  size_t lcore = 0;      // index in config::Config::lcores
  int cpu = -1;          // the lcore's configured CPU
  std::string device;    // the rail poller's device ("*" for every device)
  int cpu_numa = -1;     // NUMA node of `cpu`, -1 when the topology does not know the CPU
  int device_numa = -1;  // NUMA node of the device, -1 when unknown or not one node
  std::string message;   // one line for the log, with the CPUs to use instead
};

// Checks every rail poller ("rail:<device>") of every pinned lcore:
//  - the device is on another NUMA node than the lcore's CPU;
//  - "rail:*" on a CPU while some devices sit on other NUMA nodes;
//  - the poller names no device of `rails`, or the CPU is not in the topology.
// Unpinned lcores (cpu -1) and background pollers are not checked.
std::vector<PlacementWarning> checkRailLcorePlacement(const std::vector<config::LcoreSpec>& lcores,
                                                      const RailMap& rails,
                                                      const Topology& topology);

// "0-3,8,10-11": a CPU list as the kernel and taskset write it. Input need not be sorted.
std::string formatCpuList(std::vector<int> cpus);

}  // namespace tent::topology
