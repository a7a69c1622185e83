// libFuzzer target: the control protocol's frame header and the small messages a
// peer sends before and after authenticating (engine/metadata/control_frames.h).
// The first byte picks the parser; the rest is its input. No crash, leak or undefined
// behaviour; a rejection is InvalidArgument naming the problem; an accepted message
// re-encodes to exactly its input (one encoding per message).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "wire/control_frames.h"
#include "tests/fuzz/fuzz_check.h"

namespace m = tent::metadata;

namespace {

template <typename T, typename Encode>
void roundTrip(const tent::Result<T>& parsed, std::span<const uint8_t> in, Encode encode,
               const char* what) {
  if (!parsed.ok()) {
    tent::fuzz::checkRejection(parsed.status(), "");
    return;
  }
  const std::vector<uint8_t> again = encode(*parsed);
  FUZZ_CHECK(std::equal(again.begin(), again.end(), in.begin(), in.end()),
             std::string(what) + " does not re-encode to its input");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::span<const uint8_t> in(data + 1, size - 1);
  switch (data[0] % 7) {
    case 0: {
      if (in.size() < m::kFrameHeaderBytes) return 0;
      m::FrameHeader h;
      tent::Status s = m::parseFrameHeader(in.first<m::kFrameHeaderBytes>(), 4096, &h);
      if (!s.ok()) {
        tent::fuzz::checkRejection(s, "control frame: ");
        return 0;
      }
      FUZZ_CHECK(h.length <= 4096 && m::isKnownFrameType(static_cast<uint16_t>(h.type)),
                 "an accepted header out of its limits");
      uint8_t again[m::kFrameHeaderBytes];
      m::encodeFrameHeader(h.type, h.length, again);
      FUZZ_CHECK(std::equal(again, again + m::kFrameHeaderBytes, in.begin()),
                 "header does not re-encode");
      return 0;
    }
    case 1:
      roundTrip(m::parseHello(in), in, m::encodeHello, "HELLO");
      return 0;
    case 2:
      roundTrip(m::parseChallenge(in), in, m::encodeChallenge, "CHALLENGE");
      return 0;
    case 3:
      roundTrip(m::parseAuth(in), in, m::encodeAuth, "AUTH");
      return 0;
    case 4:
      roundTrip(m::parseRelease(in), in, m::encodeRelease, "RELEASE");
      return 0;
    case 5: {
      auto v = m::parseDescriptorRequest(in);
      if (!v.ok()) tent::fuzz::checkRejection(v.status(), "");
      else if (!in.empty()) roundTrip(v, in, m::encodeDescriptorRequest, "GET_DESCRIPTOR");
      return 0;
    }
    default: {
      tent::Status e = m::parseError(in);  // any text is an error; never OK
      FUZZ_CHECK(!e.ok(), "an ERROR frame that reads as OK");
      return 0;
    }
  }
}
