// Encoding of the kLink, kQos and kPsn bootstrap extensions (bootstrap_link.h). Every
// decoder takes the tag's bytes exactly and refuses what the engine cannot use.
#include "wire/bootstrap_link.h"

#include <string>

#include "wire/wire.h"

namespace tent::metadata {

namespace {

constexpr size_t kLinkBytes = 6;
constexpr size_t kMaxQosClasses = 16;
constexpr size_t kMaxPsns = 1024;
constexpr uint8_t kMaxServiceLevel = 15;

bool validMtu(uint32_t bytes) {
  return bytes == 0 || bytes == 256 || bytes == 512 || bytes == 1024 || bytes == 2048 ||
         bytes == 4096;
}

bool validGidType(uint8_t v) {
  return v <= static_cast<uint8_t>(fabric::GidType::kRoceV2) ||
         v == static_cast<uint8_t>(fabric::GidType::kUnknown);
}

Status bad(const std::string& tag, const std::string& what) {
  return Status::InvalidArgument("bootstrap " + tag + " extension: " + what);
}

}  // namespace

std::vector<uint8_t> encodeLinkTag(const fabric::PortLink& link) {
  WireWriter w;
  w.u8(static_cast<uint8_t>(link.link_layer));
  w.u8(static_cast<uint8_t>(link.gid_type));
  w.u32(link.mtu_bytes);
  return std::move(w.bytes());
}

Result<fabric::PortLink> decodeLinkTag(std::span<const uint8_t> bytes) {
  if (bytes.size() != kLinkBytes)
    return bad("link", std::to_string(bytes.size()) + " bytes, expected 6");
  WireReader r(bytes.data(), bytes.size());
  uint8_t layer = 0, type = 0;
  uint32_t mtu = 0;
  r.u8(&layer);
  r.u8(&type);
  r.u32(&mtu);
  if (layer > static_cast<uint8_t>(fabric::LinkLayer::kEthernet))
    return bad("link", "unknown link layer " + std::to_string(layer));
  if (!validGidType(type)) return bad("link", "unknown GID type " + std::to_string(type));
  if (!validMtu(mtu)) return bad("link", "MTU " + std::to_string(mtu) + " is not an IB MTU");
  fabric::PortLink link;
  link.link_layer = static_cast<fabric::LinkLayer>(layer);
  link.gid_type = static_cast<fabric::GidType>(type);
  link.mtu_bytes = mtu;
  return link;
}

std::vector<uint8_t> encodeQosTag(const QosTag& qos) {
  WireWriter w;
  w.u8(3);
  for (auto [id, t] : {std::pair{QosClassId::kData, qos.data},
                       {QosClassId::kDirect, qos.direct},
                       {QosClassId::kControl, qos.control}}) {
    w.u8(static_cast<uint8_t>(id));
    w.u8(t.traffic_class);
    w.u8(t.service_level);
  }
  return std::move(w.bytes());
}

Result<QosTag> decodeQosTag(std::span<const uint8_t> bytes) {
  WireReader r(bytes.data(), bytes.size());
  uint8_t count = 0;
  if (!r.u8(&count) || count > kMaxQosClasses || r.remaining() != size_t{count} * 3)
    return bad("qos", "length " + std::to_string(bytes.size()) + " does not match its count");
  QosTag qos;
  for (uint8_t i = 0; i < count; ++i) {
    uint8_t id = 0;
    fabric::QpTraffic t;
    r.u8(&id);
    r.u8(&t.traffic_class);
    r.u8(&t.service_level);
    if (t.service_level > kMaxServiceLevel)
      return bad("qos", "service level " + std::to_string(t.service_level) + " above 15");
    switch (static_cast<QosClassId>(id)) {
      case QosClassId::kData:
        qos.data = t;
        break;
      case QosClassId::kDirect:
        qos.direct = t;
        break;
      case QosClassId::kControl:
        qos.control = t;
        break;
      default:
        break;  // a class of a later engine
    }
  }
  return qos;
}

std::vector<uint8_t> encodePsnTag(std::span<const uint32_t> psns) {
  WireWriter w;
  w.u16(static_cast<uint16_t>(psns.size()));
  for (uint32_t psn : psns) w.u32(psn);
  return std::move(w.bytes());
}

Result<std::vector<uint32_t>> decodePsnTag(std::span<const uint8_t> bytes) {
  WireReader r(bytes.data(), bytes.size());
  uint16_t count = 0;
  if (!r.u16(&count) || count > kMaxPsns || r.remaining() != size_t{count} * 4)
    return bad("psn", "length " + std::to_string(bytes.size()) + " does not match its count");
  std::vector<uint32_t> psns(count);
  for (uint32_t& psn : psns) {
    r.u32(&psn);
    if (psn > fabric::kMaxPsn)
      return bad("psn", "PSN " + std::to_string(psn) + " wider than 24 bits");
  }
  return psns;
}

}  // namespace tent::metadata
