// The tcp provider's wire format: pure encode/parse, no sockets (fuzzed).
//
// One TCP connection carries one queue pair pair. The side that connects sends a
// HELLO naming both QPs; the side that accepts answers HELLO_ACK (or HELLO_REJECT and
// closes). After that the stream is a sequence of messages, each a 32-byte header
// and, for WRITE_REQ and a successful READ_RESP, `length` payload bytes:
//
//   WRITE_REQ  requester -> responder  header + payload, placed at remote_addr (rkey)
//   READ_REQ   requester -> responder  header only; `length` bytes wanted from remote_addr
//   WRITE_ACK  responder -> requester  header only; status of the WRITE with that seq
//   READ_RESP  responder -> requester  header (+ `length` payload bytes when status is 0)
//   SEND_REQ   requester -> responder  header + payload, placed in the oldest posted receive
//   SEND_ACK   responder -> requester  header only; status of the SEND (receiver not ready:
//                                      kRnrRetryExceeded)
//
// Every WR gets exactly one response, in the order of the requests, so `seq` (the
// requester's WR number on its QP, counted from 0) must be the next one expected on
// both sides. Integers are little-endian. Version 1; a peer speaking another version is
// rejected at HELLO (docs/fabric.md, "tcp provider").
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "fabric/fabric.h"

namespace tent::fabric::tcp {

inline constexpr uint8_t kWireVersion = 1;
inline constexpr size_t kHeaderBytes = 32;
inline constexpr size_t kHelloBytes = 64;
inline constexpr uint32_t kHeaderMagic = 0x57544e54;  // "TNTW"
inline constexpr uint32_t kHelloMagic = 0x48544e54;   // "TNTH"
// A message never carries more (fabric.tcp.max_message_bytes is at most this).
inline constexpr uint64_t kMaxWireLength = uint64_t{1} << 31;

enum class Opcode : uint8_t {
  kWriteReq = 1,
  kReadReq = 2,
  kWriteAck = 3,
  kReadResp = 4,
  // Added without a version change: only a peer that posted receives (a notify QP, a
  // capability its engine advertised) is ever sent one.
  kSendReq = 5,
  kSendAck = 6,
};

struct Header {
  Opcode opcode = Opcode::kWriteReq;
  WcStatus status = WcStatus::kSuccess;  // responses only
  uint32_t length = 0;
  uint64_t seq = 0;
  uint64_t remote_addr = 0;  // requests only
  uint32_t rkey = 0;         // requests only
};

enum class ParseResult : uint8_t {
  kOk = 0,
  kBadMagic,
  kBadVersion,
  kBadOpcode,
  kBadField,   // a reserved byte, a status on a request, an address on a response
  kBadLength,  // longer than allowed, or payload where none may be
};

inline constexpr bool isRequest(Opcode op) noexcept {
  return op == Opcode::kWriteReq || op == Opcode::kReadReq || op == Opcode::kSendReq;
}
// Payload bytes that follow this header on the stream.
inline constexpr uint64_t payloadBytes(const Header& h) noexcept {
  if (h.opcode == Opcode::kWriteReq || h.opcode == Opcode::kSendReq) return h.length;
  if (h.opcode == Opcode::kReadResp && h.status == WcStatus::kSuccess) return h.length;
  return 0;
}

void encodeHeader(const Header& h, uint8_t out[kHeaderBytes]) noexcept;
// Checks every field; `max_length` bounds `length` (requests and READ responses).
ParseResult parseHeader(const uint8_t in[kHeaderBytes], uint64_t max_length, Header* out) noexcept;

enum class HelloKind : uint16_t { kHello = 1, kAck = 2, kReject = 3 };

enum class RejectReason : uint32_t {
  kNone = 0,
  kVersion = 1,      // we speak another wire version
  kNoSuchQp = 2,     // dst_qp does not exist (destroyed, never made)
  kWrongPeer = 3,    // the QP waits for another peer, or is not ours to connect
  kQpState = 4,      // the QP is in error, or already connected
  kMisdirected = 5,  // dst identity is not this device
  kTimeout = 6,      // the QP did not reach RTR in time
};

struct Hello {
  HelloKind kind = HelloKind::kHello;
  uint16_t version = kWireVersion;
  uint32_t src_qp = 0;
  uint32_t dst_qp = 0;
  PortIdentity src;
  PortIdentity dst;
  uint32_t max_send_wr = 0;  // the sender QP's send queue depth (its most outstanding WRs)
  RejectReason reason = RejectReason::kNone;
};

void encodeHello(const Hello& h, uint8_t out[kHelloBytes]) noexcept;
// Checks magic and kind; a version other than ours parses (so it can be rejected with
// kVersion) and is reported as kBadVersion with `out` filled.
ParseResult parseHello(const uint8_t in[kHelloBytes], Hello* out) noexcept;

const char* toString(ParseResult r) noexcept;
const char* toString(RejectReason r) noexcept;

}  // namespace tent::fabric::tcp
