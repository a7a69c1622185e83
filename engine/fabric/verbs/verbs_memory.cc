// Transfer memory for the verbs provider: anonymous mappings aligned for
// transparent huge pages (2 MiB) and bound to a preferred NUMA node with mbind.
// MPOL_PREFERRED, not MPOL_BIND: a full node spills instead of failing.
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "fabric/verbs/verbs_objects.h"
#include "tent/log.h"

namespace tent::fabric::verbs {

namespace {

constexpr size_t kHugePage = size_t{2} << 20;
constexpr int kMpolPreferred =
    1;  // <linux/mempolicy.h>; libnuma's numaif.h is not needed for one constant

size_t alignmentFor(size_t length) {
  return length >= kHugePage ? kHugePage : static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

size_t mappedLength(size_t length) {
  size_t align = alignmentFor(length);
  return (length + align - 1) / align * align;
}

// Maps `length` bytes aligned to `align` by over-mapping and trimming both ends.
void* mapAligned(size_t length, size_t align) {
  size_t span = length + align;
  void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  auto begin = reinterpret_cast<uintptr_t>(raw);
  uintptr_t aligned = (begin + align - 1) / align * align;
  if (aligned > begin) munmap(raw, aligned - begin);
  uintptr_t end = begin + span;
  if (end > aligned + length)
    munmap(reinterpret_cast<void*>(aligned + length), end - aligned - length);
  return reinterpret_cast<void*>(aligned);
}

void preferNode(void* addr, size_t length, int numa_node) {
  constexpr int kMaskBits = 64;
  if (numa_node < 0 || numa_node >= kMaskBits) return;
  unsigned long mask = 1ul << numa_node;
  if (syscall(SYS_mbind, addr, length, kMpolPreferred, &mask, kMaskBits + 1, 0) != 0) {
    TENT_DEBUG(kFabric, "verbs: mbind to NUMA node %d failed: %s", numa_node, std::strerror(errno));
  }
}

}  // namespace

Result<void*> allocateNumaMemory(size_t length, int numa_node) {
  if (length == 0) return Status::InvalidArgument("verbs: allocateMemory of 0 bytes");
  size_t mapped = mappedLength(length);
  void* addr = mapAligned(mapped, alignmentFor(length));
  if (addr == nullptr) {
    return Status::ResourceExhausted("verbs: cannot map " + std::to_string(mapped) +
                                     " bytes: " + std::strerror(errno));
  }
  if (mapped >= kHugePage) (void)madvise(addr, mapped, MADV_HUGEPAGE);
  preferNode(addr, mapped, numa_node);
  return addr;
}

Status freeNumaMemory(void* addr, size_t length) {
  if (munmap(addr, mappedLength(length)) != 0) {
    return Status::InvalidArgument(std::string("verbs: freeMemory: munmap failed: ") +
                                   std::strerror(errno));
  }
  return Status::OK();
}

}  // namespace tent::fabric::verbs
