#include "model/local_memory.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>

#include "base/ebr.h"
#include "base/hex.h"
#include "cuda/cuda_driver.h"
#include "model/host_registration.h"
#include "model/rdma_context.h"
#include "model/slicing.h"
#include "tent/log.h"
#include "wire/bootstrap.h"

namespace tent::rdma {

namespace {

// Local READs land in the buffer, so it is always locally writable.
uint32_t fabricAccess(MemoryAccess access) {
  uint32_t flags = fabric::kAccessLocalWrite;
  if (static_cast<uint8_t>(access) & static_cast<uint8_t>(MemoryAccess::kRemoteRead))
    flags |= fabric::kAccessRemoteRead;
  if (static_cast<uint8_t>(access) & static_cast<uint8_t>(MemoryAccess::kRemoteWrite))
    flags |= fabric::kAccessRemoteWrite;
  return flags;
}

// NUMA node of the page at `addr` (-1 unknown), via move_pages(2) in query mode.
int numaOfPage(void* addr) {
  void* pages[1] = {addr};
  int status[1] = {-1};
  long r = ::syscall(SYS_move_pages, 0, 1UL, pages, nullptr, status, 0);
  return (r == 0 && status[0] >= 0) ? status[0] : -1;
}

// Splits a buffer into regions by the NUMA node of sampled pages (at most 64 samples).
void probeRegions(const topology::RailMap& rails, LocalBuffer* b) {
  const uint64_t chunks = std::min<uint64_t>(64, (b->length + (2u << 20) - 1) / (2u << 20));
  const uint64_t step = (b->length + chunks - 1) / chunks;
  for (uint64_t off = 0; off < b->length; off += step) {
    int numa = numaOfPage(reinterpret_cast<void*>(b->addr + off));
    std::string name = numa >= 0 ? "cpu:" + std::to_string(numa) : "*";
    uint64_t len = std::min(step, b->length - off);
    if (!b->region_locations.empty() && b->region_locations.back() == name) {
      b->layout.regions.back().length += len;
      continue;
    }
    b->layout.regions.push_back({b->addr + off, len, rails.locationId(name)});
    b->region_locations.push_back(name);
  }
}

uint8_t descriptorAccess(MemoryAccess access) {
  uint8_t bits = 0;
  if (static_cast<uint8_t>(access) & static_cast<uint8_t>(MemoryAccess::kRemoteRead))
    bits |= metadata::kBufferRemoteRead;
  if (static_cast<uint8_t>(access) & static_cast<uint8_t>(MemoryAccess::kRemoteWrite))
    bits |= metadata::kBufferRemoteWrite;
  return bits;
}

bool validAccess(MemoryAccess a) {
  return a == MemoryAccess::kRemoteRead || a == MemoryAccess::kRemoteWrite ||
         a == MemoryAccess::kRemoteReadWrite;
}

}  // namespace

LocalMemory::LocalMemory(std::vector<RdmaContext*> contexts, const topology::RailMap& rails)
    : contexts_(std::move(contexts)), rails_(rails) {
  std::lock_guard<std::mutex> lock(mu_);
  publishLocked(std::make_shared<LocalBufferTable>());
}

LocalMemory::~LocalMemory() {
  // The engine is closing: no datapath reader is left.
  delete view_.load(std::memory_order_acquire);
  for (auto& r : retired_) delete r.first;
}

std::shared_ptr<const LocalBufferTable> LocalMemory::table() const {
  std::lock_guard<std::mutex> lock(mu_);  // view_ changes only under it
  return view_.load(std::memory_order_relaxed)->table;
}

size_t LocalMemory::retiredViews() const {
  std::lock_guard<std::mutex> lock(mu_);
  return retired_.size();
}

void LocalMemory::publishLocked(std::shared_ptr<const LocalBufferTable> table) {
  const LocalTableView* old =
      view_.exchange(new LocalTableView{std::move(table)}, std::memory_order_acq_rel);
  if (old) retired_.emplace_back(old, ebr::retire());
  reapLocked();
}

void LocalMemory::reapLocked() {
  std::erase_if(retired_, [](const auto& r) {
    if (!ebr::quiescentSince(r.second)) return false;
    delete r.first;
    return true;
  });
}

void LocalMemory::setIdentity(std::string segment_name, uint64_t instance) {
  segment_name_ = std::move(segment_name);
  instance_ = instance;
}

// One buffer per chunk (host_registration.h): the descriptor carries one rkey per
// device and buffer, so a chunk's keys travel as a buffer of their own, all of one
// group (unregistered together); a request must lie inside one chunk.
Status LocalMemory::makeHostBuffers(void* addr, size_t length, const Location& location,
                                    bool engine_allocated, uint32_t access,
                                    std::vector<std::shared_ptr<LocalBuffer>>* out) const {
  const std::vector<HostChunk> chunks =
      hostChunks(reinterpret_cast<uint64_t>(addr), length, contexts_);
  TENT_ASSIGN_OR_RETURN(ChunkRegions mrs, registerHostChunks(chunks, contexts_, access));
  for (size_t c = 0; c < chunks.size(); ++c) {
    auto b = std::make_shared<LocalBuffer>();
    b->addr = chunks[c].addr;
    b->length = chunks[c].length;
    b->group = reinterpret_cast<uint64_t>(addr);
    b->engine_allocated = engine_allocated;
    for (auto& mr : mrs[c]) {
      b->lkeys.push_back(mr->lkey());
      b->rkeys.push_back(mr->rkey());
      b->mrs.push_back(std::move(mr));
    }
    b->layout.addr = b->addr;
    b->layout.length = b->length;
    if (location == "*" || location.empty()) {
      probeRegions(rails_, b.get());
    } else {
      b->layout.regions.push_back({b->addr, b->length, rails_.locationId(location)});
      b->region_locations.push_back(location);
    }
    out->push_back(std::move(b));
  }
  if (chunks.size() > 1)
    TENT_INFO(kEngine,
              "host memory at %s registered as %zu buffers of at most %llu bytes (the devices' "
              "max_mr_size); a request must lie inside one of them",
              hexAddr(reinterpret_cast<uint64_t>(addr)).c_str(), chunks.size(),
              static_cast<unsigned long long>(chunks.front().length));
  return Status::OK();
}

Status LocalMemory::registerBuffer(void* addr, size_t length, const Location& location,
                                   bool engine_allocated, MemoryAccess access,
                                   const std::string& name) {
  if (!addr || length == 0) return Status::InvalidArgument("register: null address or zero length");
  if (!validAccess(access)) return Status::InvalidArgument("register: unknown memory access mode");
  if (name.size() > metadata::kMaxBufferNameBytes)
    return Status::InvalidArgument("register: name is " + std::to_string(name.size()) +
                                   " bytes, at most " +
                                   std::to_string(metadata::kMaxBufferNameBytes) + " allowed");
  auto want_gpu = cuda::parseCudaLocation(location);
  if (!want_gpu.ok()) return want_gpu.status().withContext("register");
  // What the memory is, from the CUDA driver when this process has CUDA loaded.
  auto pieces = cuda::chunksOf(addr, length);
  if (!pieces.ok()) return pieces.status().withContext("register");
  const cuda::PointerInfo& first = pieces->front().info;
  if (first.kind == cuda::MemoryKind::kManaged)
    return Status::InvalidArgument(
        "register: CUDA managed memory is not supported (it migrates between host and GPU, "
        "and no NIC can pin it); register device or host memory");
  std::vector<std::shared_ptr<LocalBuffer>> buffers;
  if (first.kind == cuda::MemoryKind::kHost) {
    if (*want_gpu >= 0)
      return Status::InvalidArgument("register: location " + location +
                                     " names a GPU, but the memory is host memory" +
                                     (cuda::driverIfLoaded() ? "" : " (CUDA is not loaded here)"));
    TENT_RETURN_IF_ERROR(
        makeHostBuffers(addr, length, location, engine_allocated, fabricAccess(access), &buffers));
  } else {
    for (const cuda::Chunk& piece : *pieces)
      if (*want_gpu >= 0 && piece.info.device != *want_gpu)
        return Status::InvalidArgument(
            "register: location " + location +
            " given, but the memory is on cuda:" + std::to_string(piece.info.device));
    TENT_RETURN_IF_ERROR(makeGpuBuffers(*pieces, reinterpret_cast<uint64_t>(addr), engine_allocated,
                                        fabricAccess(access), &buffers));
  }
  return publishBuffers(std::move(buffers), name, access);
}

Status LocalMemory::publishBuffers(std::vector<std::shared_ptr<LocalBuffer>> buffers,
                                   const std::string& name, MemoryAccess access) {
  const uint8_t remote_access = descriptorAccess(access);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto table = std::make_shared<LocalBufferTable>(*view_.load(std::memory_order_relaxed)->table);
    uint64_t seq = registered_;
    for (auto& b : buffers) {
      for (const auto& other : table->buffers)
        if (b->addr < other->addr + other->length && other->addr < b->addr + b->length)
          return Status::AlreadyExists("register: range overlaps a registered buffer");
      b->name = name;
      b->remote_access = remote_access;
      b->seq = ++seq;
      auto pos = std::upper_bound(table->buffers.begin(), table->buffers.end(), b->addr,
                                  [](uint64_t a, const auto& x) { return a < x->addr; });
      table->layouts.insert(table->layouts.begin() + (pos - table->buffers.begin()), b->layout);
      table->buffers.insert(pos, std::move(b));
    }
    table->version = ++version_;
    registered_ = seq;  // only once the whole registration is in
    publishLocked(std::move(table));
  }
  if (on_change_) on_change_();
  return Status::OK();
}

