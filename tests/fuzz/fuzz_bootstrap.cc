// libFuzzer target: the bootstrap message a peer sends over a control connection
// (metadata::parseBootstrap). Any bytes: no crash, leak or undefined behaviour; a
// rejection names what is malformed; an accepted message re-encodes to exactly the
// bytes it came from (the format has one encoding per message).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "tests/fuzz/fuzz_check.h"
#include "wire/bootstrap.h"
#include "wire/bootstrap_link.h"
#include "wire/bootstrap_notify.h"

using tent::metadata::BootstrapMessage;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  tent::Result<BootstrapMessage> parsed = tent::metadata::parseBootstrap(bytes);
  if (!parsed.ok()) {
    tent::fuzz::checkRejection(parsed.status(), "malformed bootstrap message: ");
    return 0;
  }
  // A parsed message has a full header: the version is bytes 4 and 5, little-endian.
  const auto version = static_cast<uint16_t>(data[4] | data[5] << 8);
  const std::vector<uint8_t> again = tent::metadata::encodeBootstrap(*parsed, version);
  FUZZ_CHECK(std::equal(again.begin(), again.end(), bytes.begin(), bytes.end()),
             "re-encoding gives " + std::to_string(again.size()) + " bytes, not the " +
                 std::to_string(size) + " parsed");
  FUZZ_CHECK(!parsed->data_qp_nums.empty() &&
                 parsed->data_qp_nums.size() <= tent::metadata::kMaxBootstrapQps,
             "QP count out of range");
  FUZZ_CHECK(version >= 2 || parsed->direct_qp_num == 0, "a v1 message with a direct QP");
  FUZZ_CHECK(version >= 3 || parsed->extensions.empty(), "extensions before v3");
  FUZZ_CHECK(parsed->extensions.size() <= tent::metadata::kMaxBootstrapExtensions,
             "too many extensions");
  for (const auto& e : parsed->extensions)
    FUZZ_CHECK(parsed->extension(static_cast<tent::metadata::BootstrapTag>(e.tag)) == &e.bytes,
               "an extension tag held twice");
  FUZZ_CHECK(tent::metadata::sameQpWiring(*parsed, *parsed), "a message differs from itself");
  // Each known tag's owner parses its bytes: any bytes, no crash; what it accepts
  // re-encodes to what it read (the link and PSN tags have one encoding).
  using tent::metadata::BootstrapTag;
  if (const auto* link = parsed->extension(BootstrapTag::kLink)) {
    auto l = tent::metadata::decodeLinkTag(*link);
    if (l.ok())
      FUZZ_CHECK(tent::metadata::encodeLinkTag(*l) == *link, "kLink re-encodes differently");
  }
  if (const auto* psn = parsed->extension(BootstrapTag::kPsn)) {
    auto p = tent::metadata::decodePsnTag(*psn);
    if (p.ok()) FUZZ_CHECK(tent::metadata::encodePsnTag(*p) == *psn, "kPsn re-encodes differently");
  }
  if (const auto* qos = parsed->extension(BootstrapTag::kQos))
    (void)tent::metadata::decodeQosTag(*qos);  // unknown classes are skipped: no round trip
  (void)tent::metadata::notifyExtensionOf(*parsed);
  return 0;
}
