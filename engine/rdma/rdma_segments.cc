// Control path: local memory registration, the local descriptor, and peer
// segments (open, close, cached descriptors and their refresh).
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>

#include "engine/rdma/rdma_transport.h"
#include "tent/log.h"

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

}  // namespace

Status RdmaTransport::registerBuffer(void* addr, size_t length, const Location& location,
                                     bool engine_allocated, MemoryAccess access) {
  if (!addr || length == 0) return Status::InvalidArgument("register: null address or zero length");
  if (access != MemoryAccess::kRemoteRead && access != MemoryAccess::kRemoteWrite &&
      access != MemoryAccess::kRemoteReadWrite)
    return Status::InvalidArgument("register: unknown memory access mode");
  auto b = std::make_shared<LocalBuffer>();
  b->addr = reinterpret_cast<uint64_t>(addr);
  b->length = length;
  b->engine_allocated = engine_allocated;
  for (auto& ctx : contexts_) {
    auto mr = ctx->device().registerMemory(addr, length, fabricAccess(access));
    if (!mr.ok()) return mr.status().withContext("register memory on " + ctx->name());
    b->lkeys.push_back((*mr)->lkey());
    b->rkeys.push_back((*mr)->rkey());
    b->mrs.push_back(std::move(mr).value());
  }
  b->layout.addr = b->addr;
  b->layout.length = length;
  if (location == "*" || location.empty()) {
    probeRegions(rails_, b.get());
  } else {
    b->layout.regions.push_back({b->addr, length, rails_.locationId(location)});
    b->region_locations.push_back(location);
  }
  {
    std::lock_guard<std::mutex> lock(local_mu_);
    auto table = std::make_shared<LocalBufferTable>(*local_table_.load());
    for (const auto& other : table->buffers)
      if (b->addr < other->addr + other->length && other->addr < b->addr + length)
        return Status::AlreadyExists("register: range overlaps a registered buffer");
    auto pos = std::upper_bound(table->buffers.begin(), table->buffers.end(), b->addr,
                                [](uint64_t a, const auto& x) { return a < x->addr; });
    table->layouts.insert(table->layouts.begin() + (pos - table->buffers.begin()), b->layout);
    table->buffers.insert(pos, std::move(b));
    local_table_.store(std::move(table));
    local_version_.fetch_add(1);
  }
  publishLocalDescriptor();
  return Status::OK();
}

Status RdmaTransport::unregisterBuffer(void* addr, bool* engine_allocated, size_t* length) {
  {
    std::lock_guard<std::mutex> lock(local_mu_);
    auto table = std::make_shared<LocalBufferTable>(*local_table_.load());
    auto it = std::find_if(table->buffers.begin(), table->buffers.end(), [&](const auto& b) {
      return b->addr == reinterpret_cast<uint64_t>(addr);
    });
    if (it == table->buffers.end())
      return Status::NotFound("unregister: no buffer registered at this address");
    if (engine_allocated) *engine_allocated = (*it)->engine_allocated;
    if (length) *length = (*it)->length;
    table->layouts.erase(table->layouts.begin() + (it - table->buffers.begin()));
    table->buffers.erase(it);
    local_table_.store(std::move(table));
    local_version_.fetch_add(1);
  }
  publishLocalDescriptor();
  return Status::OK();
}

metadata::SegmentDescriptor RdmaTransport::buildLocalDescriptor() const {
  metadata::SegmentDescriptor d;
  d.name = segment_name_;
  d.instance = instance_;
  d.version = local_version_.load();
  for (const auto& ctx : contexts_)
    d.devices.push_back(
        {ctx->name(), ctx->device().portIdentity(), ctx->device().info().numa_node});
  auto table = local_table_.load();
  uint32_t ranked[kMaxDevices];
  for (const auto& b : table->buffers) {
    metadata::BufferDescriptor bd{b->addr, b->length, {}, b->rkeys};
    for (size_t i = 0; i < b->layout.regions.size(); ++i) {
      const auto& r = b->layout.regions[i];
      size_t n = rails_.preferred(r.location, ~0ull, ranked, kMaxDevices);
      metadata::RegionDescriptor rd{r.addr, r.length, b->region_locations[i], {}};
      for (size_t k = 0; k < n; ++k) rd.rank0.push_back(static_cast<uint16_t>(ranked[k]));
      bd.regions.push_back(std::move(rd));
    }
    d.buffers.push_back(std::move(bd));
  }
  return d;
}

void RdmaTransport::publishLocalDescriptor() {
  metadata::SegmentDescriptor d = buildLocalDescriptor();
  {
    std::lock_guard<std::mutex> lock(local_mu_);
    local_descriptor_bytes_ = metadata::encodeDescriptor(d);
  }
  installSegment(LOCAL_SEGMENT_ID, std::move(d));
}

