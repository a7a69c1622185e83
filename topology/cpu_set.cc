// CPU lists, the affinity mask and the cgroup cpuset (control path).
#include "topology/cpu_set.h"

#include <sched.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <iterator>
#include <sstream>

namespace tent::topology {
namespace {

constexpr int kMaxCpu = 1 << 16;  // far beyond any machine; catches garbage

bool parseNumber(std::string_view text, int* out) {
  if (text.empty()) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size() && *out >= 0 && *out < kMaxCpu;
}

std::string readFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (in) std::getline(in, line);
  return line;
}

// The cgroup path of the cpuset controller: "0::/a/b" (v2) or "3:cpuset:/a/b" (v1).
std::string cgroupPath(std::string_view proc_cgroup, bool* v1) {
  std::istringstream in{std::string(proc_cgroup)};
  std::string v2_path;
  for (std::string line; std::getline(in, line);) {
    const size_t a = line.find(':');
    const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    const std::string path = line.substr(b + 1);
    std::istringstream list(controllers);
    for (std::string c; std::getline(list, c, ',');) {
      if (c == "cpuset") return (*v1 = true), path;
    }
    if (line.compare(0, a, "0") == 0 && controllers.empty()) v2_path = path;
  }
  *v1 = false;
  return v2_path;
}

}  // namespace

Result<std::vector<int>> parseCpuList(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  std::vector<int> cpus;
  if (text.empty()) return cpus;
  auto bad = [&](std::string_view why) {
    return Status::InvalidArgument("CPU list '" + std::string(text) + "': " + std::string(why) +
                                   " (expected e.g. 0-3,8,10-11)");
  };
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string_view item = text.substr(start, comma - start);
    const size_t dash = item.find('-');
    int lo = 0;
    int hi = 0;
    if (!parseNumber(item.substr(0, dash), &lo)) return bad("'" + std::string(item) + "'");
    hi = lo;
    if (dash != std::string_view::npos && !parseNumber(item.substr(dash + 1), &hi))
      return bad("'" + std::string(item) + "'");
    if (hi < lo) return bad("range '" + std::string(item) + "' runs backwards");
    for (int c = lo; c <= hi; ++c) cpus.push_back(c);
    start = comma + 1;
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::vector<int> affinityCpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
    }
  }
  return cpus;
}

std::vector<int> cgroupCpus(std::string_view proc_cgroup, const std::string& cgroup_root) {
  bool v1 = false;
  const std::string path = cgroupPath(proc_cgroup, &v1);
  if (path.empty()) return {};
  const std::string file = v1 ? cgroup_root + "/cpuset" + path + "/cpuset.effective_cpus"
                              : cgroup_root + path + "/cpuset.cpus.effective";
  auto cpus = parseCpuList(readFirstLine(file));
  return cpus.ok() ? *cpus : std::vector<int>{};
}

AllowedCpus processAllowedCpus() {
  AllowedCpus out;
  out.affinity = affinityCpus();
  std::ifstream in("/proc/self/cgroup");
  std::stringstream text;
  text << in.rdbuf();
  out.cpuset = cgroupCpus(text.str());
  out.cpus = out.affinity;
  if (!out.cpuset.empty()) {
    std::vector<int> both;
    std::set_intersection(out.affinity.begin(), out.affinity.end(), out.cpuset.begin(),
                          out.cpuset.end(), std::back_inserter(both));
    out.cpus = std::move(both);
  }
  return out;
}

}  // namespace tent::topology
