// Control-plane authentication: a cluster secret shared by every engine of a
// deployment, HMAC-SHA256 (OpenSSL libcrypto) challenge-response in both directions
// before anything is served, and a per-session key that tags every later frame.
//
// Handshake (nonces are 32 random bytes, K the secret):
//   client -> HELLO      {version, Nc}
//   server -> CHALLENGE  {version, auth?, Ns, Ps = HMAC(K, "tent-server" | Nc | Ns)}
//   client checks Ps (the server holds K), then
//   client -> AUTH       {Pc = HMAC(K, "tent-client" | Ns | Nc)}
//   server checks Pc     -> AUTH_OK, or ERROR and close.
// Session key S = HMAC(K, "tent-session" | Nc | Ns). Each later frame's payload ends
// with HMAC(S, direction | sequence | type | payload): a frame cannot be injected,
// replayed, reordered or moved to another session. Traffic is authenticated, not
// encrypted (docs/engine.md, "Threat model").
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "wire/control_frames.h"
#include "tent/status.h"
#include "wire/control_frames.h"

namespace tent::control {

class Secret {
 public:
  Secret() = default;
  // Reads `path`: at least 32 bytes of secret (e.g. 64 hex characters); one trailing
  // newline is ignored. Refused when the file is group- or world-accessible, is not a
  // regular file, or is too short; the message names the key and the file.
  static Result<Secret> load(const std::string& path);
  static Secret fromBytes(std::string bytes);  // tests
  bool empty() const noexcept { return key_.empty(); }

  metadata::Mac serverProof(const metadata::Nonce& client, const metadata::Nonce& server) const;
  metadata::Mac clientProof(const metadata::Nonce& client, const metadata::Nonce& server) const;
  std::vector<uint8_t> sessionKey(const metadata::Nonce& client,
                                  const metadata::Nonce& server) const;
  // HMAC(K, label | data): tags data kept outside a session (fleet entries in etcd).
  metadata::Mac tag(std::string_view label, std::span<const uint8_t> data) const;

 private:
  std::string key_;
};

inline constexpr size_t kMinSecretBytes = 32;

metadata::Nonce randomNonce();
// Constant-time comparison of two tags.
bool equalMacs(const metadata::Mac& a, const metadata::Mac& b) noexcept;

// Tags frames of one direction of a session with the session key and a counter.
class FrameSigner {
 public:
  FrameSigner() = default;
  FrameSigner(std::vector<uint8_t> key, uint8_t direction)
      : key_(std::move(key)), dir_(direction) {}
  bool active() const noexcept { return !key_.empty(); }
  metadata::Mac tag(metadata::FrameType type, std::span<const uint8_t> payload);

 private:
  std::vector<uint8_t> key_;
  uint8_t dir_ = 0;
  uint64_t seq_ = 0;
};

inline constexpr uint8_t kClientToServer = 1;
inline constexpr uint8_t kServerToClient = 2;

}  // namespace tent::control
