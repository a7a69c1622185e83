#include "wire/bootstrap.h"

#include "wire/wire.h"

namespace tent::metadata {

const std::vector<uint8_t>* BootstrapMessage::extension(BootstrapTag tag) const noexcept {
  for (const auto& e : extensions)
    if (e.tag == static_cast<uint16_t>(tag)) return &e.bytes;
  return nullptr;
}

void BootstrapMessage::setExtension(BootstrapTag tag, std::vector<uint8_t> bytes) {
  for (auto& e : extensions)
    if (e.tag == static_cast<uint16_t>(tag)) {
      e.bytes = std::move(bytes);
      return;
    }
  extensions.push_back({static_cast<uint16_t>(tag), std::move(bytes)});
}

uint16_t bootstrapVersionFor(uint16_t peer_version) noexcept {
  return peer_version < kBootstrapVersion ? peer_version : kBootstrapVersion;
}

std::vector<uint8_t> encodeBootstrap(const BootstrapMessage& msg, uint16_t version) {
  WireWriter w;
  w.u32(kBootstrapMagic);
  w.u16(version);
  w.u32(0);  // body length, patched below
  w.str(msg.initiator_segment);
  w.u64(msg.initiator_instance);
  w.str(msg.local_device);
  w.str(msg.peer_device);
  w.raw(msg.port.gid.data(), msg.port.gid.size());
  w.u16(msg.port.lid);
  w.u64(msg.generation);
  w.u16(static_cast<uint16_t>(msg.data_qp_nums.size()));
  for (uint32_t qp : msg.data_qp_nums) w.u32(qp);
  if (version >= 2) w.u32(msg.direct_qp_num);
  if (version >= 3) {
    w.u16(static_cast<uint16_t>(msg.extensions.size()));
    for (const auto& e : msg.extensions) {
      w.u16(e.tag);
      w.u16(static_cast<uint16_t>(e.bytes.size()));
      w.raw(e.bytes.data(), e.bytes.size());
    }
  }
  w.patchU32(6, static_cast<uint32_t>(w.size() - kBootstrapHeaderBytes));
  return std::move(w.bytes());
}

namespace {

Status malformed(const char* what) {
  return Status::InvalidArgument(std::string("malformed bootstrap message: ") + what);
}

Status parseExtensions(WireReader& r, BootstrapMessage* m) {
  uint16_t count = 0;
  if (!r.u16(&count)) return malformed("truncated at extension count");
  if (count > kMaxBootstrapExtensions) return malformed("extension count out of range [0, 32]");
  m->extensions.resize(count);
  for (size_t i = 0; i < count; ++i) {
    auto& e = m->extensions[i];
    uint16_t length = 0;
    if (!r.u16(&e.tag) || !r.u16(&length)) return malformed("truncated extension header");
    if (length > r.remaining()) return malformed("extension longer than the body");
    e.bytes.resize(length);
    if (!r.raw(e.bytes.data(), length)) return malformed("truncated extension");
    for (size_t k = 0; k < i; ++k)
      if (m->extensions[k].tag == e.tag) return malformed("an extension tag given twice");
  }
  return Status::OK();
}

Status parseBody(WireReader& r, uint16_t version, BootstrapMessage* m) {
  if (!r.str(&m->initiator_segment, kMaxNameBytes)) return malformed("initiator segment name");
  if (!r.u64(&m->initiator_instance)) return malformed("truncated at instance");
  if (!r.str(&m->local_device, kMaxNameBytes)) return malformed("local device name");
  if (!r.str(&m->peer_device, kMaxNameBytes)) return malformed("peer device name");
  if (!r.raw(m->port.gid.data(), m->port.gid.size()) || !r.u16(&m->port.lid))
    return malformed("truncated at port identity");
  if (!r.u64(&m->generation)) return malformed("truncated at generation");
  uint16_t qp_count = 0;
  if (!r.u16(&qp_count)) return malformed("truncated at QP count");
  if (qp_count == 0 || qp_count > kMaxBootstrapQps)
    return malformed("data QP count out of range [1, 256]");
  m->data_qp_nums.resize(qp_count);
  for (auto& qp : m->data_qp_nums)
    if (!r.u32(&qp)) return malformed("truncated in QP numbers");
  m->direct_qp_num = 0;  // v1 peers have no direct QP
  if (version >= 2 && !r.u32(&m->direct_qp_num)) return malformed("truncated at direct_qp_num");
  if (version >= 3) TENT_RETURN_IF_ERROR(parseExtensions(r, m));
  if (r.remaining() != 0) return malformed("trailing bytes after the body");
  return Status::OK();
}

}  // namespace

Result<BootstrapMessage> parseBootstrap(std::span<const uint8_t> bytes) {
  WireReader r(bytes.data(), bytes.size());
  uint32_t magic = 0, length = 0;
  uint16_t version = 0;
  if (!r.u32(&magic) || !r.u16(&version) || !r.u32(&length)) return malformed("truncated header");
  if (magic != kBootstrapMagic) return malformed("wrong magic");
  if (version < kBootstrapVersionV1) return malformed("unsupported version");
  if (length > kMaxBootstrapBodyBytes) return malformed("body length out of range");
  if (length != r.remaining()) return malformed("body length does not match the message size");
  BootstrapMessage m;
  m.version = version;
  Status s = parseBody(r, version, &m);
  if (!s.ok()) return s;
  return m;
}

bool sameQpWiring(const BootstrapMessage& a, const BootstrapMessage& b) {
  return a.data_qp_nums == b.data_qp_nums && a.direct_qp_num == b.direct_qp_num &&
         a.port == b.port && a.generation == b.generation && a.extensions == b.extensions;
}

}  // namespace tent::metadata
