// The bootstrap message two endpoints exchange to wire their RC queue pairs.
// Versioned, length-prefixed binary:
//   header: magic u32 | version u16 | body length u32
//   body v1: initiator segment name, initiator instance, local device name, peer device
//            name, PortIdentity (gid[16], lid), generation, data QP numbers
//   body v2: v1 + direct_qp_num (0 = no direct QP)
// A v1 message parses with direct_qp_num = 0, so older peers never get a direct QP.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "fabric/fabric.h"
#include "tent/status.h"

namespace tent::metadata {

inline constexpr uint32_t kBootstrapMagic = 0x54425354;  // "TSBT" little-endian
inline constexpr uint16_t kBootstrapVersionV1 = 1;
inline constexpr uint16_t kBootstrapVersion = 2;  // current: carries direct_qp_num
inline constexpr size_t kBootstrapHeaderBytes = 10;
inline constexpr size_t kMaxBootstrapQps = 256;
inline constexpr size_t kMaxNameBytes = 255;
inline constexpr size_t kMaxBootstrapBodyBytes = 4096;

struct BootstrapMessage {
  std::string initiator_segment;    // "host:port" of the side that sent the request
  uint64_t initiator_instance = 0;  // random per engine instance: a restarted peer differs
  std::string local_device;         // sender's device
  std::string peer_device;          // receiver's device
  fabric::PortIdentity port;        // sender's port identity
  uint64_t generation = 0;          // endpoint generation on the active side
  std::vector<uint32_t> data_qp_nums;
  uint32_t direct_qp_num = 0;  // 0 = none (or a v1 peer)
  // The version it was parsed from (a reply is encoded in the request's version).
  uint16_t version = kBootstrapVersion;

  bool operator==(const BootstrapMessage&) const = default;
};

// Encodes with `version` (kBootstrapVersionV1 drops direct_qp_num: for compatibility tests).
std::vector<uint8_t> encodeBootstrap(const BootstrapMessage& msg,
                                     uint16_t version = kBootstrapVersion);
// Rejects truncated input, a wrong magic or version, lengths out of range, too many QPs
// and trailing bytes, with InvalidArgument naming the problem.
Result<BootstrapMessage> parseBootstrap(std::span<const uint8_t> bytes);

// The QP numbers both sides agreed on; a duplicate bootstrap must match all of them.
bool sameQpWiring(const BootstrapMessage& a, const BootstrapMessage& b);

}  // namespace tent::metadata