void RdmaTransport::installSegment(SegmentId id, metadata::SegmentDescriptor d) {
  size_t peer_devices = d.devices.size();
  auto seg =
      makePeerSegment(id, id == LOCAL_SEGMENT_ID, std::move(d), device_names_, steadyNowNs());
  for (uint32_t c = 0; c < contexts_.size(); ++c)
    for (uint32_t p = 0; p < peer_devices; ++p) endpoints_.ensureSlot(c, id, p);
  SegmentMap::accessor a;
  segments_.insert(a, id);
  a->second = std::move(seg);
}

std::shared_ptr<const PeerSegment> RdmaTransport::segment(SegmentId id) const {
  SegmentMap::const_accessor a;
  if (!segments_.find(a, id)) return nullptr;
  return a->second;
}

Result<metadata::SegmentDescriptor> RdmaTransport::fetchDescriptor(const std::string& name) const {
  metadata::ControlFrame req{metadata::ControlType::kGetDescriptor, {}};
  auto reply = metadata::controlRequest(name, req, config_->bootstrap.connect_timeout_ms,
                                        config_->bootstrap.io_timeout_ms);
  if (!reply.ok()) return reply.status();
  if (reply->type != metadata::ControlType::kDescriptor)
    return Status::InvalidArgument("peer " + name + " answered with an unexpected frame");
  return metadata::parseDescriptor(reply->payload);
}

Result<SegmentId> RdmaTransport::openSegment(const std::string& name) {
  if (name == segment_name_) return LOCAL_SEGMENT_ID;
  std::string host;
  uint16_t port = 0;
  TENT_RETURN_IF_ERROR(metadata::splitHostPort(name, &host, &port));
  std::lock_guard<std::mutex> lock(segments_mu_);
  auto known = segment_ids_.find(name);
  if (known != segment_ids_.end()) return known->second;
  auto d = fetchDescriptor(name);
  if (!d.ok()) return d.status().withContext("open segment " + name);
  d->name = name;  // the name we reach it by
  SegmentId id = next_segment_.fetch_add(1);
  installSegment(id, std::move(d).value());
  segment_ids_[name] = id;
  return id;
}

Status RdmaTransport::closeSegment(SegmentId id) {
  if (id == LOCAL_SEGMENT_ID) return Status::OK();
  std::lock_guard<std::mutex> lock(segments_mu_);
  auto seg = segment(id);
  if (!seg) return Status::NotFound("segment " + std::to_string(id) + " is not open");
  segment_ids_.erase(seg->name);
  segments_.erase(id);
  resetSegmentEndpoints(id, nullptr);
  return Status::OK();
}

void RdmaTransport::resetSegmentEndpoints(SegmentId id, const RdmaEndPoint* except) {
  for (EndpointSlot* slot : endpoints_.slotsOf(id)) {
    RdmaEndPoint* ep = slot->current.load();
    if (ep && ep != except) endpoints_.requestReset(ep);
  }
}

Status RdmaTransport::refreshSegment(SegmentId id, bool force, const RdmaEndPoint* keep) {
  if (id == LOCAL_SEGMENT_ID) return Status::OK();  // always current
  std::lock_guard<std::mutex> lock(segments_mu_);
  auto seg = segment(id);
  if (!seg) return Status::NotFound("segment " + std::to_string(id) + " is not open");
  uint64_t now = steadyNowNs();
  if (!force) {
    decltype(last_miss_refresh_ns_)::accessor a;
    last_miss_refresh_ns_.insert(a, id);
    uint64_t gap = uint64_t{config_->bootstrap.descriptor_refresh_ms} * 1000000;
    if (a->second != 0 && now - a->second < gap)
      return Status::Unavailable("descriptor refresh rate-limited");
    a->second = now;
  }
  auto d = fetchDescriptor(seg->name);
  if (!d.ok()) return d.status().withContext("refresh segment " + seg->name);
  d->name = seg->name;
  bool restarted = d->instance != seg->descriptor.instance;
  installSegment(id, std::move(d).value());
  if (restarted) {
    TENT_INFO(kEngine, "segment %s restarted: reconnecting its endpoints", seg->name.c_str());
    resetSegmentEndpoints(id, keep);
  }
  return Status::OK();
}

Result<std::vector<SegmentBufferInfo>> RdmaTransport::segmentBuffers(SegmentId id) {
  auto seg = segment(id);
  if (!seg) return Status::NotFound("segment " + std::to_string(id) + " is not open");
  if (seg->descriptor.buffers.empty() && id != LOCAL_SEGMENT_ID) {
    // The peer may have registered memory after we opened it: refetch once.
    if (refreshSegment(id, /*force=*/true).ok()) seg = segment(id);
    if (!seg) return Status::NotFound("segment " + std::to_string(id) + " is not open");
  }
  std::vector<SegmentBufferInfo> out;
  for (const auto& b : seg->descriptor.buffers)
    out.push_back({b.addr, b.length, b.regions.empty() ? "*" : b.regions.front().location});
  return out;
}

}  // namespace tent::rdma
