// What a process holds that an engine's peers can leak: open descriptors and data
// mappings. Tests take a baseline, churn peers, and expect the same counts back.
#pragma once

#include <dirent.h>

#include <cstddef>
#include <fstream>
#include <string>

namespace tent::testing {

inline size_t countEntries(const char* dir) {
  size_t n = 0;
  if (DIR* d = opendir(dir)) {
    while (readdir(d)) ++n;
    closedir(d);
  }
  return n;
}

// Mappings of files and memfds other than shared objects: the soft fabric's control
// and memory files of peers and their segments. Anonymous mappings are left out:
// the allocator maps and unmaps those on its own schedule (a new thread's malloc
// arena, AddressSanitizer's size classes), which says nothing about a leak.
inline size_t countDataMappings() {
  std::ifstream maps("/proc/self/maps");
  size_t n = 0;
  for (std::string line; std::getline(maps, line);) {
    const size_t path = line.find('/');
    if (path == std::string::npos) continue;  // anonymous, [heap], [stack], [vdso]
    if (line.find(".so", path) != std::string::npos) continue;
    ++n;
  }
  return n;
}

}  // namespace tent::testing
