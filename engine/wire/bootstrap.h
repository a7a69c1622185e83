// The bootstrap message two endpoints exchange to wire their RC queue pairs.
// Versioned, length-prefixed binary:
//   header: magic u32 | version u16 | body length u32
//   body v1: initiator segment name, initiator instance, local device name, peer device
//            name, PortIdentity (gid[16], lid), generation, data QP numbers
//   body v2: v1 + direct_qp_num (0 = no direct QP)
//   body v3: v2 + extensions: count u16, then per extension tag u16 | length u16 | bytes
// A v1 message parses with direct_qp_num = 0, so older peers never get a direct QP.
// From v3 on the body only grows by extension tags: a v3 reader reads v4+ messages,
// skipping tags it does not know; each tag's owner encodes and validates its bytes in
// its own file. The initiator encodes min(its version, the peer's advertised
// max_bootstrap_version) and the responder answers in the request's version (at most
// its own), so an older peer always gets what it reads.
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
inline constexpr uint16_t kBootstrapVersionV2 = 2;  // carries direct_qp_num
inline constexpr uint16_t kBootstrapVersion = 3;    // current: carries extensions
inline constexpr size_t kBootstrapHeaderBytes = 10;
inline constexpr size_t kMaxBootstrapQps = 256;
inline constexpr size_t kMaxNameBytes = 255;
inline constexpr size_t kMaxBootstrapBodyBytes = 8192;
inline constexpr size_t kMaxBootstrapExtensions = 32;

// Extension tags (v3+). A tag is never reused for another meaning.
enum class BootstrapTag : uint16_t {
  kNotify = 1,  // notification channel: capability flags, notify QP, receive credits
  kLink = 2,    // link layer, GID type, active MTU of the sender's port
  kQos = 3,     // traffic class and service level per QP class
  kPsn = 4,     // the sender's initial packet sequence number per QP
};

struct BootstrapExtension {
  uint16_t tag = 0;
  std::vector<uint8_t> bytes;
  bool operator==(const BootstrapExtension&) const = default;
};

struct BootstrapMessage {
  std::string initiator_segment;    // "host:port" of the side that sent the request
  uint64_t initiator_instance = 0;  // random per engine instance: a restarted peer differs
  std::string local_device;         // sender's device
  std::string peer_device;          // receiver's device
  fabric::PortIdentity port;        // sender's port identity
  uint64_t generation = 0;          // endpoint generation on the active side
  std::vector<uint32_t> data_qp_nums;
  uint32_t direct_qp_num = 0;  // 0 = none (or a v1 peer)
  // v3+: in the order they were set (parsed: in wire order); at most one per tag.
  std::vector<BootstrapExtension> extensions;
  // The version it was parsed from (a reply is encoded in the request's version).
  uint16_t version = kBootstrapVersion;

  bool operator==(const BootstrapMessage&) const = default;

  // The bytes of `tag`, or nullptr when the sender did not send it (an older peer).
  const std::vector<uint8_t>* extension(BootstrapTag tag) const noexcept;
  // Sets (or replaces) the bytes of `tag`.
  void setExtension(BootstrapTag tag, std::vector<uint8_t> bytes);
};

// Encodes with `version`: kBootstrapVersionV1 drops direct_qp_num, versions below 3 drop
// the extensions (what an older peer reads).
std::vector<uint8_t> encodeBootstrap(const BootstrapMessage& msg,
                                     uint16_t version = kBootstrapVersion);
// Rejects truncated input, a wrong magic or version, lengths out of range, too many QPs
// or extensions, a tag given twice and trailing bytes, with InvalidArgument naming the
// problem. Versions above kBootstrapVersion parse as v3 (unknown tags are kept; their
// owners never look at them).
Result<BootstrapMessage> parseBootstrap(std::span<const uint8_t> bytes);

// The version to answer (or send) to a peer that reads at most `peer_version`.
uint16_t bootstrapVersionFor(uint16_t peer_version) noexcept;

// The QP numbers both sides agreed on; a duplicate bootstrap must match all of them
// (and its extensions: a resent bootstrap repeats them byte for byte).
bool sameQpWiring(const BootstrapMessage& a, const BootstrapMessage& b);

}  // namespace tent::metadata
