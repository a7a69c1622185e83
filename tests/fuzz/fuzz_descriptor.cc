// libFuzzer target: the segment descriptor a peer's control listener serves
// (metadata::parseDescriptor). Any bytes: no crash, leak, undefined behaviour or
// allocation beyond the input's size; a rejection names what is malformed; an
// accepted descriptor re-encodes to exactly its bytes and its lookups find every
// buffer and device it lists.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "wire/segment_descriptor.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using tent::metadata::SegmentDescriptor;

void checkLookups(const SegmentDescriptor& d) {
  for (const auto& b : d.buffers) {
    FUZZ_CHECK(d.findBuffer(b.addr, b.length) == &b, "findBuffer misses a whole buffer");
    FUZZ_CHECK(d.findBuffer(b.addr + b.length - 1, 1) == &b, "findBuffer misses a last byte");
    FUZZ_CHECK(d.findBuffer(b.addr, b.length + 1) != &b,
               "findBuffer accepts a range past a buffer");
    FUZZ_CHECK(b.rkeys.size() == d.devices.size(), "rkeys per device");
  }
  for (const auto& dev : d.devices) {
    const int i = d.deviceIndex(dev.name);
    FUZZ_CHECK(i >= 0 && d.devices[static_cast<size_t>(i)].name == dev.name,
               "deviceIndex misses '" + dev.name + "'");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  tent::Result<SegmentDescriptor> parsed = tent::metadata::parseDescriptor(bytes);
  if (!parsed.ok()) {
    tent::fuzz::checkRejection(parsed.status(), "malformed segment descriptor: ");
    return 0;
  }
  // Versions we know have one encoding: exactly the input again. A newer version's
  // records may carry fields we skip: ours must read back as the same descriptor.
  const auto version = static_cast<uint16_t>(data[4] | data[5] << 8);
  if (version <= tent::metadata::kDescriptorVersion) {
    const std::vector<uint8_t> again = tent::metadata::encodeDescriptor(*parsed, version);
    FUZZ_CHECK(std::equal(again.begin(), again.end(), bytes.begin(), bytes.end()),
               "re-encoding gives " + std::to_string(again.size()) + " bytes, not the " +
                   std::to_string(size) + " parsed");
  } else {
    auto back = tent::metadata::parseDescriptor(tent::metadata::encodeDescriptor(*parsed));
    FUZZ_CHECK(back.ok() && *back == *parsed, "a newer descriptor does not survive our encoding");
  }
  checkLookups(*parsed);
  return 0;
}
