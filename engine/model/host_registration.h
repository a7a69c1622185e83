// Registering host memory at scale: a buffer longer than a device's largest memory
// region (ibv_device_attr.max_mr_size) is cut into chunks, each its own buffer with
// its own keys, and every device registers its chunks at the same time as the
// others (TBB), since pinning and mapping hundreds of GiB is the NIC driver's work
// per device and takes minutes when done device after device. Control path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "fabric/fabric.h"
#include "tent/status.h"

namespace tent::rdma {

class RdmaContext;

struct HostChunk {
  uint64_t addr = 0;
  uint64_t length = 0;
};

// [addr, addr + length) cut at multiples of the smallest max_mr_bytes of `contexts`.
std::vector<HostChunk> hostChunks(uint64_t addr, uint64_t length,
                                  std::span<RdmaContext* const> contexts);

// mrs[chunk][device]: every chunk registered on every device, the devices in
// parallel. On any failure every region registered so far is released (each is a
// unique_ptr) and the first failure in device order is returned.
using ChunkRegions = std::vector<std::vector<std::unique_ptr<fabric::MemoryRegion>>>;
Result<ChunkRegions> registerHostChunks(std::span<const HostChunk> chunks,
                                        std::span<RdmaContext* const> contexts, uint32_t access);

// Registrations this long or longer log their progress (per device, and the total).
inline constexpr uint64_t kRegistrationProgressBytes = uint64_t{4} << 30;

}  // namespace tent::rdma
