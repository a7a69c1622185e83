// libFuzzer target: what a tcp provider's service thread reads from a peer's
// connection (engine/fabric/tcp/tcp_wire.h): a 64-byte HELLO, then message headers
// with their payloads. Any bytes: no crash or undefined behaviour; an accepted HELLO
// or header re-encodes to exactly its bytes (one encoding per message) and keeps the
// limits the receive path relies on.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "fabric/tcp/tcp_wire.h"
#include "tests/fuzz/fuzz_check.h"

using namespace tent::fabric::tcp;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size >= kHelloBytes) {
    Hello h;
    const ParseResult r = parseHello(data, &h);
    if (r == ParseResult::kOk) {
      uint8_t again[kHelloBytes];
      encodeHello(h, again);
      FUZZ_CHECK(std::memcmp(again, data, kHelloBytes) == 0, "a hello re-encodes differently");
      FUZZ_CHECK(
          h.kind != HelloKind::kHello || (h.src_qp != 0 && h.dst_qp != 0 && h.src_qp < (1u << 24) &&
                                          h.dst_qp < (1u << 24) && h.max_send_wr != 0),
          "an accepted hello names no QP or no depth");
      FUZZ_CHECK(h.kind != HelloKind::kReject || h.reason != RejectReason::kNone,
                 "a reject without a reason");
    }
  }
  // The message stream: headers back to back, each followed by its payload.
  constexpr uint64_t kLimit = uint64_t{1} << 20;
  size_t off = 0;
  while (off + kHeaderBytes <= size) {
    Header h;
    if (parseHeader(data + off, kLimit, &h) != ParseResult::kOk) break;
    uint8_t again[kHeaderBytes];
    encodeHeader(h, again);
    FUZZ_CHECK(std::memcmp(again, data + off, kHeaderBytes) == 0,
               "a header re-encodes differently at offset " + std::to_string(off));
    FUZZ_CHECK(h.length <= kLimit, "a length over the limit was accepted");
    FUZZ_CHECK(payloadBytes(h) <= h.length, "more payload than length");
    FUZZ_CHECK(isRequest(h.opcode) || (h.remote_addr == 0 && h.rkey == 0),
               "a response with an address");
    FUZZ_CHECK(h.opcode != Opcode::kSendReq || (h.remote_addr == 0 && h.rkey == 0),
               "a SEND with an address");
    off += kHeaderBytes;
    off += static_cast<size_t>(std::min<uint64_t>(payloadBytes(h), size - off));
  }
  return 0;
}
