// The CPUs a process may use: its affinity mask and its cgroup's cpuset, as the
// launcher of a GPU rank sets them (taskset, numactl, a container's cpuset).
// Control path; CPU lists as the kernel writes them ("0-3,8,10-11").
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tent/status.h"

namespace tent::topology {

// "0-3,8,10-11" -> {0,1,2,3,8,10,11} (sorted, unique); "" -> {}. Accepts the
// kernel's format only (ranges a-b with a <= b, commas, optional trailing newline).
Result<std::vector<int>> parseCpuList(std::string_view text);

// The calling thread's affinity mask (sched_getaffinity).
std::vector<int> affinityCpus();

// The effective cpuset of the process's cgroup: cgroup v2
// (<root>/<path>/cpuset.cpus.effective) or v1 (<root>/cpuset/<path>/cpuset.effective_cpus),
// the path taken from `proc_cgroup` (the text of /proc/self/cgroup). Empty when
// there is none or it cannot be read (then it restricts nothing).
std::vector<int> cgroupCpus(std::string_view proc_cgroup,
                            const std::string& cgroup_root = "/sys/fs/cgroup");

struct AllowedCpus {
  std::vector<int> cpus;      // what the process may use: affinity, within the cpuset
  std::vector<int> affinity;  // for messages
  std::vector<int> cpuset;    // empty: no cpuset restriction found
};
// Affinity intersected with the cgroup cpuset of this process.
AllowedCpus processAllowedCpus();

}  // namespace tent::topology
