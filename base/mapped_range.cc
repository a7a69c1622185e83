#include "base/mapped_range.h"

#include <cinttypes>
#include <cstdio>

#include "base/bounded_file.h"

namespace tent {
namespace {

// A process with 100,000 mappings has a maps file of about 10 MiB.
constexpr uint64_t kMaxMapsBytes = 256 << 20;

std::string hex(uintptr_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%" PRIxPTR, v);
  return b;
}

struct Mapping {
  uintptr_t start = 0, end = 0;
  bool readable = false, writable = false;
};

// One line: "start-end perms offset dev inode [path]".
bool parseLine(const char* line, Mapping* m) {
  char perms[5] = {};
  unsigned long long start = 0, end = 0;
  if (std::sscanf(line, "%llx-%llx %4s", &start, &end, perms) != 3) return false;
  m->start = static_cast<uintptr_t>(start);
  m->end = static_cast<uintptr_t>(end);
  m->readable = perms[0] == 'r';
  m->writable = perms[1] == 'w';
  return true;
}

}  // namespace

Status checkMappedRangeIn(const std::string& maps, uintptr_t addr, size_t length, bool writable) {
  const std::string range = "[" + hex(addr) + ", " + hex(addr + length) + ")";
  if (length == 0 || addr + length < addr)
    return Status::InvalidArgument("memory range " + range + " is empty or wraps around");
  const uintptr_t last = addr + length;
  uintptr_t cursor = addr;  // every byte below it is mapped as asked
  size_t pos = 0;
  while (cursor < last && pos < maps.size()) {
    const size_t eol = maps.find('\n', pos);
    const std::string line =
        maps.substr(pos, eol == std::string::npos ? std::string::npos : eol - pos);
    pos = eol == std::string::npos ? maps.size() : eol + 1;
    Mapping m;
    if (!parseLine(line.c_str(), &m) || m.end <= cursor) continue;
    if (m.start > cursor) break;  // a hole at cursor (the lines are in address order)
    if (!m.readable || (writable && !m.writable)) {
      return Status::InvalidArgument("memory range " + range + ": " + hex(cursor) +
                                     " is mapped without " + (m.readable ? "write" : "read") +
                                     " access (registration asks for read" +
                                     (writable ? " and write)" : ")"));
    }
    cursor = m.end;
  }
  if (cursor < last)
    return Status::InvalidArgument("memory range " + range + ": " + hex(cursor) +
                                   " is not mapped in this process");
  return Status::OK();
}

Status checkMappedRange(uintptr_t addr, size_t length, bool writable) {
  BoundedFileOptions options;
  options.max_bytes = kMaxMapsBytes;
  auto maps = readBoundedFile("/proc/self/maps", "the process's memory map", options);
  if (!maps.ok()) return maps.status();
  return checkMappedRangeIn(maps->bytes, addr, length, writable);
}

}  // namespace tent
