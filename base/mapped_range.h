// Whether a range of this process's address space is mapped with the access a
// registration asks for. A NIC pins the pages at registration and fails with EFAULT
// when one is not mapped, or not writable when write access is asked for; the soft
// provider (and the fake verbs device) refuse the same ranges, instead of faulting
// later on the first transfer that touches them. Control path: reads /proc/self/maps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "tent/status.h"

namespace tent {

// OK when every byte of [addr, addr + length) lies in a readable mapping, writable too
// when `writable`. Otherwise InvalidArgument naming the range and the first address
// that is not mapped (or lacks the access).
Status checkMappedRange(uintptr_t addr, size_t length, bool writable);

// The same check against a maps text (the format of /proc/<pid>/maps); for tests.
Status checkMappedRangeIn(const std::string& maps, uintptr_t addr, size_t length, bool writable);

}  // namespace tent
