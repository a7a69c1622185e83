// tcp provider: the wire format's encode/parse, and every malformed field refused.
#include <gtest/gtest.h>

#include <cstring>

#include "fabric/tcp/tcp_wire.h"

namespace tent::fabric::tcp {
namespace {

Header request(Opcode op) {
  Header h;
  h.opcode = op;
  h.length = 4096;
  h.seq = 0x0102030405060708ull;
  h.remote_addr = 0x7f0000001000ull;
  h.rkey = 0x00030007;
  return h;
}

ParseResult parse(const uint8_t* b, Header* out = nullptr) {
  Header h;
  return parseHeader(b, uint64_t{1} << 31, out ? out : &h);
}

TEST(TcpWire, HeadersRoundTrip) {
  for (Opcode op : {Opcode::kWriteReq, Opcode::kReadReq}) {
    uint8_t b[kHeaderBytes];
    encodeHeader(request(op), b);
    Header h;
    ASSERT_EQ(parse(b, &h), ParseResult::kOk);
    EXPECT_EQ(h.opcode, op);
    EXPECT_EQ(h.length, 4096u);
    EXPECT_EQ(h.seq, 0x0102030405060708ull);
    EXPECT_EQ(h.remote_addr, 0x7f0000001000ull);
    EXPECT_EQ(h.rkey, 0x00030007u);
  }
  Header ack;
  ack.opcode = Opcode::kWriteAck;
  ack.status = WcStatus::kRemoteAccess;
  ack.seq = 9;
  uint8_t b[kHeaderBytes];
  encodeHeader(ack, b);
  Header h;
  ASSERT_EQ(parse(b, &h), ParseResult::kOk);
  EXPECT_EQ(h.status, WcStatus::kRemoteAccess);
  EXPECT_EQ(payloadBytes(h), 0u);
  Header resp;
  resp.opcode = Opcode::kReadResp;
  resp.length = 100;
  encodeHeader(resp, b);
  ASSERT_EQ(parse(b, &h), ParseResult::kOk);
  EXPECT_EQ(payloadBytes(h), 100u);
  EXPECT_EQ(payloadBytes(request(Opcode::kWriteReq)), 4096u);
  EXPECT_EQ(payloadBytes(request(Opcode::kReadReq)), 0u);
}

TEST(TcpWire, MalformedHeadersAreRefused) {
  uint8_t good[kHeaderBytes];
  encodeHeader(request(Opcode::kWriteReq), good);
  auto mutated = [&](size_t at, uint8_t value) {
    uint8_t b[kHeaderBytes];
    std::memcpy(b, good, sizeof(b));
    b[at] = value;
    return parse(b);
  };
  EXPECT_EQ(mutated(28, 0), ParseResult::kBadMagic);
  EXPECT_EQ(mutated(0, 2), ParseResult::kBadVersion);
  EXPECT_EQ(mutated(1, 0), ParseResult::kBadOpcode);
  EXPECT_EQ(mutated(1, 7), ParseResult::kBadOpcode);
  EXPECT_EQ(mutated(1, 5), ParseResult::kBadField);    // a SEND_REQ names no remote address
  EXPECT_EQ(mutated(3, 1), ParseResult::kBadField);    // reserved byte
  EXPECT_EQ(mutated(2, 1), ParseResult::kBadField);    // status on a request
  EXPECT_EQ(mutated(2, 200), ParseResult::kBadField);  // no such status
  EXPECT_EQ(mutated(7, 0x80 | good[7]), ParseResult::kBadLength);  // > 2 GiB
  Header small;
  EXPECT_EQ(parseHeader(good, 1024, &small), ParseResult::kBadLength);  // over the limit
  // Responses carry no address or key; an ACK no length; a failed READ no payload.
  Header r;
  r.opcode = Opcode::kWriteAck;
  r.rkey = 1;
  uint8_t b[kHeaderBytes];
  encodeHeader(r, b);
  EXPECT_EQ(parse(b), ParseResult::kBadField);
  r.rkey = 0;
  r.length = 1;
  encodeHeader(r, b);
  EXPECT_EQ(parse(b), ParseResult::kBadLength);
  r.opcode = Opcode::kReadResp;
  r.status = WcStatus::kRemoteAccess;
  encodeHeader(r, b);
  EXPECT_EQ(parse(b), ParseResult::kBadLength);
  r.opcode = Opcode::kSendAck;  // a SEND_ACK carries no payload either
  r.status = WcStatus::kRnrRetryExceeded;
  encodeHeader(r, b);
  EXPECT_EQ(parse(b), ParseResult::kBadLength);
  r.length = 0;
  encodeHeader(r, b);
  EXPECT_EQ(parse(b), ParseResult::kOk);
}

TEST(TcpWire, ASendRequestCarriesItsPayloadAndNoAddress) {
  Header h;
  h.opcode = Opcode::kSendReq;
  h.length = 300;
  h.seq = 9;
  uint8_t b[kHeaderBytes];
  encodeHeader(h, b);
  Header out;
  ASSERT_EQ(parseHeader(b, kMaxWireLength, &out), ParseResult::kOk);
  EXPECT_EQ(out.opcode, Opcode::kSendReq);
  EXPECT_TRUE(isRequest(out.opcode));
  EXPECT_EQ(payloadBytes(out), 300u);
}

Hello hello() {
  Hello h;
  h.src_qp = 0x4001;
  h.dst_qp = 0x8002;
  h.src.gid[15] = 1;
  h.src.lid = 7000;
  h.dst.gid[15] = 2;
  h.dst.lid = 7001;
  h.max_send_wr = 128;
  return h;
}

TEST(TcpWire, HellosRoundTripAndAreChecked) {
  uint8_t b[kHelloBytes];
  encodeHello(hello(), b);
  Hello h;
  ASSERT_EQ(parseHello(b, &h), ParseResult::kOk);
  EXPECT_EQ(h.kind, HelloKind::kHello);
  EXPECT_EQ(h.src_qp, 0x4001u);
  EXPECT_EQ(h.dst_qp, 0x8002u);
  EXPECT_EQ(h.src, hello().src);
  EXPECT_EQ(h.dst, hello().dst);
  EXPECT_EQ(h.max_send_wr, 128u);

  Hello bad = hello();
  bad.dst_qp = 0;  // no QP
  encodeHello(bad, b);
  EXPECT_EQ(parseHello(b, &h), ParseResult::kBadField);
  bad = hello();
  bad.src_qp = 1u << 24;  // not 24 bits
  encodeHello(bad, b);
  EXPECT_EQ(parseHello(b, &h), ParseResult::kBadField);
  bad = hello();
  bad.max_send_wr = 0;
  encodeHello(bad, b);
  EXPECT_EQ(parseHello(b, &h), ParseResult::kBadField);
  bad = hello();
  bad.kind = HelloKind::kReject;  // a reject names its reason
  encodeHello(bad, b);
  EXPECT_EQ(parseHello(b, &h), ParseResult::kBadField);
  bad.reason = RejectReason::kNoSuchQp;
  encodeHello(bad, b);
  EXPECT_EQ(parseHello(b, &h), ParseResult::kOk);
  // Another version parses far enough to be answered with kVersion.
  bad = hello();
  bad.version = 2;
  encodeHello(bad, b);
  EXPECT_EQ(parseHello(b, &h), ParseResult::kBadVersion);
  EXPECT_EQ(h.version, 2);
  encodeHello(hello(), b);
  b[0] ^= 1;
  EXPECT_EQ(parseHello(b, &h), ParseResult::kBadMagic);
  encodeHello(hello(), b);
  b[6] = 9;  // kind
  EXPECT_EQ(parseHello(b, &h), ParseResult::kBadOpcode);
  encodeHello(hello(), b);
  b[63] = 1;  // reserved
  EXPECT_EQ(parseHello(b, &h), ParseResult::kBadField);
}

}  // namespace
}  // namespace tent::fabric::tcp
