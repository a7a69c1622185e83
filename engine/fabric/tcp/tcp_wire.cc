// The tcp provider's wire format (see tcp_wire.h). Pure functions over byte arrays.
#include "fabric/tcp/tcp_wire.h"

#include <cstring>

namespace tent::fabric::tcp {

namespace {

void put16(uint8_t* p, uint16_t v) noexcept {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
void put32(uint8_t* p, uint32_t v) noexcept {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void put64(uint8_t* p, uint64_t v) noexcept {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint16_t get16(const uint8_t* p) noexcept {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}
uint32_t get32(const uint8_t* p) noexcept {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint64_t get64(const uint8_t* p) noexcept {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

constexpr uint8_t kMaxStatus = static_cast<uint8_t>(WcStatus::kRnrRetryExceeded);

}  // namespace

void encodeHeader(const Header& h, uint8_t out[kHeaderBytes]) noexcept {
  out[0] = kWireVersion;
  out[1] = static_cast<uint8_t>(h.opcode);
  out[2] = static_cast<uint8_t>(h.status);
  out[3] = 0;
  put32(out + 4, h.length);
  put64(out + 8, h.seq);
  put64(out + 16, h.remote_addr);
  put32(out + 24, h.rkey);
  put32(out + 28, kHeaderMagic);
}

ParseResult parseHeader(const uint8_t in[kHeaderBytes], uint64_t max_length, Header* out) noexcept {
  if (get32(in + 28) != kHeaderMagic) return ParseResult::kBadMagic;
  if (in[0] != kWireVersion) return ParseResult::kBadVersion;
  const uint8_t op = in[1];
  if (op < static_cast<uint8_t>(Opcode::kWriteReq) || op > static_cast<uint8_t>(Opcode::kSendAck))
    return ParseResult::kBadOpcode;
  if (in[3] != 0 || in[2] > kMaxStatus) return ParseResult::kBadField;
  Header h;
  h.opcode = static_cast<Opcode>(op);
  h.status = static_cast<WcStatus>(in[2]);
  h.length = get32(in + 4);
  h.seq = get64(in + 8);
  h.remote_addr = get64(in + 16);
  h.rkey = get32(in + 24);
  if (isRequest(h.opcode)) {
    if (h.status != WcStatus::kSuccess) return ParseResult::kBadField;
  } else if (h.remote_addr != 0 || h.rkey != 0) {
    return ParseResult::kBadField;
  }
  const uint64_t limit = max_length < kMaxWireLength ? max_length : kMaxWireLength;
  if (h.length > limit) return ParseResult::kBadLength;
  if ((h.opcode == Opcode::kWriteAck || h.opcode == Opcode::kSendAck) && h.length != 0)
    return ParseResult::kBadLength;
  if (h.opcode == Opcode::kSendReq && (h.remote_addr != 0 || h.rkey != 0))
    return ParseResult::kBadField;
  if (h.opcode == Opcode::kReadResp && h.status != WcStatus::kSuccess && h.length != 0)
    return ParseResult::kBadLength;
  *out = h;
  return ParseResult::kOk;
}

void encodeHello(const Hello& h, uint8_t out[kHelloBytes]) noexcept {
  std::memset(out, 0, kHelloBytes);
  put32(out, kHelloMagic);
  put16(out + 4, h.version);
  put16(out + 6, static_cast<uint16_t>(h.kind));
  put32(out + 8, h.src_qp);
  put32(out + 12, h.dst_qp);
  std::memcpy(out + 16, h.src.gid.data(), 16);
  put16(out + 32, h.src.lid);
  put16(out + 34, h.dst.lid);
  std::memcpy(out + 36, h.dst.gid.data(), 16);
  put32(out + 52, h.max_send_wr);
  put32(out + 56, static_cast<uint32_t>(h.reason));
}

ParseResult parseHello(const uint8_t in[kHelloBytes], Hello* out) noexcept {
  if (get32(in) != kHelloMagic) return ParseResult::kBadMagic;
  const uint16_t kind = get16(in + 6);
  if (kind < static_cast<uint16_t>(HelloKind::kHello) ||
      kind > static_cast<uint16_t>(HelloKind::kReject))
    return ParseResult::kBadOpcode;
  Hello h;
  h.version = get16(in + 4);
  h.kind = static_cast<HelloKind>(kind);
  h.src_qp = get32(in + 8);
  h.dst_qp = get32(in + 12);
  std::memcpy(h.src.gid.data(), in + 16, 16);
  h.src.lid = get16(in + 32);
  h.dst.lid = get16(in + 34);
  std::memcpy(h.dst.gid.data(), in + 36, 16);
  h.max_send_wr = get32(in + 52);
  const uint32_t reason = get32(in + 56);
  if (reason > static_cast<uint32_t>(RejectReason::kTimeout)) return ParseResult::kBadField;
  h.reason = static_cast<RejectReason>(reason);
  if (get32(in + 60) != 0) return ParseResult::kBadField;
  *out = h;
  if (h.version != kWireVersion) return ParseResult::kBadVersion;
  // A hello names two QPs (24-bit numbers, never 0) and a send queue depth.
  if (h.kind == HelloKind::kHello) {
    if (h.src_qp == 0 || h.dst_qp == 0 || h.src_qp >= (1u << 24) || h.dst_qp >= (1u << 24) ||
        h.max_send_wr == 0 || h.reason != RejectReason::kNone)
      return ParseResult::kBadField;
  } else if (h.kind == HelloKind::kAck) {
    if (h.max_send_wr == 0 || h.reason != RejectReason::kNone) return ParseResult::kBadField;
  } else if (h.reason == RejectReason::kNone) {
    return ParseResult::kBadField;
  }
  return ParseResult::kOk;
}

const char* toString(ParseResult r) noexcept {
  switch (r) {
    case ParseResult::kOk:
      return "ok";
    case ParseResult::kBadMagic:
      return "bad magic";
    case ParseResult::kBadVersion:
      return "unsupported version";
    case ParseResult::kBadOpcode:
      return "unknown opcode";
    case ParseResult::kBadField:
      return "bad field";
    case ParseResult::kBadLength:
      return "bad length";
  }
  return "?";
}

const char* toString(RejectReason r) noexcept {
  switch (r) {
    case RejectReason::kNone:
      return "none";
    case RejectReason::kVersion:
      return "wire version mismatch";
    case RejectReason::kNoSuchQp:
      return "no such QP";
    case RejectReason::kWrongPeer:
      return "the QP expects another peer";
    case RejectReason::kQpState:
      return "the QP is in error or already connected";
    case RejectReason::kMisdirected:
      return "the connection reached another device";
    case RejectReason::kTimeout:
      return "the QP did not reach RTR in time";
  }
  return "?";
}

}  // namespace tent::fabric::tcp
