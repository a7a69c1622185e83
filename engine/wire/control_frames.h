// The control protocol's frames and the small messages they carry (pure encode /
// parse, no I/O, so every parser here is fuzzed and unit-tested on its own).
//
// Frame: magic u32 "TCTL" | type u16 | payload length u32 | payload. Once a session
// is authenticated every frame's payload ends with a 32-byte HMAC-SHA256 tag over
// (direction, sequence number, type, payload) - see engine/control/auth.h.
//
// Two ways to talk (docs/engine.md, "Control protocol"):
//   one-shot (v1): one request frame (GET_DESCRIPTOR or BOOTSTRAP) and one reply per
//     connection. Served only when no cluster secret is configured.
//   session (v2): HELLO -> CHALLENGE -> AUTH -> AUTH_OK, then any number of requests
//     answered in order, keepalives, RELEASE notices and pushed DESCRIPTOR_UPDATEs.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tent/status.h"

namespace tent::metadata {

inline constexpr uint32_t kControlMagic = 0x4c544354;  // "TCTL"
inline constexpr size_t kFrameHeaderBytes = 10;
inline constexpr uint32_t kMaxControlPayload = 64u << 20;  // a large descriptor
// Before a connection has authenticated (or, without a secret, said HELLO), a frame
// may carry at most this much: an unauthenticated peer cannot make us allocate more.
inline constexpr uint32_t kMaxUnauthenticatedPayload = 64u << 10;
inline constexpr uint16_t kSessionProtocolVersion = 2;
inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kMacBytes = 32;

enum class FrameType : uint16_t {
  // requests (one-shot or in a session)
  kGetDescriptor = 0x01,
  kBootstrap = 0x02,
  // session control, client -> server
  kHello = 0x10,
  kAuth = 0x11,
  kKeepalive = 0x12,
  kRelease = 0x13,  // the initiator retired an endpoint: free its passive side
  // replies and pushes, server -> client
  kDescriptor = 0x81,
  kBootstrapReply = 0x82,
  kChallenge = 0x90,
  kAuthOk = 0x91,
  kKeepaliveReply = 0x92,
  kDescriptorUpdate = 0x93,
  kError = 0xff,
};
bool isKnownFrameType(uint16_t type) noexcept;
const char* frameTypeName(FrameType type) noexcept;

struct FrameHeader {
  FrameType type = FrameType::kError;
  uint32_t length = 0;
};
void encodeFrameHeader(FrameType type, uint32_t length, uint8_t out[kFrameHeaderBytes]) noexcept;
// InvalidArgument for a wrong magic, an unknown type or a length over `max_payload`.
Status parseFrameHeader(std::span<const uint8_t, kFrameHeaderBytes> bytes, uint32_t max_payload,
                        FrameHeader* out);

using Nonce = std::array<uint8_t, kNonceBytes>;
using Mac = std::array<uint8_t, kMacBytes>;

struct Hello {
  uint16_t version = kSessionProtocolVersion;
  Nonce client_nonce{};
};
struct Challenge {
  uint16_t version = kSessionProtocolVersion;
  bool auth_required = false;  // the server holds a cluster secret
  Nonce server_nonce{};
  Mac server_proof{};  // proves the server holds the secret (zero without one)
};
struct AuthMessage {
  bool has_proof = false;
  Mac client_proof{};
};
// RELEASE: the initiator's endpoint (its device, our device, generation) is gone.
struct ReleaseMessage {
  std::string initiator_device;
  std::string target_device;
  uint64_t generation = 0;
};

std::vector<uint8_t> encodeHello(const Hello& m);
Result<Hello> parseHello(std::span<const uint8_t> bytes);
std::vector<uint8_t> encodeChallenge(const Challenge& m);
Result<Challenge> parseChallenge(std::span<const uint8_t> bytes);
std::vector<uint8_t> encodeAuth(const AuthMessage& m);
Result<AuthMessage> parseAuth(std::span<const uint8_t> bytes);
std::vector<uint8_t> encodeRelease(const ReleaseMessage& m);
Result<ReleaseMessage> parseRelease(std::span<const uint8_t> bytes);
// GET_DESCRIPTOR's payload: the newest descriptor version the asker reads. A v1 asker
// sends an empty payload and gets a v1 descriptor.
std::vector<uint8_t> encodeDescriptorRequest(uint16_t max_version);
Result<uint16_t> parseDescriptorRequest(std::span<const uint8_t> bytes);
// ERROR's payload: a status code name's index and a message.
std::vector<uint8_t> encodeError(const Status& status);
Status parseError(std::span<const uint8_t> bytes);

}  // namespace tent::metadata
