#include "wire/control_frames.h"

#include "wire/wire.h"

namespace tent::metadata {

namespace {

Status malformed(const char* what) {
  return Status::InvalidArgument(std::string("malformed control message: ") + what);
}

Status finish(const WireReader& r, const char* what) {
  return r.remaining() == 0 ? Status::OK() : malformed(what);
}

constexpr size_t kMaxErrorMessage = 4096;
constexpr size_t kMaxDeviceName = 255;

}  // namespace

bool isKnownFrameType(uint16_t type) noexcept {
  switch (static_cast<FrameType>(type)) {
    case FrameType::kGetDescriptor:
    case FrameType::kBootstrap:
    case FrameType::kHello:
    case FrameType::kAuth:
    case FrameType::kKeepalive:
    case FrameType::kRelease:
    case FrameType::kDescriptor:
    case FrameType::kBootstrapReply:
    case FrameType::kChallenge:
    case FrameType::kAuthOk:
    case FrameType::kKeepaliveReply:
    case FrameType::kDescriptorUpdate:
    case FrameType::kError:
      return true;
  }
  return false;
}

const char* frameTypeName(FrameType type) noexcept {
  switch (type) {
    case FrameType::kGetDescriptor:
      return "GET_DESCRIPTOR";
    case FrameType::kBootstrap:
      return "BOOTSTRAP";
    case FrameType::kHello:
      return "HELLO";
    case FrameType::kAuth:
      return "AUTH";
    case FrameType::kKeepalive:
      return "KEEPALIVE";
    case FrameType::kRelease:
      return "RELEASE";
    case FrameType::kDescriptor:
      return "DESCRIPTOR";
    case FrameType::kBootstrapReply:
      return "BOOTSTRAP_REPLY";
    case FrameType::kChallenge:
      return "CHALLENGE";
    case FrameType::kAuthOk:
      return "AUTH_OK";
    case FrameType::kKeepaliveReply:
      return "KEEPALIVE_REPLY";
    case FrameType::kDescriptorUpdate:
      return "DESCRIPTOR_UPDATE";
    case FrameType::kError:
      return "ERROR";
  }
  return "?";
}

void encodeFrameHeader(FrameType type, uint32_t length, uint8_t out[kFrameHeaderBytes]) noexcept {
  const uint16_t t = static_cast<uint16_t>(type);
  for (int i = 0; i < 4; ++i) out[i] = static_cast<uint8_t>(kControlMagic >> (8 * i));
  out[4] = static_cast<uint8_t>(t);
  out[5] = static_cast<uint8_t>(t >> 8);
  for (int i = 0; i < 4; ++i) out[6 + i] = static_cast<uint8_t>(length >> (8 * i));
}

Status parseFrameHeader(std::span<const uint8_t, kFrameHeaderBytes> bytes, uint32_t max_payload,
                        FrameHeader* out) {
  WireReader r(bytes.data(), bytes.size());
  uint32_t magic = 0, length = 0;
  uint16_t type = 0;
  (void)r.u32(&magic);
  (void)r.u16(&type);
  (void)r.u32(&length);
  if (magic != kControlMagic) return Status::InvalidArgument("control frame: wrong magic");
  if (!isKnownFrameType(type))
    return Status::InvalidArgument("control frame: unknown type " + std::to_string(type));
  if (length > max_payload)
    return Status::InvalidArgument("control frame: payload of " + std::to_string(length) +
                                   " bytes over the limit of " + std::to_string(max_payload));
  out->type = static_cast<FrameType>(type);
  out->length = length;
  return Status::OK();
}

std::vector<uint8_t> encodeHello(const Hello& m) {
  WireWriter w;
  w.u16(m.version);
  w.raw(m.client_nonce.data(), m.client_nonce.size());
  return std::move(w.bytes());
}

Result<Hello> parseHello(std::span<const uint8_t> bytes) {
  WireReader r(bytes.data(), bytes.size());
  Hello m;
  if (!r.u16(&m.version) || !r.raw(m.client_nonce.data(), kNonceBytes))
    return malformed("truncated HELLO");
  TENT_RETURN_IF_ERROR(finish(r, "trailing bytes after HELLO"));
  return m;
}

std::vector<uint8_t> encodeChallenge(const Challenge& m) {
  WireWriter w;
  w.u16(m.version);
  w.u8(m.auth_required ? 1 : 0);
  w.raw(m.server_nonce.data(), m.server_nonce.size());
  w.raw(m.server_proof.data(), m.server_proof.size());
  return std::move(w.bytes());
}

Result<Challenge> parseChallenge(std::span<const uint8_t> bytes) {
  WireReader r(bytes.data(), bytes.size());
  Challenge m;
  uint8_t auth = 0;
  if (!r.u16(&m.version) || !r.u8(&auth) || !r.raw(m.server_nonce.data(), kNonceBytes) ||
      !r.raw(m.server_proof.data(), kMacBytes))
    return malformed("truncated CHALLENGE");
  if (auth > 1) return malformed("CHALLENGE auth flag out of range");
  m.auth_required = auth == 1;
  TENT_RETURN_IF_ERROR(finish(r, "trailing bytes after CHALLENGE"));
  return m;
}

std::vector<uint8_t> encodeAuth(const AuthMessage& m) {
  WireWriter w;
  w.u8(m.has_proof ? 1 : 0);
  if (m.has_proof) w.raw(m.client_proof.data(), m.client_proof.size());
  return std::move(w.bytes());
}

Result<AuthMessage> parseAuth(std::span<const uint8_t> bytes) {
  WireReader r(bytes.data(), bytes.size());
  AuthMessage m;
  uint8_t flag = 0;
  if (!r.u8(&flag) || flag > 1) return malformed("AUTH flag");
  m.has_proof = flag == 1;
  if (m.has_proof && !r.raw(m.client_proof.data(), kMacBytes)) return malformed("truncated AUTH");
  TENT_RETURN_IF_ERROR(finish(r, "trailing bytes after AUTH"));
  return m;
}

std::vector<uint8_t> encodeRelease(const ReleaseMessage& m) {
  WireWriter w;
  w.str(m.initiator_device);
  w.str(m.target_device);
  w.u64(m.generation);
  return std::move(w.bytes());
}

Result<ReleaseMessage> parseRelease(std::span<const uint8_t> bytes) {
  WireReader r(bytes.data(), bytes.size());
  ReleaseMessage m;
  if (!r.str(&m.initiator_device, kMaxDeviceName) || !r.str(&m.target_device, kMaxDeviceName) ||
      !r.u64(&m.generation))
    return malformed("truncated RELEASE");
  TENT_RETURN_IF_ERROR(finish(r, "trailing bytes after RELEASE"));
  return m;
}

std::vector<uint8_t> encodeDescriptorRequest(uint16_t max_version) {
  WireWriter w;
  w.u16(max_version);
  return std::move(w.bytes());
}

Result<uint16_t> parseDescriptorRequest(std::span<const uint8_t> bytes) {
  if (bytes.empty()) return uint16_t{1};  // a v1 asker
  WireReader r(bytes.data(), bytes.size());
  uint16_t v = 0;
  if (!r.u16(&v) || v == 0) return malformed("GET_DESCRIPTOR version");
  TENT_RETURN_IF_ERROR(finish(r, "trailing bytes after GET_DESCRIPTOR"));
  return v;
}

std::vector<uint8_t> encodeError(const Status& status) {
  // v1 peers print the payload as text: keep it text, "<Code>: <message>".
  std::string text = status.toString();
  if (text.size() > kMaxErrorMessage) text.resize(kMaxErrorMessage);
  return std::vector<uint8_t>(text.begin(), text.end());
}

Status parseError(std::span<const uint8_t> bytes) {
  std::string text(bytes.begin(), bytes.end());
  if (text.size() > kMaxErrorMessage) text.resize(kMaxErrorMessage);
  // Recover the code from "<Code>: message" when it is one of ours.
  for (uint8_t c = 1; c <= static_cast<uint8_t>(StatusCode::kInternal); ++c) {
    const std::string name(statusCodeName(static_cast<StatusCode>(c)));
    if (text.rfind(name + ": ", 0) == 0)
      return Status(static_cast<StatusCode>(c), text.substr(name.size() + 2));
  }
  return Status::FailedPrecondition(text);
}

}  // namespace tent::metadata