metadata::SegmentDescriptor LocalMemory::buildDescriptor(const LocalBufferTable& table) const {
  metadata::SegmentDescriptor d;
  d.name = segment_name_;
  d.instance = instance_;
  d.version = table.version;
  d.max_bootstrap_version = metadata::kBootstrapVersion;
  for (RdmaContext* ctx : contexts_)
    d.devices.push_back(
        {ctx->name(), ctx->device().portIdentity(), ctx->device().info().numa_node});
  uint32_t ranked[kMaxDevices];
  for (const auto& b : table.buffers) {
    metadata::BufferDescriptor bd;
    bd.addr = b->addr;
    bd.length = b->length;
    bd.rkeys = b->rkeys;
    bd.name = b->name;
    bd.access = b->remote_access;
    bd.seq = b->seq;
    for (size_t i = 0; i < b->layout.regions.size(); ++i) {
      const auto& r = b->layout.regions[i];
      size_t n = rails_.preferred(r.location, b->device_mask, ranked, kMaxDevices);
      metadata::RegionDescriptor rd{r.addr, r.length, b->region_locations[i], {}};
      for (size_t k = 0; k < n; ++k) rd.rank0.push_back(static_cast<uint16_t>(ranked[k]));
      bd.regions.push_back(std::move(rd));
    }
    d.buffers.push_back(std::move(bd));
  }
  return d;
}

metadata::SegmentDescriptor LocalMemory::descriptor() const {
  return buildDescriptor(*table());
}

std::vector<uint8_t> LocalMemory::encodedDescriptor(uint16_t version) const {
  return metadata::encodeDescriptor(descriptor(),
                                    std::min<uint16_t>(version, metadata::kDescriptorVersion));
}

}  // namespace tent::rdma
