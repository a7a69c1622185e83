#include "wire/segment_descriptor.h"

#include <algorithm>

#include "wire/wire.h"

namespace tent::metadata {

const BufferDescriptor* SegmentDescriptor::findBuffer(uint64_t addr,
                                                      uint64_t length) const noexcept {
  auto it = std::upper_bound(buffers.begin(), buffers.end(), addr,
                             [](uint64_t a, const BufferDescriptor& b) { return a < b.addr; });
  if (it == buffers.begin()) return nullptr;
  --it;
  if (addr - it->addr > it->length || length > it->length - (addr - it->addr)) return nullptr;
  return &*it;
}

int SegmentDescriptor::deviceIndex(std::string_view device_name) const noexcept {
  for (size_t i = 0; i < devices.size(); ++i)
    if (devices[i].name == device_name) return static_cast<int>(i);
  return -1;
}

namespace {

void encodeBuffer(WireWriter& w, const BufferDescriptor& b, uint16_t version) {
  w.u64(b.addr);
  w.u64(b.length);
  w.u16(static_cast<uint16_t>(b.regions.size()));
  for (const auto& r : b.regions) {
    w.u64(r.addr);
    w.u64(r.length);
    w.str(r.location);
    w.u16(static_cast<uint16_t>(r.rank0.size()));
    for (uint16_t d : r.rank0) w.u16(d);
  }
  w.u16(static_cast<uint16_t>(b.rkeys.size()));
  for (uint32_t k : b.rkeys) w.u32(k);
  if (version >= 3) {
    w.str(b.name);
    w.u8(b.access);
    w.u64(b.seq);
  }
}

Status malformed(const char* what) {
  return Status::InvalidArgument(std::string("malformed segment descriptor: ") + what);
}

Status parseDevice(WireReader& r, DeviceDescriptor* d) {
  uint32_t numa = 0;
  if (!r.str(&d->name, 255) || !r.raw(d->port.gid.data(), d->port.gid.size()) ||
      !r.u16(&d->port.lid) || !r.u32(&numa))
    return malformed("truncated device");
  d->numa_node = static_cast<int32_t>(numa);
  return Status::OK();
}

Status parseRegion(WireReader& r, size_t device_count, RegionDescriptor* g) {
  uint16_t n = 0;
  if (!r.u64(&g->addr) || !r.u64(&g->length) || !r.str(&g->location, 64) || !r.u16(&n))
    return malformed("truncated region");
  if (n > device_count) return malformed("more rank-0 devices than devices");
  g->rank0.resize(n);
  for (auto& d : g->rank0) {
    if (!r.u16(&d)) return malformed("truncated rank-0 list");
    if (d >= device_count) return malformed("rank-0 device index out of range");
  }
  return Status::OK();
}

Status checkRegions(const BufferDescriptor& b) {
  uint64_t cursor = b.addr;
  for (const auto& g : b.regions) {
    if (g.addr != cursor || g.length > b.addr + b.length - g.addr)
      return malformed("regions do not tile their buffer");
    cursor = g.addr + g.length;
  }
  if (cursor != b.addr + b.length) return malformed("regions do not cover their buffer");
  return Status::OK();
}

Status parseBuffer(WireReader& r, uint16_t version, size_t device_count, BufferDescriptor* b) {
  uint16_t n = 0;
  if (!r.u64(&b->addr) || !r.u64(&b->length) || !r.u16(&n)) return malformed("truncated buffer");
  if (b->length == 0 || b->addr + b->length < b->addr) return malformed("buffer range");
  if (n == 0 || n > kMaxBufferRegions) return malformed("region count out of range");
  b->regions.resize(n);
  for (auto& g : b->regions) TENT_RETURN_IF_ERROR(parseRegion(r, device_count, &g));
  TENT_RETURN_IF_ERROR(checkRegions(*b));
  uint16_t k = 0;
  if (!r.u16(&k) || k != device_count) return malformed("rkey count differs from device count");
  b->rkeys.resize(k);
  for (auto& key : b->rkeys)
    if (!r.u32(&key)) return malformed("truncated rkeys");
  if (version < 3) return Status::OK();
  if (!r.str(&b->name, kMaxBufferNameBytes) || !r.u8(&b->access) || !r.u64(&b->seq))
    return malformed("truncated buffer name, access or seq");
  // A later version may define more bits; those are its to check.
  if (version <= kDescriptorVersion && b->access > (kBufferRemoteRead | kBufferRemoteWrite))
    return malformed("unknown buffer access bits");
  return Status::OK();
}

// A length-prefixed record (v2+): u32 length, then the fields.
class Record {
 public:
  Record(WireWriter& w, bool prefixed) : w_(w), prefixed_(prefixed), at_(w.size()) {
    if (prefixed_) w_.u32(0);
  }
  ~Record() {
    if (prefixed_) w_.patchU32(at_, static_cast<uint32_t>(w_.size() - at_ - 4));
  }

