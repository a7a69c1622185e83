// Registering GPU memory (LocalMemory, local_memory.h): one buffer per physical
// allocation of the range, each registered on the devices that can reach its GPU.
// Control path.

#include "base/hex.h"
#include "model/local_memory.h"
#include "model/rdma_context.h"
#include "tent/log.h"

namespace tent::rdma {

LocalMemory::GpuPlace LocalMemory::placeGpu(int ordinal) const {
  // The rail map numbers GPUs by PCI address (topology order); CUDA numbers them its
  // own way (CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER). The PCI address joins the two.
  auto pci = cuda::pciBusId(ordinal);
  const std::string name = pci.ok() ? rails_.gpuLocationForPci(*pci) : std::string();
  if (!name.empty()) return {name, rails_.locationId(name)};
  TENT_DEBUG(kEngine, "cuda:%d (%s) is not in the topology: no rail preference for its memory",
             ordinal, pci.ok() ? pci->c_str() : "PCI address unknown");
  return {"cuda:" + std::to_string(ordinal), topology::kAnyLocation};
}

Result<std::shared_ptr<LocalBuffer>> LocalMemory::makeGpuBuffer(const cuda::Chunk& piece,
                                                                uint64_t group,
                                                                bool engine_allocated,
                                                                uint32_t access) const {
  auto b = std::make_shared<LocalBuffer>();
  b->addr = piece.addr;
  b->length = piece.length;
  b->group = group;
  b->engine_allocated = engine_allocated;
  b->gpu_device = piece.info.device;
  b->device_mask = 0;
  const GpuPlace place = placeGpu(piece.info.device);
  std::string skipped;
  for (RdmaContext* ctx : contexts_) {
    // A NIC on the other CPU socket would reach the GPU across the inter-socket link,
    // where GPUDirect RDMA peer-to-peer is unsupported or slower than staging.
    if (place.id != topology::kAnyLocation && rails_.acrossSockets(place.id, ctx->index())) {
      skipped += (skipped.empty() ? "" : "; ") + ctx->name() + " is on another CPU socket than " +
                 place.name;
      b->mrs.push_back(nullptr);
      b->lkeys.push_back(0);
      b->rkeys.push_back(0);
      continue;
    }
    auto mr = ctx->device().registerGpuMemory(reinterpret_cast<void*>(piece.addr), piece.length,
                                              access, piece.info);
    if (!mr.ok())
      return mr.status().withContext("register " + place.name + " memory [" + hexAddr(piece.addr) +
                                     ", +" + std::to_string(piece.length) + ") on " + ctx->name());
    b->lkeys.push_back((*mr)->lkey());
    b->rkeys.push_back((*mr)->rkey());
    b->mrs.push_back(std::move(mr).value());
    b->device_mask |= uint64_t{1} << ctx->index();
  }
  if (b->device_mask == 0)
    return Status::FailedPrecondition("register " + place.name +
                                      " memory: no device can reach it (" + skipped + ")");
  if (!skipped.empty())
    TENT_INFO(kEngine, "%s memory at %s: not registered where the NIC cannot reach it: %s",
              place.name.c_str(), hexAddr(piece.addr).c_str(), skipped.c_str());
  b->layout.addr = b->addr;
  b->layout.length = b->length;
  b->layout.regions.push_back({b->addr, b->length, place.id});
  b->region_locations.push_back(place.name);
  return b;
}

Status LocalMemory::makeGpuBuffers(const std::vector<cuda::Chunk>& pieces, uint64_t group,
                                   bool engine_allocated, uint32_t access,
                                   std::vector<std::shared_ptr<LocalBuffer>>* out) const {
  for (const cuda::Chunk& piece : pieces) {
    TENT_ASSIGN_OR_RETURN(auto b, makeGpuBuffer(piece, group, engine_allocated, access));
    out->push_back(std::move(b));
  }
  if (pieces.size() > 1)
    TENT_INFO(kEngine,
              "GPU memory at %s registered as %zu buffers, one per physical allocation; a "
              "request must lie inside one of them",
              hexAddr(group).c_str(), pieces.size());
  return Status::OK();
}

}  // namespace tent::rdma
