// The bootstrap v3 extensions of the link owner (issue 24): what both ends of an RC
// connection must agree on besides QP numbers.
//   kLink: u8 link layer | u8 GID type | u32 port MTU in bytes (fabric::PortLink)
//   kQos:  u8 count | count x {u8 QP class, u8 traffic class, u8 service level}; the
//          initiator's values, which the responder's QPs use too. Unknown classes are
//          skipped (a later engine may have more).
//   kPsn:  u16 count | count x u32 initial PSN of the sender's QPs, in the order of
//          data_qp_nums, then the direct QP when it has one.
// A peer without these tags (an older engine) gets today's behaviour: the local MTU,
// our own traffic settings, PSN 0 both ways.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "fabric/fabric.h"
#include "tent/status.h"

namespace tent::metadata {

enum class QosClassId : uint8_t { kData = 0, kDirect = 1, kControl = 2 };

struct QosTag {
  fabric::QpTraffic data;
  fabric::QpTraffic direct;
  fabric::QpTraffic control;
  bool operator==(const QosTag&) const = default;
};

std::vector<uint8_t> encodeLinkTag(const fabric::PortLink& link);
Result<fabric::PortLink> decodeLinkTag(std::span<const uint8_t> bytes);

std::vector<uint8_t> encodeQosTag(const QosTag& qos);
Result<QosTag> decodeQosTag(std::span<const uint8_t> bytes);

std::vector<uint8_t> encodePsnTag(std::span<const uint32_t> psns);
Result<std::vector<uint32_t>> decodePsnTag(std::span<const uint8_t> bytes);

}  // namespace tent::metadata