 private:
  WireWriter& w_;
  bool prefixed_;
  size_t at_;
};

// Reads a record's length (v2+) and checks it against the input; returns a reader
// over the record's bytes (fields past what this version knows are skipped).
bool openRecord(WireReader& r, bool prefixed, WireReader* record) {
  if (!prefixed) {
    *record = r;
    return true;
  }
  uint32_t n = 0;
  if (!r.u32(&n) || n > r.remaining()) return false;
  *record = WireReader(r.cursor(), n);
  r.skip(n);
  return true;
}

}  // namespace

std::vector<uint8_t> encodeDescriptor(const SegmentDescriptor& d, uint16_t version) {
  const bool prefixed = version >= 2;
  WireWriter w;
  w.u32(kDescriptorMagic);
  w.u16(version);
  {
    Record header(w, prefixed);
    w.str(d.name);
    w.u64(d.instance);
    w.u64(d.version);
    if (version >= 3) w.u16(d.max_bootstrap_version);
  }
  w.u16(static_cast<uint16_t>(d.devices.size()));
  for (const auto& dev : d.devices) {
    Record rec(w, prefixed);
    w.str(dev.name);
    w.raw(dev.port.gid.data(), dev.port.gid.size());
    w.u16(dev.port.lid);
    w.u32(static_cast<uint32_t>(dev.numa_node));
  }
  w.u32(static_cast<uint32_t>(d.buffers.size()));
  for (const auto& b : d.buffers) {
    Record rec(w, prefixed);
    encodeBuffer(w, b, version);
  }
  return std::move(w.bytes());
}

namespace {

// Walks one record of each kind; `step` parses the known fields from `rec`. A v1
// record is parsed from the outer reader itself (it must then be consumed exactly).
// `newer`: the descriptor comes from a later version, whose records may end with
// fields this version does not know (skipped); a record of a version we know must
// hold exactly its fields (so every descriptor we read has one encoding).
template <typename Step>
Status readRecord(WireReader& r, bool prefixed, bool newer, const char* what, Step step) {
  WireReader rec(nullptr, 0);
  if (!openRecord(r, prefixed, &rec)) return malformed(what);
  TENT_RETURN_IF_ERROR(step(prefixed ? rec : r));
  if (prefixed && !newer && rec.remaining() != 0) return malformed("trailing bytes in a record");
  return Status::OK();
}

}  // namespace

Result<SegmentDescriptor> parseDescriptor(std::span<const uint8_t> bytes) {
  WireReader r(bytes.data(), bytes.size());
  uint32_t magic = 0, buffer_count = 0;
  uint16_t version = 0, device_count = 0;
  SegmentDescriptor d;
  if (!r.u32(&magic) || magic != kDescriptorMagic) return malformed("wrong magic");
  if (!r.u16(&version) || version == 0) return malformed("unsupported version");
  const bool prefixed = version >= 2;
  const bool newer = version > kDescriptorVersion;
  TENT_RETURN_IF_ERROR(readRecord(r, prefixed, newer, "truncated header", [&](WireReader& h) {
    if (!h.str(&d.name, 255) || !h.u64(&d.instance) || !h.u64(&d.version))
      return malformed("truncated header");
    if (version >= 3 && !h.u16(&d.max_bootstrap_version)) return malformed("truncated header");
    if (d.max_bootstrap_version < 1) return malformed("max_bootstrap_version out of range");
    return Status::OK();
  }));
  if (!r.u16(&device_count)) return malformed("truncated header");
  if (device_count > kMaxDescriptorDevices) return malformed("device count out of range");
  d.devices.resize(device_count);
  for (auto& dev : d.devices)
    TENT_RETURN_IF_ERROR(readRecord(r, prefixed, newer, "truncated device",
                                    [&](WireReader& rec) { return parseDevice(rec, &dev); }));
  if (!r.u32(&buffer_count) || buffer_count > kMaxDescriptorBuffers)
    return malformed("buffer count out of range");
  // Each buffer takes at least 40 bytes: bound the allocation by the input size.
  if (buffer_count > r.remaining() / 40 + 1) return malformed("buffer count exceeds input");
  d.buffers.resize(buffer_count);
  for (auto& b : d.buffers)
    TENT_RETURN_IF_ERROR(readRecord(r, prefixed, newer, "truncated buffer", [&](WireReader& rec) {
      return parseBuffer(rec, version, device_count, &b);
    }));
  for (size_t i = 1; i < d.buffers.size(); ++i)
    if (d.buffers[i].addr < d.buffers[i - 1].addr + d.buffers[i - 1].length)
      return malformed("buffers overlap or are unsorted");
  if (r.remaining() != 0) return malformed("trailing bytes");
  return d;
}

}  // namespace tent::metadata
