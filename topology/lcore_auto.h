// `lcores: auto`: an lcore layout derived from the topology, the fabric's devices and
// the CPUs the process may use (affinity mask within the cgroup cpuset), as the
// launcher of each GPU rank sets them. Control path; docs/lcore.md has the rules.
//
//  - Every lcore is pinned to a CPU of the allowed set, one lcore per CPU, and
//    `reserve_cpus` allowed CPUs stay free for the application's threads.
//  - Rail pollers (lcore_auto.rails): dedicated - one lcore per device; numa - one
//    lcore per NUMA node with devices; shared - on the background lcores; auto - the
//    first of those three that fits.
//  - Exactly `background_lcores` background lcores, spread over the devices' NUMA
//    nodes (most devices first).
//  - An lcore sits on a CPU of its devices' NUMA node when one is free, else on the
//    node with the most free CPUs (so a mask on one node keeps everything there).
//    Within a node, one hardware thread per core before any core's second thread,
//    cores from the highest-numbered down (CPU 0 last).
//  - Too few CPUs: an error that says how many are needed and which are allowed.
#pragma once

#include <string>
#include <vector>

#include "config/config.h"
#include "tent/status.h"
#include "topology/cpu_set.h"
#include "topology/rail_map.h"
#include "topology/topology.h"

namespace tent::topology {

struct AutoLcore {
  config::LcoreSpec spec;  // pinned: spec.cpu >= 0
  int numa_node = -1;      // of spec.cpu
  std::string role;        // "rail mlx5_0", "rail NUMA 1", "background"
};

struct AutoLayout {
  std::vector<AutoLcore> lcores;
  config::AutoRails rails = config::AutoRails::kDedicated;  // what auto chose
  std::vector<int> allowed;                                 // the CPUs considered
  std::vector<int> free_cpus;                               // allowed CPUs left without an lcore
  std::vector<std::string> notes;  // placements away from a device's node, ignored CPUs

  std::vector<config::LcoreSpec> specs() const;
};

// The devices the fabric of `config` will open, placed on `topology` (the
// providers' own rules: listed soft devices, listed verbs devices, else the
// topology's RDMA devices, else one soft0 on NUMA node 0).
std::vector<RailDevice> fabricDevices(const config::Config& config, const Topology& topology);

// The layout for `devices` on `topology` within `allowed`. `allowed_text` describes
// the allowed set in error messages ("0-3 (affinity 0-7, cpuset 0-3)").
Result<AutoLayout> planAutoLcores(const Topology& topology, const std::vector<RailDevice>& devices,
                                  const std::vector<int>& allowed, const std::string& allowed_text,
                                  const config::LcoreAutoConfig& knobs);

// What the runtime uses for `lcores: auto`: the config's topology and fabric
// devices, and the calling thread's allowed CPUs (processAllowedCpus()). Errors
// start with "<config source>: lcores: auto: ".
Result<AutoLayout> autoLcoreLayout(const config::Config& config);

// One line for the log: "rails numa: lcore 0 cpu 2 (NUMA 0) rail:mlx5_0,rail:mlx5_1; ...".
std::string summary(const AutoLayout& layout);

// "0-3 (affinity 0-7, cpuset 0-3)", or "0-3" when nothing else restricts it.
std::string describeAllowed(const AllowedCpus& allowed);

}  // namespace tent::topology
