#include "lcore/eal_memory.h"

#include <dirent.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "base/bounded_file.h"

namespace tent::lcore {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// "MemAvailable:   23456789 kB" -> bytes; 0 when the field is missing.
uint64_t kbField(const std::string& text, const char* name) {
  const size_t at = text.find(name);
  if (at == std::string::npos) return 0;
  unsigned long long kb = 0;
  if (std::sscanf(text.c_str() + at + std::strlen(name), " %llu", &kb) != 1) return 0;
  return static_cast<uint64_t>(kb) * 1024;
}

std::string fileText(const std::string& path) {
  auto f = readBoundedFile(path, path, BoundedFileOptions{1 << 20, false});
  return f.ok() ? f->bytes : std::string();
}

// Free hugepages of every size: /sys/kernel/mm/hugepages/hugepages-<size>kB/.
uint64_t freeHugepageBytes() {
  const std::string root = "/sys/kernel/mm/hugepages";
  DIR* dir = ::opendir(root.c_str());
  if (dir == nullptr) return 0;
  uint64_t total = 0;
  while (dirent* e = ::readdir(dir)) {
    unsigned long long size_kb = 0;
    if (std::sscanf(e->d_name, "hugepages-%llukB", &size_kb) != 1) continue;
    const std::string free_text = fileText(root + "/" + e->d_name + "/free_hugepages");
    total += std::strtoull(free_text.c_str(), nullptr, 10) * size_kb * 1024;
  }
  ::closedir(dir);
  return total;
}

std::string mib(uint64_t bytes) {
  return std::to_string(bytes / kMiB) + " MiB";
}

}  // namespace

MachineMemory readMachineMemory() {
  MachineMemory m;
  m.available_bytes = kbField(fileText("/proc/meminfo"), "MemAvailable:");
  m.address_space_used = kbField(fileText("/proc/self/status"), "VmSize:");
  rlimit as{};
  m.address_space_limit = ::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY
                              ? static_cast<uint64_t>(as.rlim_cur)
                              : UINT64_MAX;
  m.hugepages_free_bytes = freeHugepageBytes();
  return m;
}

Status checkEalMemory(const config::Config& config, const MachineMemory& machine) {
  const uint64_t want = uint64_t{config.eal.memory_mb} * kMiB;
  const std::string key =
      config.source + ": eal.memory_mb: " + std::to_string(config.eal.memory_mb) + " MiB";
  if (!config.eal.no_huge) {
    if (want > machine.hugepages_free_bytes)
      return Status::ResourceExhausted(key + " of hugepages, but " +
                                       mib(machine.hugepages_free_bytes) +
                                       " are free (reserve more, lower it, or set eal.no_huge)");
    return Status::OK();
  }
  if (machine.available_bytes != 0 && want > machine.available_bytes)
    return Status::ResourceExhausted(key + " is more than this machine has available (" +
                                     mib(machine.available_bytes) + " MemAvailable)");
  if (machine.address_space_limit != UINT64_MAX &&
      want > machine.address_space_limit -
                 std::min(machine.address_space_used, machine.address_space_limit))
    return Status::ResourceExhausted(
        key + " does not fit under this process's address-space limit (RLIMIT_AS " +
        mib(machine.address_space_limit) + ", " + mib(machine.address_space_used) + " in use)");
  return Status::OK();
}

}  // namespace tent::lcore
