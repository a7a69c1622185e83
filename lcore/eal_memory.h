// eal.memory_mb against what the machine can give EAL, checked before rte_eal_init:
// DPDK does not fail cleanly when -m is more than it gets (a terabyte with --no-huge
// grew to 4 GiB of bookkeeping and crashed). Without hugepages EAL maps memory_mb of
// anonymous memory (and keeps about 12 KiB per MiB of page records): it must fit in
// MemAvailable and under RLIMIT_AS. With hugepages it must fit in the free ones.
#pragma once

#include <cstdint>

#include "config/config.h"
#include "tent/status.h"

namespace tent::lcore {

struct MachineMemory {
  uint64_t available_bytes = 0;       // /proc/meminfo MemAvailable
  uint64_t address_space_limit = 0;   // RLIMIT_AS soft limit; UINT64_MAX: none
  uint64_t address_space_used = 0;    // this process's VmSize now
  uint64_t hugepages_free_bytes = 0;  // free hugepages of every size
};

// What this machine and process have now (0 for what cannot be read).
MachineMemory readMachineMemory();

// OK when `config.eal` fits `machine`; else ResourceExhausted naming eal.memory_mb,
// what it asks and what there is.
Status checkEalMemory(const config::Config& config, const MachineMemory& machine);

}  // namespace tent::lcore
