// libFuzzer target: what etcd (or whoever answers in its place) sends the fleet
// floor - the gateway's JSON answers, watch streams, and the entries stored under
// the prefix (fleet/etcd_json.h, fleet/entry.h). Any bytes: no crash, leak or
// undefined behaviour; an accepted entry re-encodes to exactly its bytes; a signed
// entry verifies only under its own name and secret.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fleet/entry.h"
#include "fleet/etcd_json.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  using namespace tent::fleet;
  int64_t rev = 0;
  (void)parseRange(text, &rev);
  (void)parseLeaseGrant(text);
  (void)parseKeepAlive(text);
  (void)parseAuthToken(text);
  (void)parseError(text);
  (void)parseWatchMessage(text);
  std::string buffer(text);
  (void)takeLines(&buffer, 1024);
  auto decoded = base64Decode(text);
  if (decoded.ok()) {
    auto again = base64Decode(base64Encode(*decoded));
    FUZZ_CHECK(again.ok() && *again == *decoded, "base64 does not round-trip");
  }
  const tent::control::Secret none;
  auto entry = decodeEntry("fuzz", text, none);
  if (entry.ok()) {
    FUZZ_CHECK(encodeEntry(*entry, none) == text || entry->is_signed,
               "an unsigned entry does not re-encode to its bytes");
  }
  const auto secret = tent::control::Secret::fromBytes(std::string(32, 'f'));
  auto signed_entry = decodeEntry("fuzz", text, secret);
  if (signed_entry.ok()) {
    FUZZ_CHECK(signed_entry->is_signed, "an unsigned entry verified under a secret");
    FUZZ_CHECK(!decodeEntry("fuzz2", text, secret).ok(), "an entry verified under another name");
  }
  (void)decodeBlob(text, secret);
  return 0;
}
